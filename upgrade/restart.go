package upgrade

import "context"

// restart stops and starts the daemons everywhere, so that they read the redistributed config.
type restart struct{}

func (restart) Name() string { return "restart" }

func (restart) Run(ctx context.Context, r *Run) error {
	if err := r.Command(ctx, r.Online, false, r.Config.Commands.DaemonsStop); err != nil {
		return err
	}
	return r.Command(ctx, r.Online, false, r.Config.Commands.DaemonsStart)
}
