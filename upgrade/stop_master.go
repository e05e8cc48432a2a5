package upgrade

import (
	"context"

	"github.com/cutover/cutover/nodes"
)

// stopMaster stops the application's daemons on the master first, so that no new work is
// handed out while the nodes are stopped.
type stopMaster struct{}

func (stopMaster) Name() string { return "stop-master" }

func (stopMaster) Where() Where { return OnMaster }

func (stopMaster) Run(ctx context.Context, r *Run) error {
	return r.daemons(ctx, []nodes.Node{r.MasterNode()}, false)
}

// Undo starts the master's daemons again.
func (stopMaster) Undo(ctx context.Context, r *Run) error {
	return r.daemons(ctx, []nodes.Node{r.MasterNode()}, true)
}
