package upgrade

import (
	"context"
	"fmt"
	"path"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/staging"
)

// stagingPlace renames the checked temporary directories into place on every node, the share
// tree last, each after its manifest is recorded beside it: the version counts as installed
// only once both trees are there. With --replace, a differing copy is first moved aside and
// removed after. A tree the node held without its manifest gets its manifest.
type stagingPlace struct{ job *stagingJob }

func (stagingPlace) Name() string { return "place" }
func (stagingPlace) Where() Where { return OnAll }

// asideScript moves $1 aside to $2 (which must not exist), unless $1 is gone already.
const asideScript = `set -e
[ -e "$1" ] || [ -L "$1" ] || exit 0
rm -rf -- "$2"
mv -T -- "$1" "$2"`

func (s stagingPlace) Run(ctx context.Context, r *Run) error {
	j := s.job
	return r.OnNodes(ctx, r.Online, false, func(ctx context.Context, lc Conn, n nodes.Node) error {
		c, err := streamConn(lc)
		if err != nil {
			return onNode(n.Name, err)
		}
		states, sent := j.nodeStates(n.Name), j.nodeSent(n.Name)
		for i, t := range []struct {
			tree *staging.Tree
			dir  string
		}{{j.lib, j.libDir}, {j.share, j.shareDir}} {
			switch states[i] {
			case treeSame:
				continue
			case treeUnrecorded:
				// The node holds the tree, checked by checksum: only its manifest is missing.
				if err := staging.Record(ctx, c, t.tree, t.dir, t.dir); err != nil {
					return err
				}
				continue
			}
			old := path.Join(path.Dir(t.dir), "."+path.Base(t.dir)+".cutover-replaced")
			if states[i] == treeDiffers {
				if _, err := c.Run(ctx, "sh", "-c", asideScript, "cutover-stage", t.dir, old); err != nil {
					return fmt.Errorf("move %s aside: %w", t.dir, err)
				}
			}
			if err := staging.Place(ctx, c, t.tree, t.dir, sent[i]); err != nil {
				return err
			}
			if states[i] == treeDiffers {
				if _, err := c.Run(ctx, "rm", "-rf", "--", old); err != nil {
					return fmt.Errorf("remove the replaced %s: %w", t.dir, err)
				}
			}
		}
		return nil
	})
}
