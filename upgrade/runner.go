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
// stage again, and the stage must then check the real state rather than assume it. A stage
// carries its own facts: its name (in the journal, the output and plan), where it works, and
// through the optional interfaces below whether it can be undone, whether it applies to a
// run, whether it is the point of no return of a direction, whether a resumed run restarts
// at it, and whether it changes anything. Everything else (plan, resume, dry run, the
// confirmation, the tests) derives from the stage list, never from a second list of names.
type Stage interface {
	Name() string
	Where() Where
	Run(ctx context.Context, r *Run) error
}

// Where says which nodes a stage works on.
type Where string

// Where a stage works.
const (
	OnMaster Where = "master" // the master alone
	OnAll    Where = "all"    // every online node (the master last where order matters)
	OnOthers Where = "others" // every online node but the master
)

// undoer is a stage whose effects can be undone before the point of no return.
type undoer interface {
	Undo(ctx context.Context, r *Run) error
}

// skipper is a stage that has nothing to do in some runs, such as config-upgrade in a downgrade.
type skipper interface {
	Skip(r *Run) bool
}

// ponrStage is a stage that is the point of no return of the directions it names.
type ponrStage interface {
	PONR(d Direction) bool
}

// restarter is a stage a resumed run starts at: past is whether the run crossed its point
// of no return. The first stage of the list that says so is the one.
type restarter interface {
	RestartAt(d Direction, past bool) bool
}

// readOnly is a stage that changes nothing: a dry run runs the read-only stages at the head
// of the list, and the operator confirms before the first stage that is not.
type readOnly interface {
	ReadOnly()
}

// onceOnly is a stage that an interrupted run does not repeat once it completed, such as the
// backup or the post-upgrade hook.
type onceOnly interface {
	Once() bool
}

// leaver is a stage that a signal past the point of no return ends with the run left pending
// (the watch), where every other stage ignores it: the stage's context is cancelled, and the
// stage returns a watchLeft error.
type leaver interface {
	Leaves()
}

// releaser is the stage whose undo ends the run's pending state (the intent): the runner
// records the run's outcome before undoing it, and undoes it after a successful run too.
type releaser interface {
	undoer
	Releases()
}

// PONRStage names the stage of stages that is the point of no return of direction d, or ""
// when none is.
func PONRStage(stages []Stage, d Direction) string {
	for _, st := range stages {
		if p, ok := st.(ponrStage); ok && p.PONR(d) {
			return st.Name()
		}
	}
	return ""
}

// restartIndex is the index in stages of the stage a resumed run starts at.
func restartIndex(stages []Stage, d Direction, past bool) int {
	for i, st := range stages {
		if rs, ok := st.(restarter); ok && rs.RestartAt(d, past) {
			return i
		}
	}
	return len(stages)
}

// readOnlyHead is the number of read-only stages at the head of stages: what a dry run runs.
func readOnlyHead(stages []Stage) int {
	for i, st := range stages {
		if _, ok := st.(readOnly); !ok {
			return i
		}
	}
	return len(stages)
}

// Runner runs a stage list: it journals every transition, undoes in reverse every stage any
// execution of the run started when a stage fails or a signal arrives before the point of no
// return, pushes through to the end after it, and reports progress.
type Runner struct {
	Stages []Stage
	// Confirm, when set, is asked before the first stage that changes anything; an error
	// stops the run with nothing changed. It may also record the run in the journal (a new
	// run is recorded only once its checks passed and the operator said yes, so that a
	// refusal or a declined prompt leaves no run): the stages before it that had no run
	// to be journaled in are journaled then.
	Confirm func(ctx context.Context, r *Run) error
	// Start is the index in Stages of the first stage to run; a resumed run starts late.
	Start int
	// Prelude runs before Stages[Start], shown and journaled without a position: a resumed
	// run past the point of no return stops the daemons everywhere first.
	Prelude []Stage
	// Redo undoes, before Stages[Start], every stage an earlier execution started, keeping
	// the run pending: a run resumed before its point of no return starts again from a
	// cluster as it was.
	Redo bool

	mu          sync.Mutex
	early       []journal.Event // stage records made before the run was in the journal
	past        bool            // the point of no return has been crossed
	interrupted os.Signal
	renewed     time.Time               // when this execution last paused the reconciler (renew_pause.go)
	leave       context.CancelCauseFunc // ends the running stage that leaves on a signal (leaver)
}

