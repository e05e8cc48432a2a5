package upgrade

import (
	"context"
	"fmt"
	"strings"

	"github.com/cutover/cutover/upgrade/timeline"
)

// finish verifies the cluster at the end of a run. When it and every stage before it
// succeeded, the runner records the run as done and then removes the intent, last of all; a
// run with a failed stage keeps its intent for `cutover upgrade --resume`.
type finish struct{}

func (finish) Name() string { return "finish" }

// Drawn makes the stage a bar of the timeline.
func (finish) Drawn() timeline.Kind { return timeline.Verify }

func (finish) Where() Where { return OnMaster }

func (finish) Run(ctx context.Context, r *Run) error {
	// No daemon of another version may run anywhere when the run ends done: the nodes' init
	// may have started one since the start stage looked.
	if err := r.checkDaemons(ctx, r.settled()); err != nil {
		return fmt.Errorf("daemons: %w; the intent is kept", err)
	}
	if behind := r.leftBehind(); len(behind) > 0 {
		// The cluster is mixed (a rolling run's failures within its budget) or short of a
		// node declared gone until 'cutover sync' catches the nodes up, and the
		// application's verify judges the whole cluster: the sync runs it.
		r.Note("verify not run: %s left out until 'cutover sync %s'", joinNames(behind), strings.Join(behind, " "))
	} else if cmd := r.Config.Commands.Verify; cmd != "" {
		if _, err := r.OnMaster(ctx, cmd); err != nil {
			return fmt.Errorf("verify: %w; the intent is kept", err)
		}
	}
	if failed := r.Failed(); len(failed) > 0 {
		return fmt.Errorf("%s failed: the intent is kept", joinNames(failed))
	}
	return nil
}
