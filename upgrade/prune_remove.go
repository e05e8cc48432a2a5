package upgrade

import (
	"context"
	"fmt"

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
// an interrupted prune, and the manifests (staging.ManifestPath) of trees that are gone. Both
// bases are synced after the renames and after the removals, so
// the prune is on disk when the stage records it done (a power cut never brings back a
// version the journal says is gone).
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
	return r.OnNodes(ctx, r.Online, false, func(ctx context.Context, lc Conn, n nodes.Node) error {
		j.mu.Lock()
		list := j.remove[n.Name]
		j.mu.Unlock()
		c, err := streamConn(lc)
		if err != nil {
			return onNode(n.Name, err)
		}
		lib, share := r.Layout.Bases()
		argv := append([]string{"sh", "-c", pruneScript, "cutover-prune", share, lib}, list...)
		if _, err := c.Run(ctx, argv...); err != nil {
			return fmt.Errorf("remove %v: %w", list, err)
		}
		return nil
	})
}
