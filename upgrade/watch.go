package upgrade

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cutover/cutover/nodes"
)

// watchWindow is the watch ([policy] watch, `upgrade --watch`): after the finish, it repeats
// the verify and the check that no daemon of another version runs on any node every
// watch_interval until the window ends, and the run is done only when the window passes
// healthy. watch_failures failed checks in a row, or watch_boots boots of the master inside the
// window that do not become healthy, end it failed: the run then fails past its point of no
// return, and [policy] on_failure decides what follows, as for a failed final verify. A
// signal leaves the watch pending for `cutover upgrade --resume` or the boot resume, which
// take it up where it was; `cutover upgrade --abort` ends it early. Every check, boot and
// end is journaled as a fact of the round (watch_status.go).
type watchWindow struct{}

func (watchWindow) Name() string { return "watch" }

func (watchWindow) Where() Where { return OnAll }

// Leaves marks the stage a signal leaves pending instead of being ignored past the point of
// no return.
func (watchWindow) Leaves() {}

// Skip skips the watch of a run that has none.
func (watchWindow) Skip(r *Run) bool { return r.watch.Window <= 0 }

func (watchWindow) Run(ctx context.Context, r *Run) error {
	w := &watcher{r: r, plan: r.watch, round: watchNextRound(r.factsCopy())}
	plan, key := w.plan, w.key
	now := time.Now().UTC().Format(time.RFC3339Nano)
	began, err := r.Learn(ctx, key("start"), now)
	if err != nil {
		return err
	}
	start, err := time.Parse(time.RFC3339Nano, began)
	if err != nil {
		return fmt.Errorf("journal: watch start %q: %w", began, err)
	}
	ends := start.Add(plan.Window)
	r.publishMetrics(ctx) // the metrics show the watch from its start, and after each check
	if err := w.boot(ctx); err != nil {
		return err
	}
	// A watch that begins now checks one interval after the final verify; one taken up
	// again checks at once.
	checkNow := began != now
	for {
		if !checkNow {
			wait := plan.Interval
			if left := time.Until(ends); left > 0 && left < wait {
				wait = left
			}
			select {
			case <-ctx.Done():
				return w.leave(ctx)
			case <-time.After(wait):
			}
		}
		checkNow = false
		problem := w.check(ctx)
		if ctx.Err() != nil {
			return w.leave(ctx)
		}
		at := time.Now().UTC()
		value := watchPassed
		if problem != "" {
			value = watchFailed + ": " + problem
		}
		if _, err := r.Learn(ctx, key("check."+at.Format(watchStamp)), value); err != nil {
			return err
		}
		st := watchStatusOf(r.factsCopy())
		w.progress(st)
		r.publishMetrics(ctx)
		switch {
		case st.Failures >= plan.Failures:
			return w.endFailed(ctx, fmt.Sprintf("%s in a row failed, the last: %s", plural(st.Failures, "check"), problem))
		case problem == "" && !at.Before(ends):
			if _, err := r.Learn(ctx, key("end"), fmt.Sprintf("%s: %d of %d checks passed over %s", watchPassed, st.Passed, st.Checks, plan.Window)); err != nil {
				return err
			}
			r.Note("%d of %d checks passed over %s", st.Passed, st.Checks, plan.Window)
			return nil
		}
	}
}

// watcher watches one round of the watch of run r under plan: its checks, the boots of the
// master inside its window, and its end, each journaled as a fact of the round.
type watcher struct {
	r     *Run
	plan  watchPlan
	round int
}

// key is the key of the round's fact named s ("watch.<round>.<s>").
func (w *watcher) key(s string) string {
	return fmt.Sprintf("%s%d.%s", factWatchPrefix, w.round, s)
}

// check is one check of the watch: no daemon of another version on any node the run does not
// leave behind, and the application's verify. It returns what failed, "" when nothing did.
func (w *watcher) check(ctx context.Context) string {
	r := w.r
	r.stage.forgetResults() // the stage's node results are the last check's
	var problems []string
	if r.Config.Commands.DaemonsStart != "" {
		err := r.OnNodes(ctx, r.settled(), false, func(ctx context.Context, c Conn, n nodes.Node) error {
			p, err := r.inspectProcesses(ctx, c, n.Name)
			if err != nil {
				return err
			}
			if len(p.old) > 0 {
				return onNode(n.Name, fmt.Errorf("daemons of another version run: %s", daemonList(p.old)))
			}
			return nil
		})
		if err != nil {
			problems = append(problems, err.Error())
		}
	}
	if cmd := r.Config.Commands.Verify; cmd != "" && len(r.leftBehind()) == 0 {
		if _, err := r.OnMaster(ctx, cmd); err != nil {
			problems = append(problems, "verify: "+err.Error())
		}
	}
	return watchText(strings.Join(problems, "; "))
}

// watchText bounds and escapes what a node said for the journal and the terminal.
func watchText(s string) string {
	s = strings.Join(strings.Fields(EscapeControls(s)), " ")
	if len(s) > 400 {
		s = s[:400] + "..."
	}
	return s
}

