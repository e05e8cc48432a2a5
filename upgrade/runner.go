package upgrade

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/cutover/cutover/journal"
)

// Stage is one step of the stage machine. Run must be idempotent: a resumed run may run a
// stage again, and the stage must then check the real state rather than assume it.
type Stage interface {
	Name() string
	Run(ctx context.Context, r *Run) error
}

// undoer is a stage whose effects can be undone before the point of no return.
type undoer interface {
	Undo(ctx context.Context, r *Run) error
}

// skipper is a stage that has nothing to do in some runs, such as config-upgrade in a downgrade.
type skipper interface {
	Skip(r *Run) bool
}

// ponrStage is a stage that can be the run's point of no return.
type ponrStage interface {
	PONR(r *Run) bool
}

// onceOnly is a stage that an interrupted run does not repeat once it completed, such as the
// backup or the post-upgrade hook.
type onceOnly interface {
	Once() bool
}

// firstWriter is the first stage that changes anything; the operator confirms before it.
type firstWriter interface {
	FirstWrite()
}

// Runner runs a stage list: it journals every transition, undoes the completed stages in
// reverse when a stage fails or a signal arrives before the point of no return, pushes
// through to the end after it, and reports progress.
type Runner struct {
	Stages []Stage
	// Confirm, when set, is asked before the first stage that changes anything; an error
	// stops the run with nothing changed.
	Confirm func(ctx context.Context, r *Run) error
	// Start is the index in Stages of the first stage to run; a resumed run starts late.
	Start int
	// Prelude runs before Stages[Start], shown and journaled without a position: a resumed
	// run past the point of no return stops the daemons everywhere first.
	Prelude []Stage
	// Done are stages an earlier execution of the run completed, undone with the others if
	// this execution fails before the point of no return.
	Done []Stage
	// Past says an earlier execution already crossed the point of no return.
	Past bool

	mu          sync.Mutex
	past        bool // the point of no return has been crossed
	interrupted os.Signal
}

// Execute runs the stages of r from the first. It returns nil when every stage succeeded; an
// error for which IsPastPONR is true when the run crossed the point of no return and some
// stage failed; any other error when the run stopped before it and the completed stages were
// undone.
func (rn *Runner) Execute(ctx context.Context, r *Run) error {
	// Losing the operator's session never stops a run: SIGHUP is ignored, and a closed
	// stdout makes writes fail instead of killing the process (the log has everything).
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	stageCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for s := range sigs {
			rn.mu.Lock()
			switch {
			case rn.past:
				r.Warn("received %s past the point of no return: ignored, the run goes on to the end", s)
			case rn.interrupted != nil:
				r.Warn("received %s again: still undoing, the undo is not skipped", s)
			default:
				rn.interrupted = s
				r.Warn("received %s: stopping and undoing what was done", s)
				cancel()
			}
			rn.mu.Unlock()
		}
	}()

	rn.past = rn.Past
	started := append([]Stage(nil), rn.Done...)
	type step struct {
		i  int
		st Stage
	}
	var steps []step
	for _, st := range rn.Prelude {
		steps = append(steps, step{-1, st})
	}
	for i := rn.Start; i < len(rn.Stages); i++ {
		steps = append(steps, step{i, rn.Stages[i]})
	}
	for _, sp := range steps {
		i, st := sp.i, sp.st
		if o, ok := st.(onceOnly); ok && o.Once() && r.doneBefore(st.Name()) {
			rn.record(ctx, r, i, st, journal.Skipped, 0, "done by an earlier execution of this run")
			continue
		}
		if s, ok := st.(skipper); ok && s.Skip(r) {
			rn.record(ctx, r, i, st, journal.Skipped, 0, "")
			continue
		}
		if _, ok := st.(firstWriter); ok && rn.Confirm != nil {
			if err := rn.Confirm(stageCtx, r); err != nil {
				rn.finish(ctx, r, journal.Aborted)
				return err
			}
		}
		rn.mu.Lock()
		stop := stageCtx.Err() != nil && !rn.past
		isPONR := false
		if !stop && !rn.past {
			if p, ok := st.(ponrStage); ok && p.PONR(r) {
				isPONR, rn.past = true, true
			}
		}
		past := rn.past
		rn.mu.Unlock()
		if stop {
			return rn.rollBack(ctx, r, started, rn.interruptErr())
		}

		runCtx := stageCtx
		if past {
			runCtx = ctx // past the point of no return, signals no longer stop a stage
		}
		msg := ""
		if isPONR {
			msg = "point of no return"
		}
		rn.beginStage(r, i, st)
		rn.record(ctx, r, i, st, journal.Started, 0, msg)
		start := time.Now()
		err := holdAt(runCtx, st.Name())
		if err == nil {
			err = st.Run(runCtx, r)
		}
		d := time.Since(start)
		if errors.Is(err, errSkipped) {
			rn.record(ctx, r, i, st, journal.Skipped, d, "")
			continue
		}
		if err == nil {
			rn.record(ctx, r, i, st, journal.Done, d, "")
			started = append(started, st)
			continue
		}
		rn.record(ctx, r, i, st, journal.Failed, d, err.Error())
		started = append(started, st)
		if isPONR && isNotCrossed(err) {
			rn.mu.Lock()
			rn.past = false
			rn.mu.Unlock()
			past = false
		}
		if past {
			r.mu.Lock()
			r.failed = append(r.failed, st.Name())
			r.mu.Unlock()
			continue
		}
		if ierr := rn.interruptErr(); ierr != nil && stageCtx.Err() != nil {
			err = fmt.Errorf("%w (%s: %v)", ierr, st.Name(), err)
		} else {
			err = fmt.Errorf("%s: %w", st.Name(), err)
		}
		return rn.rollBack(ctx, r, started, err)
	}
	if failed := r.Failed(); len(failed) > 0 {
		rn.finish(ctx, r, journal.FailedPastPONR)
		return pastPONR(fmt.Errorf("the run went past the point of no return but %s failed; fix the cause and run 'cutover upgrade --resume'", joinNames(failed)))
	}
	rn.finish(ctx, r, journal.Succeeded)
	return nil
}

