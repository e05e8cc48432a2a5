package upgrade

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/upgrade/config"
	"github.com/cutover/cutover/upgrade/upgradetest"
)

// bootStat is a /proc/1/stat whose start time (field 22) is start.
func bootStat(start int) string {
	return fmt.Sprintf("1 (init) S 0 1 1 0 -1 4194560 100 0 0 0 1 1 0 0 20 0 1 0 %d 1000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n", start)
}

// bootMaster gives the World's master the boot identity of kernel boot id and init start time.
func bootMaster(t *testing.T, w *upgradetest.World, id string, start int) string {
	t.Helper()
	w.WriteFile(t, w.Master, bootIDPath, id+"\n")
	w.WriteFile(t, w.Master, initStatPath, bootStat(start))
	return fmt.Sprintf("%s/%d", id, start)
}

const (
	watchBootA = "0b6c1f7e-52cd-4bd7-9c44-2b4e2b35c0a1"
	watchBootB = "9a0e3f5c-6a1b-4f7e-8a2c-1d3b4c5d6e7f"
)

// watchBoot is the boot identity of the master of the watch's Worlds (bootMaster).
const watchBoot = watchBootA + "/7"

// watchPart is the watch's part of a worldCase: the plan and daemons_ready_timeout, what an
// earlier execution of round 1 journaled, and what the round holds after the stage: its end
// (a prefix; "" for none), whether the watch is left pending, the verify calls, the round the
// facts are in, the checks and the failed boots journaled in it.
type watchPart struct {
	plan    watchPlan
	ready   time.Duration
	earlier map[string]string
	end     string
	left    bool
	verify  int
	round   int
	checks  int
	failedB int
}

