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
	master := []nodes.Node{r.MasterNode()}
	var errs []error
	if v, ok := r.Fact(factQueueDrained); ok && v == "no" {
		errs = append(errs, r.Command(ctx, master, false, r.Config.Commands.QueueUndrain))
	} else if ok {
		r.Note("queue left drained, as it was before the run")
	}
	if v, ok := r.Fact(factReconcilerPause); ok && v == "no" {
		errs = append(errs, r.Command(ctx, master, false, r.Config.Commands.ReconcilerContinue))
	}
	return errors.Join(errs...)
}