// Execute runs the stages of r from Start. It returns nil when every stage succeeded; an
// error for which IsPastPONR is true when the run crossed the point of no return and some
// stage failed; any other error when the run stopped before it and everything was undone.
func (rn *Runner) Execute(ctx context.Context, r *Run) error {
	// Losing the operator's session never stops a run: SIGHUP is ignored, and a closed
	// stdout makes writes fail instead of killing the process (the log has everything).
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	stageCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go rn.onSignals(r, sigs, cancel)

	rn.setPast(r.pastPONR)
	if rn.Redo && !rn.past {
		if err := rn.undoStarted(ctx, r); err != nil {
			return pastPONR(fmt.Errorf("run %d: undoing what its earlier execution did, before starting it again: %w; the intent is kept: fix the cause and run 'cutover upgrade --resume' or '--abort'", r.ID, err))
		}
	}
	ex := &execution{ctx: ctx, stageCtx: stageCtx, r: r, ponr: PONRStage(rn.Stages, r.Direction), confirmed: rn.Confirm == nil}
	for _, sp := range rn.steps() {
		if end, err := rn.step(ex, sp); end {
			return err
		}
	}
	return rn.end(ctx, r)
}

// onSignals handles SIGINT and SIGTERM while the run goes on: before the point of no return
// the first one cancels the stages (cancel) and the run is undone; past it, one ends a watch
// that leaves on a signal (leaver) and is otherwise ignored.
func (rn *Runner) onSignals(r *Run, sigs <-chan os.Signal, cancel context.CancelFunc) {
	for s := range sigs {
		rn.mu.Lock()
		switch {
		case rn.past && rn.leave != nil:
			if r.Kind == KindSync {
				r.Warn("received %s: ending the sync's watch early", s)
			} else {
				r.Warn("received %s: leaving the watch to 'cutover upgrade --resume' (or the boot resume); 'cutover upgrade --abort' ends it", s)
			}
			rn.leave(&signalled{s})
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
}

// stageAt is one stage of an execution: its index in Stages, -1 for a stage of the Prelude.
type stageAt struct {
	i  int
	st Stage
}

// steps are the stages this execution runs, in order: the Prelude, then Stages from Start.
func (rn *Runner) steps() []stageAt {
	var steps []stageAt
	for _, st := range rn.Prelude {
		steps = append(steps, stageAt{-1, st})
	}
	for i := rn.Start; i < len(rn.Stages); i++ {
		steps = append(steps, stageAt{i, rn.Stages[i]})
	}
	return steps
}

// execution is what the steps of one Execute share: its context, the context signals cancel
// (stageCtx), the run, the name of its point-of-no-return stage, and whether the operator
// confirmed the run (or had not to).
type execution struct {
	ctx, stageCtx context.Context
	r             *Run
	ponr          string
	confirmed     bool
}

// step runs one stage of the execution ex, or skips it, and records its outcome. end is true
// when the run ends with it, err being what Execute returns.
func (rn *Runner) step(ex *execution, sp stageAt) (end bool, err error) {
	ctx, r, i, st := ex.ctx, ex.r, sp.i, sp.st
	if o, ok := st.(onceOnly); ok && o.Once() && r.history.doneBefore(st.Name()) {
		rn.record(ctx, r, i, st, journal.Skipped, 0, "done by an earlier execution of this run")
		return false, nil
	}
	if s, ok := st.(skipper); ok && s.Skip(r) {
		rn.record(ctx, r, i, st, journal.Skipped, 0, "")
		return false, nil
	}
	if _, ro := st.(readOnly); !ro && !ex.confirmed {
		ex.confirmed = true
		if err := rn.Confirm(ex.stageCtx, r); err != nil {
			rn.finish(ctx, r, journal.Aborted)
			return true, err
		}
		if err := rn.journalEarly(ctx, r); err != nil {
			return true, err
		}
	}
	isPONR, past, err := rn.enter(ex, sp)
	if err != nil {
		return true, err
	}
	runCtx := ex.stageCtx
	if past {
		runCtx = ctx // past the point of no return, signals no longer stop a stage
	}
	r.history.markStarted(st.Name())
	start := r.now()
	err = rn.runStage(runCtx, r, st, past)
	return rn.ended(ex, sp, err, r.now().Sub(start), isPONR, past)
}

// enter begins stage sp: it stops the run (undoing it) when a signal arrived before the point
// of no return, crosses the point of no return durably when sp is its stage, and journals that
// the stage started. isPONR is whether sp is the point-of-no-return stage, past whether the
// run is past that point; a non-nil error is what Execute returns.
func (rn *Runner) enter(ex *execution, sp stageAt) (isPONR, past bool, err error) {
	ctx, r, i, st := ex.ctx, ex.r, sp.i, sp.st
	rn.mu.Lock()
	stop := ex.stageCtx.Err() != nil && !rn.past
	// The point-of-no-return stage is that until it completes: a resumed run whose
	// earlier execution died in it runs it as such again, so that a failure that
	// changed nothing still rolls the run back.
	isPONR = !stop && i >= 0 && st.Name() == ex.ponr && !r.history.doneBefore(ex.ponr)
	markPONR := isPONR && !rn.past
	rn.mu.Unlock()
	if stop {
		return false, false, rn.rollBack(ctx, r, rn.interruptErr())
	}
	msg := ""
	if markPONR {
		// The point of no return is durable before the stage changes anything; a run
		// that cannot record it does not cross it.
		if err := r.setPastPONR(ctx, true); err != nil {
			return false, false, rn.rollBack(ctx, r, fmt.Errorf("%s: the journal cannot record the point of no return, so it is not crossed: %w", st.Name(), err))
		}
		rn.setPast(true)
	}
	if isPONR {
		msg = "point of no return"
	}
	rn.mu.Lock()
	past = rn.past
	rn.mu.Unlock()
	rn.beginStage(r, i, st)
	rn.renewPause(ctx, r, st)
	if err := rn.record(ctx, r, i, st, journal.Started, 0, msg); err != nil && (!past || isPONR) {
		// Before the point of no return, an undo after a crash needs to know the stage
		// started: without that record the stage does not run. The point of no return
		// is not crossed either, unless the journal cannot take its mark back.
		if !isPONR || r.setPastPONR(ctx, false) == nil {
			rn.setPast(false)
			return false, false, rn.rollBack(ctx, r, fmt.Errorf("%s: %w", st.Name(), err))
		}
	}
	return isPONR, past, nil
}

// ended records how stage sp ended (err, after d) and decides what follows: the next stage,
// the run left pending (a watch left on a signal), or the run rolled back. A batch that failed
// within the failure budget and a stage that failed past the point of no return let the run
// go on; a point-of-no-return stage that failed without crossing it rolls the run back. end
// and its error are step's.
func (rn *Runner) ended(ex *execution, sp stageAt, err error, d time.Duration, isPONR, past bool) (end bool, _ error) {
	ctx, r, i, st := ex.ctx, ex.r, sp.i, sp.st
	if isWatchLeft(err) {
		// The watch is left pending: its stage stays started, the run unfinished.
		r.log.Printf("run %d: %v", r.ID, err)
		return true, pastPONR(err)
	}
	if errors.Is(err, errSkipped) {
		rn.record(ctx, r, i, st, journal.Skipped, d, "")
		return false, nil
	}
	if err == nil {
		rn.record(ctx, r, i, st, journal.Done, d, "")
		return false, nil
	}
	rn.record(ctx, r, i, st, journal.Failed, d, err.Error())
	var tol *toleratedError
	if errors.As(err, &tol) {
		// A batch failed within the failure budget: the run goes on.
		r.mu.Lock()
		r.tolerated = append(r.tolerated, fmt.Sprintf("%s (%s)", st.Name(), joinNames(tol.nodes)))
		r.mu.Unlock()
		r.perNode.leaveBehind(tol.nodes)
		return false, nil
	}
	if isPONR && isNotCrossed(err) {
		// The stage failed without changing anything: the run is still before the
		// point of no return, and rolls back.
		if perr := r.setPastPONR(ctx, false); perr != nil {
			r.Warn("journal: %v: the run stays past its point of no return and goes on", perr)
		} else {
			rn.setPast(false)
			past = false
		}
	}
	if past {
		r.mu.Lock()
		r.failed = append(r.failed, st.Name())
		r.mu.Unlock()
		return false, nil
	}
	if ierr := rn.interruptErr(); ierr != nil && ex.stageCtx.Err() != nil {
		err = fmt.Errorf("%w (%s: %v)", ierr, st.Name(), err)
	} else {
		err = fmt.Errorf("%s: %w", st.Name(), err)
	}
	return true, rn.rollBack(ctx, r, err)
}

// end ends a run whose every stage ran: failed past the point of no return when a stage
// failed, done otherwise, its intent then released; nodes left behind within the failure
// budget are named by its error (toleratedErr).
func (rn *Runner) end(ctx context.Context, r *Run) error {
	if failed := r.Failed(); len(failed) > 0 {
		rn.finish(ctx, r, journal.FailedPastPONR)
		if r.watchOnly() {
			return pastPONR(r.watchFailedErr())
		}
		return pastPONR(fmt.Errorf("the run went past the point of no return but %s failed; fix the cause and run 'cutover upgrade --resume' (a node that stays unreachable can be left out with 'cutover upgrade --resume --skip-node NODE' and caught up later with 'cutover sync NODE')", joinNames(append(r.Tolerated(), failed...))))
	}
	// Done is recorded before the intent disappears: a crash in between leaves an intent
	// whose run the journal calls done, and the next resume only removes it.
	rn.finish(ctx, r, journal.Succeeded)
	if rel := rn.releaser(); rel != nil {
		if err := rel.Undo(ctx, r); err != nil {
			r.Warn("the run is done, but its intent could not be removed (%v): the next 'cutover upgrade --resume' removes it", err)
		}
	}
	// Failures within the budget end the run done with those nodes left behind; they block
	// nothing, and sync catches them up (docs/design.md §11). Exit 3 names them.
	return r.toleratedErr()
}

// setPast sets whether the run is past its point of no return, as the signal handler sees it.
func (rn *Runner) setPast(past bool) {
	rn.mu.Lock()
	rn.past = past
	rn.mu.Unlock()
}

// runStage runs st after its hold (a test hook). A stage that leaves on a signal (leaver) past
// the point of no return runs under a context of its own that the signal cancels.
func (rn *Runner) runStage(ctx context.Context, r *Run, st Stage, past bool) error {
	_, leaves := st.(leaver)
	if leaves && past {
		stageCtx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		rn.mu.Lock()
		rn.leave = cancel
		rn.mu.Unlock()
		defer func() {
			rn.mu.Lock()
			rn.leave = nil
			rn.mu.Unlock()
		}()
		ctx = stageCtx
	}
	if err := holdAt(ctx, st.Name()); err != nil {
		if leaves && past && r.Kind == KindSync {
			return (&watcher{r: r, plan: r.watch, round: watchNextRound(r.factsCopy())}).leave(ctx)
		}
		if leaves && past {
			return &watchLeft{fmt.Errorf("run %d: %s was left before it began (%w): 'cutover upgrade --resume' takes it up", r.ID, st.Name(), err)}
		}
		return err
	}
	return st.Run(ctx, r)
}

func (rn *Runner) interruptErr() error {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.interrupted == nil {
		return nil
	}
	return fmt.Errorf("interrupted by %s", rn.interrupted)
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
