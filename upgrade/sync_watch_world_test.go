package upgrade

import (
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
)

// syncWatchRun is the journal's last run of sc, with the last state of its watch stage.
func syncWatchRun(t *testing.T, sc *syncCluster) (journal.Run, journal.State) {
	t.Helper()
	runs := sc.journalRuns(t)
	if len(runs) == 0 {
		t.Fatal("the journal has no run")
	}
	jr := runs[len(runs)-1]
	ev, _ := jr.LastEvent("watch")
	return jr, ev.State
}

// countCalls counts node's runs of command.
func countCalls(sc *syncCluster, node, command string) int {
	n := 0
	for _, c := range sc.w.Calls(node) {
		if c == command {
			n++
		}
	}
	return n
}

// wantNoIntent fails t when a sync left an intent: a sync is never pending.
func wantNoIntent(t *testing.T, sc *syncCluster) {
	t.Helper()
	if _, err := os.Stat(IntentPath(sc.cfg)); !os.IsNotExist(err) {
		t.Errorf("a sync left an intent (%v): a sync is never pending", err)
	}
}

// TestSyncWatchHealthy: a sync that watches ([policy] watch) runs the watch stage over the
// synced nodes after its verify and is done once the window passed healthy; a sync of the same
// node, already at the live version, runs every stage and watches again.
func TestSyncWatchHealthy(t *testing.T) {
	t.Parallel()
	sc := newSyncCluster(t)
	sc.watch = watchPlan{Window: 20 * time.Millisecond, Interval: 5 * time.Millisecond, Failures: 2, Boots: 3}
	for i, want := range []struct{ from string }{{"1.0.0"}, {"1.1.0"}} {
		res, err := sc.sync(t, false, "node2")
		if err != nil {
			t.Fatalf("sync %d = %v", i+1, err)
		}
		if !res.Watched || res.Nodes[0].From != want.from {
			t.Errorf("sync %d: result %+v, want node2 from %s, watched", i+1, res, want.from)
		}
		jr, state := syncWatchRun(t, sc)
		st := watchStatusOf(jr.Facts)
		if jr.Outcome != journal.Succeeded || state != journal.Done || st == nil || st.State != watchPassed || st.Checks < 1 || st.Passed != st.Checks {
			t.Fatalf("sync %d: journal run %s, watch %s, status %+v; want done after a window that passed", i+1, jr.Outcome, state, st)
		}
		if got, _ := jr.StageState("verify"); got != journal.Done {
			t.Errorf("sync %d: the sync's verify %s, want done before the watch", i+1, got)
		}
		if got := countCalls(sc, "node2", "stop"); got != i+1 {
			t.Errorf("sync %d: node2 stopped %d times, want %d: every sync runs its stages", i+1, got, i+1)
		}
		if got := countCalls(sc, "node1", "verify"); got < 2*(i+1) {
			t.Errorf("sync %d: verify ran %d times on the master, want the sync's verify and a check per sync", i+1, got)
		}
	}
	if got := sc.w.Links("node2"); got != at110 {
		t.Errorf("node2 links = %s, want %s", got, at110)
	}
	if calls := sc.w.Calls("node3"); len(calls) > 0 {
		t.Errorf("node3, not named, ran %q", calls)
	}
	wantNoIntent(t, sc)
}

