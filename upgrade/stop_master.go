package upgrade

import (
	"context"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/timeline"
)

// stopMaster stops the application's daemons on the master first, so that no new work is
// handed out while the nodes are stopped.
type stopMaster struct{}

func (stopMaster) Name() string { return "stop-master" }

// Drawn makes the stage a bar of the timeline.
func (stopMaster) Drawn() timeline.Kind { return timeline.Stop }

func (stopMaster) Where() Where { return OnMaster }

func (stopMaster) Run(ctx context.Context, r *Run) error {
	return r.daemons(ctx, []nodes.Node{r.MasterNode()}, false)
}

// Undo starts the master's daemons again.
func (stopMaster) Undo(ctx context.Context, r *Run) error {
	return r.daemons(ctx, []nodes.Node{r.MasterNode()}, true)
}
