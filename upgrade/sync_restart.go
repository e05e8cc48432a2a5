package upgrade

// syncRestart stops and starts the daemons on every node a sync works on after the
// application's redist_conf sent them its config, so that they read it. Without redist_conf
// the config was copied before the daemons started, and the stage is skipped.
type syncRestart struct{ restart }

func (syncRestart) Skip(r *Run) bool { return r.Config.Commands.RedistConf == "" }