// TestSyncWatchFailed: watch_failures failed checks in a row end a sync's watch failed; the
// sync rolls nothing back (exit 3), keeps the node at the live version, and says to fix the
// cause and run the sync again.
func TestSyncWatchFailed(t *testing.T) {
	t.Parallel()
	sc := newSyncCluster(t)
	sc.watch = watchPlan{Window: time.Hour, Interval: 5 * time.Millisecond, Failures: 2, Boots: 3}
	sc.onEvent = func(e Event) {
		if e.Stage == "watch" { // the sync's verify passed: the checks of the watch fail
			sc.mu.Lock()
			sc.fail("node1 verify")
			sc.mu.Unlock()
		}
	}
	_, err := sc.sync(t, false, "node2")
	if err == nil || !IsPastPONR(err) {
		t.Fatalf("sync = %v, want a failure past the point of no return (exit 3)", err)
	}
	msg := err.Error()
	for _, want := range []string{"the watch of sync run 1 of node2 failed: 2 checks in a row failed, the last: verify: node1:",
		"app 1.1.0 stays on node2", "rolls nothing back", "run 'cutover sync node2' again"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	for _, not := range []string{"--resume", "--abort", "pending"} {
		if strings.Contains(msg, not) {
			t.Errorf("error %q names %q, which is not a sync's way out", msg, not)
		}
	}
	jr, state := syncWatchRun(t, sc)
	if jr.Outcome != journal.FailedPastPONR || state != journal.Failed || !strings.HasPrefix(jr.Facts["watch.1.end"], "failed: 2 checks in a row failed") {
		t.Errorf("journal: run %s, watch %s, end %q; want failed after 2 checks", jr.Outcome, state, jr.Facts["watch.1.end"])
	}
	if runs := sc.journalRuns(t); len(runs) != 1 {
		t.Errorf("journal has %d runs, want the sync alone: no rollback runs", len(runs))
	}
	if got := sc.w.Links("node2"); got != at110 {
		t.Errorf("node2 links = %s, want %s kept", got, at110)
	}
	if got, want := sc.w.Calls("node2"), []string{"stop", "ensure-dirs", "start"}; !slices.Equal(got, want) {
		t.Errorf("node2 ran %q, want %q: nothing undone", got, want)
	}
	wantNoIntent(t, sc)
}

// TestSyncWatchLeft: a signal during a sync's watch ends the watch early, journaled as such;
// the sync ends failed past its point of no return (exit 3) saying the watch was not completed
// and that the sync run again watches again, and nothing is pending. (Not parallel: the signal
// reaches the whole process.)
func TestSyncWatchLeft(t *testing.T) {
	sc := newSyncCluster(t)
	sc.watch = watchPlan{Window: time.Hour, Interval: 5 * time.Millisecond, Failures: 3, Boots: 3}
	sent := false
	sc.onEvent = func(e Event) {
		if e.Stage == "watch" && e.Type == "wait" && e.Watch != nil && !sent { // a check is journaled
			sent = true
			_ = syscall.Kill(syscall.Getpid(), syscall.SIGINT)
		}
	}
	_, err := sc.sync(t, false, "node2")
	if err == nil || !IsPastPONR(err) || isWatchLeft(err) {
		t.Fatalf("sync = %v, want a failure past the point of no return (exit 3) that leaves nothing pending", err)
	}
	msg := err.Error()
	for _, want := range []string{"the watch of sync run 1 of node2 was not completed: it ended early by SIGINT",
		"checks passed", "of 1h0m0s left", "nothing is pending", "run 'cutover sync node2' again to watch them again"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	for _, not := range []string{"--resume", "--abort"} {
		if strings.Contains(msg, not) {
			t.Errorf("error %q names %q, which is not a sync's way out", msg, not)
		}
	}
	jr, state := syncWatchRun(t, sc)
	st := watchStatusOf(jr.Facts)
	if jr.Outcome != journal.FailedPastPONR || state != journal.Failed || st == nil || st.State != watchEndedEarly ||
		!strings.HasPrefix(jr.Facts["watch.1.end"], "ended-early: by SIGINT at ") || st.Checks < 1 {
		t.Errorf("journal: run %s, watch %s, end %q, status %+v; want the run ended, its watch ended early after a check", jr.Outcome, state, jr.Facts["watch.1.end"], st)
	}
	if got := sc.w.Links("node2"); got != at110 {
		t.Errorf("node2 links = %s, want %s kept", got, at110)
	}
	if got, want := sc.w.Calls("node2"), []string{"stop", "ensure-dirs", "start"}; !slices.Equal(got, want) {
		t.Errorf("node2 ran %q, want %q: nothing undone", got, want)
	}
	wantNoIntent(t, sc)
}
