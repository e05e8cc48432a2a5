package upgrade

import "context"

// start starts the daemons of the now-live version on every online node.
type start struct{}

func (start) Name() string { return "start" }

func (start) Run(ctx context.Context, r *Run) error {
	return r.Command(ctx, r.Online, false, r.Config.Commands.DaemonsStart)
}
