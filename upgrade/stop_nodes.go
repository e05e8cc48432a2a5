package upgrade

import (
	"context"

	"github.com/cutover/cutover/upgrade/timeline"
)

// stopNodes stops the application's daemons on every other online node.
type stopNodes struct{}

func (stopNodes) Name() string { return "stop-nodes" }

// Drawn makes the stage a bar of the timeline.
func (stopNodes) Drawn() timeline.Kind { return timeline.Stop }

func (stopNodes) Where() Where { return OnOthers }

func (stopNodes) Run(ctx context.Context, r *Run) error {
	return r.daemons(ctx, r.Others(), false)
}

// Undo starts the daemons on the other nodes again.
func (stopNodes) Undo(ctx context.Context, r *Run) error {
	return r.daemons(ctx, r.Others(), true)
}
