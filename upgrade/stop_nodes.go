package upgrade

import "context"

// stopNodes stops the application's daemons on every other online node.
type stopNodes struct{}

func (stopNodes) Name() string { return "stop-nodes" }

func (stopNodes) Where() Where { return OnOthers }

func (stopNodes) Run(ctx context.Context, r *Run) error {
	return r.daemons(ctx, r.Others(), false)
}

// Undo starts the daemons on the other nodes again.
func (stopNodes) Undo(ctx context.Context, r *Run) error {
	return r.daemons(ctx, r.Others(), true)
}
