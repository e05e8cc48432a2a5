package upgrade

import "context"

// ensureDirs runs the new version's ensure-dirs on every online node, so that directories and
// modes are as the new version expects before its daemons start.
type ensureDirs struct{}

func (ensureDirs) Name() string { return "ensure-dirs" }

func (ensureDirs) Where() Where { return OnAll }

func (ensureDirs) Skip(r *Run) bool { return r.Config.Commands.EnsureDirs == "" }

func (ensureDirs) Run(ctx context.Context, r *Run) error {
	return r.Command(ctx, r.Online, false, r.Config.Commands.EnsureDirs)
}
