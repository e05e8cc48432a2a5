package upgrade

import (
	"context"
	"errors"
	"fmt"
	"os/signal"
	"syscall"

	"github.com/cutover/cutover/journal"
)

// rollBack records that the run travels back, durably, then undoes every stage any
// execution of it started, in reverse, and ends it as rolled back.
func (rn *Runner) rollBack(ctx context.Context, r *Run, cause error) error {
	if err := r.setTravel(ctx, journal.RollingBack); err != nil {
		r.Warn("journal: %v", err)
	}
	return rn.undo(ctx, r, cause, journal.RolledBack)
}

// Abort undoes every stage the run started, in reverse, and ends the run as aborted. It is
// `cutover upgrade --abort` for a run before its point of no return, and finishes the undo of
// a run that was rolling back when it was interrupted.
func (rn *Runner) Abort(ctx context.Context, r *Run, travel journal.Travel) error {
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Reset(syscall.SIGINT, syscall.SIGTERM)
	if err := r.setTravel(ctx, travel); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	outcome := journal.Aborted
	var cause error
	if travel == journal.RollingBack {
		outcome = journal.RolledBack
		cause = fmt.Errorf("run %d was rolling back when it was interrupted: the undo is finished and %s is back at %s", r.ID, r.Config.App, r.From)
	}
	return rn.undo(ctx, r, cause, outcome)
}

// undo undoes, in reverse order and each on its own, every stage of the list any execution
// of the run started, then records outcome and only then releases the intent. When an undo
// fails, the run keeps its intent and the error says so.
func (rn *Runner) undo(ctx context.Context, r *Run, cause error, outcome journal.Outcome) error {
	if err := rn.undoStarted(ctx, r); err != nil {
		rn.finish(ctx, r, journal.FailedPastPONR)
		if cause == nil {
			return pastPONR(fmt.Errorf("undoing run %d failed, so the intent is kept: %w; fix the cause and run 'cutover upgrade --abort' again", r.ID, err))
		}
		return pastPONR(fmt.Errorf("%w; and undoing it failed, so the intent is kept: %w; fix the cause and run 'cutover upgrade --abort'", cause, err))
	}
	rn.finish(ctx, r, outcome)
	if rel := rn.releaser(); rel != nil && r.history.wasStarted(rel.(Stage).Name()) {
		st := rel.(Stage)
		idx := rn.index(st)
		rn.beginStage(r, idx, st)
		start := r.now()
		if err := rel.Undo(ctx, r); err != nil {
			rn.record(ctx, r, idx, st, journal.UndoFailed, r.now().Sub(start), err.Error())
			return pastPONR(fmt.Errorf("run %d is %s, but its intent could not be removed: %w; run 'cutover upgrade --resume' to remove it", r.ID, outcome, err))
		}
		rn.record(ctx, r, idx, st, journal.Undone, r.now().Sub(start), "")
	}
	return cause
}

// undoStarted undoes every stage but the releaser that any execution of the run started, in
// reverse list order, each on its own: one failing undo does not stop the others.
func (rn *Runner) undoStarted(ctx context.Context, r *Run) error {
	var errs []error
	for i := len(rn.Stages) - 1; i >= 0; i-- {
		st := rn.Stages[i]
		u, ok := st.(undoer)
		if _, rel := st.(releaser); !ok || rel || !r.history.wasStarted(st.Name()) {
			continue
		}
		rn.beginStage(r, i, st)
		start := r.now()
		if err := u.Undo(ctx, r); err != nil {
			r.mu.Lock()
			r.undoFailed = true
			r.mu.Unlock()
			errs = append(errs, fmt.Errorf("undo %s: %w", st.Name(), err))
			rn.record(ctx, r, i, st, journal.UndoFailed, r.now().Sub(start), err.Error())
			continue
		}
		rn.record(ctx, r, i, st, journal.Undone, r.now().Sub(start), "")
	}
	return errors.Join(errs...)
}

// releaser returns the stage of the list that releases the run, or nil.
func (rn *Runner) releaser() releaser {
	for _, st := range rn.Stages {
		if rel, ok := st.(releaser); ok {
			return rel
		}
	}
	return nil
}
