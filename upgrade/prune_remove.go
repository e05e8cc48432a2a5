package upgrade

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/cutover/cutover/nodes"
)

// pruneRemove removes the versions pruneCheck found: each tree is first renamed to a hidden
// name (share first, so the version stops counting as installed at once), then removed, with
// whatever an interrupted prune left under such names.
type pruneRemove struct{ job *pruneJob }

func (pruneRemove) Name() string { return "remove" }
func (pruneRemove) Where() Where { return OnAll }

// pruneScript takes, after $1 (the share base) and $2 (the lib base), version directories: it
// renames each one's trees out of sight, share first, then removes them and any leftovers of
// an interrupted prune, and the manifests (staging.ManifestPath) of trees that are gone.
//
// A prune interrupted between a version's two renames left its share tree hidden and its lib
// tree in place: the version no longer counts as installed, so no check lists it again, and
// the script finishes that prune on its own (a share tree hidden by a prune, none under the
// version's name, and a lib tree still there), saying so on its output.
//
// Both bases are synced after the renames and after the removals, so the prune is on disk
// when the stage records it done (a power cut never brings back a version the journal says
// is gone).
const pruneScript = `set -e
share=$1 lib=$2
shift 2
for v in "$@"; do
	for base in "$share" "$lib"; do
		if [ -d "$base/$v" ] && [ ! -L "$base/$v" ]; then
			rm -rf -- "$base/.$v.cutover-prune"
			mv -T -- "$base/$v" "$base/.$v.cutover-prune"
		fi
	done
done
for d in "$share"/.*.cutover-prune; do
	[ -d "$d" ] && [ ! -L "$d" ] || continue
	v=${d##*/.}
	v=${v%.cutover-prune}
	if [ ! -e "$share/$v" ] && [ ! -L "$share/$v" ] && [ -d "$lib/$v" ] && [ ! -L "$lib/$v" ]; then
		rm -rf -- "$lib/.$v.cutover-prune"
		mv -T -- "$lib/$v" "$lib/.$v.cutover-prune"
		echo "finished an interrupted prune of $v"
	fi
done
sync -- "$share" "$lib"
for base in "$share" "$lib"; do
	for d in "$base"/.*.cutover-prune; do
		[ -e "$d" ] || continue
		rm -rf -- "$d"
	done
	for m in "$base"/.*.cutover-manifest; do
		[ -e "$m" ] || [ -L "$m" ] || continue
		v=${m##*/.}
		v=${v%.cutover-manifest}
		[ -e "$base/$v" ] || [ -L "$base/$v" ] || rm -f -- "$m"
	done
done
sync -- "$share" "$lib"`

func (s pruneRemove) Run(ctx context.Context, r *Run) error {
	j := s.job
	var finished []string
	err := r.OnNodes(ctx, r.Online, false, func(ctx context.Context, lc Conn, n nodes.Node) error {
		j.mu.Lock()
		list := j.remove[n.Name]
		j.mu.Unlock()
		c, err := streamConn(lc)
		if err != nil {
			return onNode(n.Name, err)
		}
		lib, share := r.Layout.Bases()
		argv := append([]string{"sh", "-c", pruneScript, "cutover-prune", share, lib}, list...)
		res, err := c.Run(ctx, argv...)
		if err != nil {
			return fmt.Errorf("remove %v: %w", list, err)
		}
		for _, line := range strings.Split(string(res.Stdout), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				j.mu.Lock()
				finished = append(finished, n.Name+": "+line)
				j.mu.Unlock()
			}
		}
		return nil
	})
	if len(finished) > 0 {
		sort.Strings(finished)
		r.Note("%s", strings.Join(finished, "; "))
	}
	return err
}
