package upgrade

import "context"

// stopNodes stops the application's daemons on every other online node.
type stopNodes struct{}

func (stopNodes) Name() string { return "stop-nodes" }

func (stopNodes) Run(ctx context.Context, r *Run) error {
	return r.Command(ctx, r.Others(), false, r.Config.Commands.DaemonsStop)
}

// Undo starts the daemons on the other nodes again.
func (stopNodes) Undo(ctx context.Context, r *Run) error {
	return r.Command(ctx, r.Others(), false, r.Config.Commands.DaemonsStart)
}