// boot counts a boot of the master inside the window (greenboot's boot counter): the
// first execution of a round notes the boot it runs in; an execution in another boot waits up
// to daemons_ready_timeout for the daemons and a passing check. A boot that does not become
// healthy is a failed attempt: the watch_boots-th ends the watch failed, an earlier one leaves
// the watch pending for the next boot.
func (w *watcher) boot(ctx context.Context) error {
	r, plan := w.r, w.plan
	master := r.Inventory.Master
	c, err := r.Conn(ctx, master)
	if err != nil {
		return err
	}
	boot := readBoot(c, master, r.log)
	if boot == "" {
		return nil
	}
	prefix := w.key("boot.")
	seen := 0
	for k := range r.factsCopy() {
		if strings.HasPrefix(k, prefix) {
			seen++
		}
	}
	if _, ok := r.Fact(prefix + boot); ok {
		return nil
	}
	if seen == 0 {
		_, err := r.Learn(ctx, prefix+boot, "seen")
		return err
	}
	limit := r.Config.Commands.DaemonsReadyTimeout.Duration
	if limit <= 0 {
		limit = defaultDaemonsReadyTimeout
	}
	r.Warn("the master booted inside the watch of run %d: waiting up to %s for the daemons and a passing check", r.ID, limit)
	problem := w.bootHealthy(ctx, limit)
	if ctx.Err() != nil {
		return w.leave(ctx)
	}
	if problem == "" {
		_, err := r.Learn(ctx, prefix+boot, "healthy")
		return err
	}
	if _, err := r.Learn(ctx, prefix+boot, watchFailed+": "+problem); err != nil {
		return err
	}
	failed := watchStatusOf(r.factsCopy()).FailedBoots
	if failed >= plan.Boots {
		return w.endFailed(ctx,
			fmt.Sprintf("%s of the master inside the window did not become healthy within %s, the last: %s", plural(failed, "boot"), limit, problem))
	}
	return &watchLeft{fmt.Errorf("boot %d of %d of the master inside the watch of run %d did not become healthy within %s (%s): the watch goes on at the next boot, or now with 'cutover upgrade --resume'; 'cutover upgrade --abort' ends it",
		failed, plan.Boots, r.ID, limit, problem)}
}

// bootHealthy waits up to limit for the master's daemons and then for a passing check, trying
// every watch interval (at most every 5 seconds); it returns what the last check found, ""
// once one passed.
func (w *watcher) bootHealthy(ctx context.Context, limit time.Duration) string {
	r := w.r
	deadline := time.Now().Add(limit)
	ready, cancel := context.WithDeadline(ctx, deadline)
	err := awaitDaemons(ready, r)
	cancel()
	if err != nil {
		return watchText(err.Error())
	}
	pause := min(w.plan.Interval, 5*time.Second)
	for {
		problem := w.check(ctx)
		if problem == "" || ctx.Err() != nil || time.Now().Add(pause).After(deadline) {
			return problem
		}
		r.Wait("the master's boot inside the watch is not healthy yet: %s", problem)
		select {
		case <-ctx.Done():
			return problem
		case <-time.After(pause):
		}
	}
}

// endFailed journals the end of the round, failed for why, and returns the stage's error.
func (w *watcher) endFailed(ctx context.Context, why string) error {
	r := w.r
	if _, err := r.Learn(ctx, w.key("end"), watchFailed+": "+why); err != nil {
		return err
	}
	r.mu.Lock()
	r.watchWhy = why
	r.mu.Unlock()
	return fmt.Errorf("the watch failed: %s", why)
}

// watchFailedErr is the error of a run whose watch failed and that stays pending: the failure
// and both ways out.
func (r *Run) watchFailedErr() error {
	r.mu.Lock()
	why := r.watchWhy
	r.mu.Unlock()
	return fmt.Errorf("the watch of run %d failed: %s; %s %s stays on the cluster and run %d stays pending: run 'cutover upgrade --resume' to watch again once the cause is fixed, or 'cutover upgrade --abort' to end the watch and keep %s ('cutover upgrade --to=%s' then takes the cluster back)",
		r.ID, why, r.Config.App, r.To, r.ID, r.To, r.From)
}

// watchLeft is a watch left pending: interrupted by a signal, or after a boot that did not
// become healthy. The runner records nothing more of the stage, and the run stays pending.
type watchLeft struct{ err error }

func (e *watchLeft) Error() string { return e.err.Error() }

func (e *watchLeft) Unwrap() error { return e.err }

// leave is the error of a watch a signal interrupted: an upgrade's is left pending, a sync's
// ends early (sync_watch.go).
func (w *watcher) leave(ctx context.Context) error {
	r := w.r
	if r.Kind == KindSync {
		return w.endSyncEarly(ctx)
	}
	st := watchStatusOf(r.factsCopy())
	left := ""
	if st != nil {
		left = fmt.Sprintf(" with %s of its window left and %d of %d checks passed", st.Left(time.Now()).Round(time.Second), st.Passed, st.Checks)
	}
	return &watchLeft{fmt.Errorf("the watch of run %d was left%s: 'cutover upgrade --resume' (or the boot resume) takes it up again, 'cutover upgrade --abort' ends it", r.ID, left)}
}

// isWatchLeft reports whether err is a watch left pending.
func isWatchLeft(err error) bool {
	var l *watchLeft
	return errors.As(err, &l)
}

// progress reports how the watch stands after a check: the progress line of `upgrade`.
func (w *watcher) progress(st *WatchStatus) {
	r := w.r
	msg := fmt.Sprintf("watch: %s of %s left, %d of %d checks passed", st.Left(time.Now()).Round(time.Second), st.Window, st.Passed, st.Checks)
	if st.Failures > 0 {
		msg += fmt.Sprintf("; %d of %d allowed failures in a row, the last: %s", st.Failures, st.MaxFailures, st.LastFailure)
	}
	r.log.Printf("%s", msg)
	r.report.Report(Event{Time: time.Now(), Type: "wait", Run: r.ID, Stage: watchWindow{}.Name(), Message: msg, Watch: st})
}
