package upgrade

import (
	"context"

	"github.com/cutover/cutover/nodes"
)

// pauseReconciler pauses the application's reconciler (Ganeti's watcher) for the whole run,
// so that it does not restart daemons cutover stopped. A reconciler that was paused before
// the run stays paused afterwards.
type pauseReconciler struct{}

func (pauseReconciler) Name() string { return "pause-reconciler" }

func (pauseReconciler) Where() Where { return OnMaster }

func (pauseReconciler) Skip(r *Run) bool { return r.Config.Commands.ReconcilerPause == "" }

func (pauseReconciler) Run(ctx context.Context, r *Run) error {
	was := "no"
	if cmd := r.Config.Commands.ReconcilerPaused; cmd != "" {
		paused, err := probe(ctx, r, cmd)
		if err != nil {
			return err
		}
		if paused {
			was = "yes"
		}
	}
	was, err := r.Learn(ctx, factReconcilerPause, was)
	if err != nil {
		return err
	}
	if was == "yes" {
		r.Note("was paused before")
		return nil
	}
	return r.Command(ctx, []nodes.Node{r.MasterNode()}, false, r.Config.Commands.ReconcilerPause)
}

// Undo lets the reconciler continue only when the run learned that it was not paused
// before: a probe cut short learned nothing, and then the pause never ran.
func (pauseReconciler) Undo(ctx context.Context, r *Run) error {
	if v, _ := r.Fact(factReconcilerPause); v != "no" {
		return nil
	}
	return continueReconciler(ctx, r)
}
