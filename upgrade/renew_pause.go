package upgrade

import (
	"context"
	"time"
)

// renewPause keeps the reconciler paused while the run holds the pause it took. A pause may
// expire (Ganeti's watcher pause lasts an hour), and a run that waits for a rebooted master
// or a slow stage can outlast it; the reconciler would then restart daemons the run stopped.
// Before each stage up to the one that lets the reconciler continue (undrain), once
// reconciler_pause_renew has passed since the pause or the last renewal, and before the
// first stage of an execution that resumes a run past its pause, the pause command runs
// again on the master. A failed renewal is a warning: the run goes on.
func (rn *Runner) renewPause(ctx context.Context, r *Run, next Stage) {
	every := r.Config.Commands.ReconcilerPauseRenew.Duration
	if every <= 0 || r.Config.Commands.ReconcilerPause == "" {
		return
	}
	if next.Name() == (pauseReconciler{}).Name() {
		rn.renewed = time.Now() // the stage pauses it now
		return
	}
	if v, ok := r.Fact(factReconcilerPause); !ok || v != "no" {
		return // paused before the run, or not by it (yet)
	}
	if end := rn.stageIndex(undrain{}.Name()); end >= 0 && rn.index(next) >= end {
		return // from here on the run lets the reconciler continue
	}
	if !rn.renewed.IsZero() && time.Since(rn.renewed) < every {
		return
	}
	// The renewal is not the stage's work: its result is not the stage's result on the
	// master, and its failure (the master's daemons not answering yet after a reboot) never
	// costs the master the stage itself.
	c, err := r.Conn(ctx, r.Inventory.Master)
	if err == nil {
		_, err = c.RunShell(ctx, r.expand(r.Config.Commands.ReconcilerPause, r.Inventory.Master))
	}
	if err != nil {
		r.Warn("renewing the reconciler's pause: %v", err)
	}
	rn.renewed = time.Now()
}

// stageIndex is the index in Stages of the stage called name, or -1.
func (rn *Runner) stageIndex(name string) int {
	for i, st := range rn.Stages {
		if st.Name() == name {
			return i
		}
	}
	return -1
}