// on makes tt (its name, setup, state and error) a case of the watch stage alone, past the
// point of no return as it always is, on a World whose master booted in watchBoot, at 1.1.0.
func (wr watchPart) on(tt worldCase) worldCase {
	setup := tt.setup
	tt.opts, tt.from, tt.to, tt.past, tt.stage = upgradetest.Options{Live: "1.1.0"}, "1.0.0", "1.1.0", true, watchWindow{}
	tt.setup = func(t *testing.T, w *upgradetest.World) {
		bootMaster(t, w, watchBootA, 7)
		if setup != nil {
			setup(t, w)
		}
	}
	tt.config = func(c *config.Config) { c.Commands.DaemonsReadyTimeout.Duration = wr.ready }
	tt.prepare = func(t *testing.T, w *upgradetest.World, r *Run) { r.watch = wr.plan }
	tt.facts = map[string]string{factWatch: wr.plan.String()}
	for k, v := range wr.earlier {
		tt.facts[k] = v
	}
	tt.errCheck = func(t *testing.T, err error) {
		if err != nil && !IsPastPONR(err) {
			t.Errorf("run: error %v is not past the point of no return (exit 3)", err)
		}
		if isWatchLeft(err) != wr.left {
			t.Errorf("run: error %v left the watch pending: %v, want %v", err, isWatchLeft(err), wr.left)
		}
	}
	state := tt.state
	tt.check = func(t *testing.T, w *upgradetest.World, r *Run) {
		jr, err := journal.NewStore(JournalPath(r.Config)).Run(context.Background(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantOutcome := map[journal.State]journal.Outcome{journal.Done: journal.Succeeded, journal.Failed: journal.FailedPastPONR, journal.Started: journal.Running}[state]
		if jr.Outcome != wantOutcome {
			t.Errorf("journal: run %s, want %s", jr.Outcome, wantOutcome)
		}
		st := watchStatusOf(jr.Facts)
		if st == nil || st.Round != wr.round || st.Checks != wr.checks || st.FailedBoots != wr.failedB {
			t.Fatalf("watch status %+v, want round %d with %d checks and %d failed boots", st, wr.round, wr.checks, wr.failedB)
		}
		if !strings.HasPrefix(st.End, wr.end) || (wr.end == "") != (st.End == "") {
			t.Errorf("round %d ended %q, want %q", st.Round, st.End, wr.end)
		}
		verify := 0
		for _, c := range w.AllCalls() {
			if c == "node1: verify" {
				verify++
			}
		}
		if wr.verify > 0 && verify != wr.verify || wr.left && verify == 0 {
			t.Errorf("verify ran %d times, want %d; commands %q", verify, wr.verify, w.AllCalls())
		}
		if slices.Contains(w.AllCalls(), "node1: stop") {
			t.Errorf("the watch stopped daemons: %q", w.AllCalls())
		}
	}
	tt.callsChecked = true
	return tt
}

// TestWatchOnAWorld runs the watch stage alone on a fake cluster, past the point of no return
// as it always is: the world before (the watch plan and what an earlier execution of the round
// journaled, the master's boot, the verify's answers), then the stage's journal state, the
// round's end, the checks made and the error.
func TestWatchOnAWorld(t *testing.T) {
	long := time.Hour
	failVerify := func(t *testing.T, w *upgradetest.World) { w.Fail("node1", "verify") }
	now := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(time.RFC3339Nano) }
	runWorldCases(t, []worldCase{
		watchPart{plan: watchPlan{Window: time.Nanosecond, Interval: time.Millisecond, Failures: 3, Boots: 3},
			end: "passed: 1 of 1 checks passed", verify: 1, round: 1, checks: 1}.on(worldCase{
			name: "a healthy window ends done once it passed", state: journal.Done}),
		watchPart{plan: watchPlan{Window: time.Nanosecond, Interval: time.Millisecond, Failures: 3, Boots: 3},
			end: "passed: 1 of 3 checks passed", verify: 3, round: 1, checks: 3}.on(worldCase{
			name:  "a check that passes clears the failures before it, and the window ends healthy",
			setup: func(t *testing.T, w *upgradetest.World) { w.FailOnce("node1", "verify"); w.FailOnce("node1", "verify") },
			state: journal.Done}),
		watchPart{plan: watchPlan{Window: long, Interval: time.Millisecond, Failures: 3, Boots: 3},
			end: "failed: 3 checks in a row failed, the last: verify: node1:", verify: 3, round: 1, checks: 3}.on(worldCase{
			name: "watch_failures checks in a row that fail end the watch failed", setup: failVerify,
			state: journal.Failed, err: "the watch of run 1 failed"}),
		watchPart{plan: watchPlan{Window: long, Interval: time.Millisecond, Failures: 1, Boots: 3},
			end: "failed: 1 check in a row failed, the last: node3:", verify: 1, round: 1, checks: 1}.on(worldCase{
			name: "an unreachable node fails a check", setup: func(t *testing.T, w *upgradetest.World) { w.Down("node3") },
			state: journal.Failed, err: "node3"}),
		watchPart{plan: watchPlan{Window: long, Interval: time.Hour, Failures: 3, Boots: 3},
			earlier: map[string]string{"watch.1.start": now(0), "watch.1.boot." + watchBoot: "seen",
				"watch.1.check.20260101T000000.000000000Z": "failed: verify: x", "watch.1.check.20260101T000001.000000000Z": "failed: verify: y"},
			end: "failed: 3 checks in a row failed", verify: 1, round: 1, checks: 3}.on(worldCase{
			name: "a watch taken up again checks at once and counts the failures journaled before", setup: failVerify,
			state: journal.Failed, err: "3 checks in a row failed"}),
		watchPart{plan: watchPlan{Window: time.Minute, Interval: time.Hour, Failures: 3, Boots: 3},
			earlier: map[string]string{"watch.1.start": now(-time.Hour), "watch.1.boot." + watchBoot: "seen"},
			end:     "passed: 1 of 1 checks passed over 1m0s", verify: 1, round: 1, checks: 1}.on(worldCase{
			name: "a watch taken up again after its window ended healthy once it checks", state: journal.Done}),
		watchPart{plan: watchPlan{Window: time.Nanosecond, Interval: time.Millisecond, Failures: 3, Boots: 3},
			earlier: map[string]string{"watch.1.start": now(-time.Hour), "watch.1.end": "failed: before"},
			end:     "passed: 1 of 1", verify: 1, round: 2, checks: 1}.on(worldCase{
			name: "a resume after a failed watch watches a new window", state: journal.Done}),
		watchPart{plan: watchPlan{Window: time.Minute, Interval: time.Hour, Failures: 3, Boots: 3}, ready: time.Second,
			earlier: map[string]string{"watch.1.start": now(-time.Hour), "watch.1.boot." + watchBootB + "/1": "seen"},
			end:     "passed", verify: 2, round: 1, checks: 1}.on(worldCase{
			name: "a boot of the master inside the window that becomes healthy goes on watching", state: journal.Done}),
		watchPart{plan: watchPlan{Window: long, Interval: time.Millisecond, Failures: 1, Boots: 3}, ready: 30 * time.Millisecond,
			earlier: map[string]string{"watch.1.start": now(0), "watch.1.boot." + watchBootB + "/1": "seen"},
			left:    true, round: 1, failedB: 1}.on(worldCase{
			name: "a boot that does not become healthy is a failed attempt, and the watch waits for the next boot", setup: failVerify,
			state: journal.Started, err: "boot 1 of 3 of the master inside the watch of run 1 did not become healthy"}),
		watchPart{plan: watchPlan{Window: long, Interval: time.Millisecond, Failures: 1, Boots: 2}, ready: 30 * time.Millisecond,
			earlier: map[string]string{"watch.1.start": now(0), "watch.1.boot." + watchBootB + "/1": "seen",
				"watch.1.boot." + watchBootB + "/2": "failed: verify: x"},
			end: "failed: 2 boots of the master inside the window did not become healthy", round: 1, failedB: 2}.on(worldCase{
			name: "the watch_boots-th boot that does not become healthy ends the watch failed", setup: failVerify,
			state: journal.Failed, err: "2 boots"}),
	})
}

// TestWatchStatus reads a watch's journaled facts as status and the journal show them.
func TestWatchStatus(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	facts := map[string]string{
		factWatch:       watchPlan{Window: 15 * time.Minute, Interval: 30 * time.Second, Failures: 3, Boots: 2}.String(),
		"watch.1.start": start.Format(time.RFC3339Nano),
		"watch.1.check.20260301T120030.000000000Z": "passed",
		"watch.1.check.20260301T120100.000000000Z": "failed: verify: down",
		"watch.1.check.20260301T120130.000000000Z": "passed",
		"watch.1.check.20260301T120200.000000000Z": "failed: verify: down again",
		"watch.1.boot.x/1":                         "seen",
		"watch.1.boot.y/2":                         "failed: verify: no",
	}
	st := watchStatusOf(facts)
	want := WatchStatus{Window: 15 * time.Minute, Interval: 30 * time.Second, MaxFailures: 3, MaxBoots: 2, Round: 1,
		Started: start, Ends: start.Add(15 * time.Minute), Checks: 4, Passed: 2, Failures: 1,
		LastFailure: "verify: down again", LastFailureAt: start.Add(2 * time.Minute), FailedBoots: 1, State: "watching"}
	if st == nil || *st != want {
		t.Fatalf("watchStatusOf = %+v\nwant %+v", st, want)
	}
	if left := st.Left(start.Add(5 * time.Minute)); left != 10*time.Minute {
		t.Errorf("Left = %s, want 10m", left)
	}
	facts["watch.1.end"] = "failed: 3 checks in a row failed"
	if st := watchStatusOf(facts); st.State != "failed" || st.Round != 1 || watchNextRound(facts) != 2 {
		t.Errorf("after a failed end: state %s, round %d, next %d; want failed, 1, 2", st.State, st.Round, watchNextRound(facts))
	}
	if watchStatusOf(map[string]string{"watch": "window=bad"}) != nil || watchStatusOf(nil) != nil {
		t.Error("a run without a readable watch plan has a watch status")
	}
	for _, bad := range []string{"", "window=1m", "window=1m interval=0s failures=3 boots=3", "window=1m interval=1s failures=3 boots=3 x=1"} {
		if _, err := parseWatchPlan(bad); err == nil {
			t.Errorf("parseWatchPlan(%q) accepted", bad)
		}
	}
	p := watchPlan{Window: time.Hour, Interval: time.Second, Failures: 2, Boots: 4}
	if got, err := parseWatchPlan(p.String()); err != nil || got != p {
		t.Errorf("parseWatchPlan(%q) = %+v, %v; want %+v", p.String(), got, err, p)
	}
}

// TestWatchedStageLists: a run with a watch ends its stage list, all at once or rolling, with
// the watch; one without has none, and the rollback of a watched run does not watch.
func TestWatchedStageLists(t *testing.T) {
	plan := watchPlan{Window: time.Minute, Interval: time.Second, Failures: 3, Boots: 3}
	for _, tt := range []struct {
		name    string
		batches []Batch
		watch   watchPlan
		want    string
	}{
		{"all at once, watched", nil, plan, "watch"},
		{"rolling, watched", []Batch{{Nodes: []string{"node2"}, Canary: true}, {Nodes: []string{"node1"}}}, plan, "watch"},
		{"all at once, not watched", nil, watchPlan{}, "finish"},
	} {
		r := &Run{Batches: tt.batches, watch: tt.watch}
		list := r.stages()
		if got := list[len(list)-1].Name(); got != tt.want {
			t.Errorf("%s: the list ends with %s, want %s", tt.name, got, tt.want)
		}
	}
	if p := planWatch(config.PolicyConfig{WatchInterval: config.Duration{Duration: time.Second}, WatchFailures: 2, WatchBoots: 1}, nil); p.Window != 0 {
		t.Errorf("planWatch without a window = %+v, want no watch", p)
	}
	window := 5 * time.Minute
	if p := planWatch(config.PolicyConfig{Watch: config.Duration{Duration: time.Hour}}, &window); p.Window != window || p.Interval != 30*time.Second || p.Failures != 1 || p.Boots != 1 {
		t.Errorf("planWatch with --watch=5m = %+v, want the flag's window and sane bounds", p)
	}
}