func (rn *Runner) interruptErr() error {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.interrupted == nil {
		return nil
	}
	return fmt.Errorf("interrupted by %s", rn.interrupted)
}

// rollBack undoes the started stages in reverse order, each on its own: one failing undo
// does not stop the others. Undo runs with ctx, which signals do not cancel.
func (rn *Runner) rollBack(ctx context.Context, r *Run, started []Stage, cause error) error {
	return rn.undo(ctx, r, started, cause, journal.RolledBack)
}

// Abort undoes the stages an interrupted run completed (rn.Done), in reverse, and ends the run
// as aborted. It is `cutover upgrade --abort` for a run before its point of no return.
func (rn *Runner) Abort(ctx context.Context, r *Run) error {
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Reset(syscall.SIGINT, syscall.SIGTERM)
	return rn.undo(ctx, r, rn.Done, nil, journal.Aborted)
}

// undo undoes started in reverse and finishes the run with outcome, unless an undo failed.
func (rn *Runner) undo(ctx context.Context, r *Run, started []Stage, cause error, outcome journal.Outcome) error {
	var undoErrs []error
	for i := len(started) - 1; i >= 0; i-- {
		st := started[i]
		u, ok := st.(undoer)
		if !ok {
			continue
		}
		idx := rn.index(st)
		rn.beginStage(r, idx, st)
		start := time.Now()
		err := u.Undo(ctx, r)
		if err != nil {
			r.mu.Lock()
			r.undoFailed = true
			r.mu.Unlock()
			undoErrs = append(undoErrs, fmt.Errorf("undo %s: %w", st.Name(), err))
			rn.record(ctx, r, idx, st, journal.UndoFailed, time.Since(start), err.Error())
			continue
		}
		rn.record(ctx, r, idx, st, journal.Undone, time.Since(start), "")
	}
	if len(undoErrs) > 0 {
		rn.finish(ctx, r, journal.FailedPastPONR)
		undoErr := errors.Join(undoErrs...)
		if cause == nil {
			return pastPONR(fmt.Errorf("undoing run %d failed, so the intent is kept: %w; fix the cause and run 'cutover upgrade --abort' again", r.ID, undoErr))
		}
		return pastPONR(fmt.Errorf("%w; and undoing it failed, so the intent is kept: %w; fix the cause and run 'cutover upgrade --abort'", cause, undoErr))
	}
	rn.finish(ctx, r, outcome)
	return cause
}

func (rn *Runner) index(st Stage) int {
	for i, s := range rn.Stages {
		if s.Name() == st.Name() {
			return i
		}
	}
	return -1
}

func (rn *Runner) beginStage(r *Run, i int, st Stage) {
	r.mu.Lock()
	r.stage = &stageState{name: st.Name(), index: i + 1, total: len(rn.Stages)}
	r.mu.Unlock()
}

// record journals one stage transition and reports it.
func (rn *Runner) record(ctx context.Context, r *Run, i int, st Stage, state journal.State, d time.Duration, msg string) {
	r.mu.Lock()
	var nodeResults []journal.NodeResult
	note := ""
	if r.stage != nil && r.stage.name == st.Name() && state != journal.Started {
		nodeResults = r.stage.nodes
		note = r.stage.note
		r.stage.nodes = nil
	}
	r.mu.Unlock()
	if msg == "" {
		msg = note
	}
	ev := journal.Event{Stage: st.Name(), Index: i + 1, State: state, Duration: d, Nodes: nodeResults, Message: msg}
	r.log.Printf("[%d/%d] %s %s %s %s", i+1, len(rn.Stages), st.Name(), state, d.Round(time.Millisecond), msg)
	if r.journal != nil && r.ID != 0 {
		if _, err := r.journal.Record(context.WithoutCancel(ctx), r.ID, ev); err != nil {
			r.Warn("journal: record %s %s: %v", st.Name(), state, err)
		}
	}
	e := Event{Time: time.Now(), Type: "stage", Run: r.ID, Stage: st.Name(), Index: i + 1, Total: len(rn.Stages),
		State: string(state), Duration: d, Message: msg, Nodes: nodeReports(nodeResults)}
	if state == journal.Done {
		e.State = "ok"
	}
	if state == journal.Undone || state == journal.UndoFailed {
		e.Type = "undo"
	}
	if p, ok := st.(ponrStage); ok && p.PONR(r) {
		e.PONR = true
	}
	for _, n := range nodeResults {
		e.Of++
		if n.OK {
			e.OK++
		}
	}
	r.report.Report(e)
}

func (rn *Runner) finish(ctx context.Context, r *Run, outcome journal.Outcome) {
	r.log.Printf("run %d: %s", r.ID, outcome)
	if r.journal != nil && r.ID != 0 {
		if err := r.journal.Finish(context.WithoutCancel(ctx), r.ID, outcome, time.Now()); err != nil {
			r.Warn("journal: finish run %d: %v", r.ID, err)
		}
	}
}

func joinNames(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	out := ""
	for i, n := range names {
		switch {
		case i == 0:
			out = n
		case i == len(names)-1:
			out += " and " + n
		default:
			out += ", " + n
		}
	}
	return out
}
