package upgrade

import (
	"context"

	"github.com/cutover/cutover/upgrade/timeline"
)

// syncSwitch points the links of every node a sync works on at the live version, each link
// replaced atomically and read back; links missing on a fresh installation are created, links
// left on two versions are repaired. It is the sync's point of no return: the nodes then run
// the live version's tree, and a failure after it is fixed by running the sync again.
type syncSwitch struct{}

func (syncSwitch) Name() string { return "switch" }

// Drawn makes the stage a bar of the timeline.
func (syncSwitch) Drawn() timeline.Kind { return timeline.Switch }

func (syncSwitch) Where() Where { return OnAll }

func (syncSwitch) PONR(Direction) bool { return true }

func (syncSwitch) Run(ctx context.Context, r *Run) error {
	return switchAll(ctx, r, r.ToVersion)
}
