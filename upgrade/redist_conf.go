package upgrade

import "context"

// redistConf runs the application's own redistribution command on the master (Ganeti's
// redist-conf needs the daemons up). Without one, cutover copied the config right after the
// config stage instead, and this stage is skipped.
type redistConf struct{}

func (redistConf) Name() string { return "redist-conf" }

func (redistConf) Where() Where { return OnMaster }

func (redistConf) Skip(r *Run) bool { return r.Config.Commands.RedistConf == "" }

func (redistConf) Run(ctx context.Context, r *Run) error {
	_, err := r.OnMaster(ctx, r.Config.Commands.RedistConf)
	return err
}
