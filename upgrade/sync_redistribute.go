package upgrade

import "context"

// syncRedistribute copies the [config].redistribute files from the master to every node a
// sync works on, before their daemons start, so that they start on the cluster's config. An
// application that redistributes its config itself (redist_conf) does it in redist-conf
// instead, once the daemons are up.
type syncRedistribute struct{}

func (syncRedistribute) Name() string { return "redistribute" }

func (syncRedistribute) Where() Where { return OnOthers }

func (syncRedistribute) Skip(r *Run) bool {
	return r.Config.Commands.RedistConf != "" || len(r.Config.Config.Redistribute) == 0
}

func (syncRedistribute) Run(ctx context.Context, r *Run) error {
	return redistribute(ctx, r)
}
