package upgrade

import "context"

// postUpgrade runs the new version's post-upgrade hook on the master, told the version the
// cluster came from.
type postUpgrade struct{}

func (postUpgrade) Name() string { return "post-upgrade" }

func (postUpgrade) Where() Where { return OnMaster }

func (postUpgrade) Skip(r *Run) bool { return r.Config.Commands.PostUpgrade == "" }

func (postUpgrade) Run(ctx context.Context, r *Run) error {
	_, err := r.OnMaster(ctx, r.Config.Commands.PostUpgrade)
	return err
}

// Once makes a resumed run skip the stage when an earlier execution completed it.
func (postUpgrade) Once() bool { return true }
