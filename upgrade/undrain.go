package upgrade

import (
	"context"
	"errors"

	"github.com/cutover/cutover/nodes"
)

// undrain opens the queue again and lets the reconciler continue, each only if cutover was the
// one that drained or paused it.
type undrain struct{}

func (undrain) Name() string { return "undrain" }

func (undrain) Where() Where { return OnMaster }

func (undrain) Run(ctx context.Context, r *Run) error {
	var errs []error
	if v, ok := r.Fact(factQueueDrained); ok && v == "no" {
		errs = append(errs, undrainQueue(ctx, r))
	} else if ok {
		r.Note("queue left drained, as it was before the run")
	}
	if v, ok := r.Fact(factReconcilerPause); ok && v == "no" {
		errs = append(errs, continueReconciler(ctx, r))
	}
	return errors.Join(errs...)
}

// undrainQueue runs queue_undrain on the master, unless the queue_drained probe says that the
// queue is open already. A resumed run repeats the undrain of an execution that ended later,
// and an application's undrain need not be idempotent: Ganeti 3.0's and 3.1's master daemon
// never answers an undrain of an open queue, so the command hangs until its own timeout.
func undrainQueue(ctx context.Context, r *Run) error {
	cmds := r.Config.Commands
	return releaseIfHeld(ctx, r, cmds.QueueDrained, cmds.QueueUndrain, "queue open already")
}

// continueReconciler runs reconciler_continue on the master, unless the reconciler_paused
// probe says that the reconciler runs already, for the same reason as undrainQueue.
func continueReconciler(ctx context.Context, r *Run) error {
	cmds := r.Config.Commands
	return releaseIfHeld(ctx, r, cmds.ReconcilerPaused, cmds.ReconcilerContinue, "reconciler running already")
}

// releaseIfHeld runs release on the master unless held, a probe that exits 0 while the hold
// (a drain, a pause) is in place, says it is gone; then it notes gone instead. Without a
// probe, release runs.
func releaseIfHeld(ctx context.Context, r *Run, held, release, gone string) error {
	if held != "" {
		on, err := probe(ctx, r, held)
		if err != nil {
			return err
		}
		if !on {
			r.Note("%s", gone)
			return nil
		}
	}
	return r.Command(ctx, []nodes.Node{r.MasterNode()}, false, release)
}
