package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/test/cluster"
	demo "github.com/cutover/cutover/test/demoapp"
)

// cutInBatch starts `cutover ARGS` held at stage (a batch of a rolling run), cuts node's
// network, releases the run and returns its result and how long it took after the release.
func cutInBatch(t *testing.T, c *cluster.Cluster, stage, node string, args ...string) (cluster.Result, time.Duration) {
	t.Helper()
	h := startHeld(t, c, stage, args...)
	if err := c.Cut(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res := h.release(t, c)
	return res, time.Since(start)
}

// without is a snapshot without the lines named in except (nodes, or "intent"): what a run
// must leave as it was on the nodes it can reach.
func without(snap string, except ...string) string {
	var out []string
	for _, line := range strings.SplitAfter(snap, "\n") {
		node, _, _ := strings.Cut(line, ":")
		if !slices.Contains(except, node) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

// lastRun is the journal's last run.
func lastRun(t *testing.T, c *cluster.Cluster) journal.Run {
	t.Helper()
	rs := runs(t, c)
	if len(rs) == 0 {
		t.Fatal("the journal has no runs")
	}
	return rs[len(rs)-1]
}

// checkNoIntent asserts that no run is pending on the master.
func checkNoIntent(t *testing.T, c *cluster.Cluster, what string) {
	t.Helper()
	if sh(t, c, c.Master, "test -e /var/lib/cutover/intent.json").ExitCode == 0 {
		t.Errorf("%s: the intent is left", what)
	}
}

// checkRolledBack asserts that the last run went from -> to and was rolled back, with every
// stage of stages undone.
func checkRolledBack(t *testing.T, c *cluster.Cluster, what, from, to string, stages ...string) {
	t.Helper()
	r := lastRun(t, c)
	if r.From != from || r.To != to || r.Outcome != journal.RolledBack || r.Ended.IsZero() {
		t.Errorf("%s: last run %d %s -> %s %s, want %s -> %s rolled-back", what, r.ID, r.From, r.To, r.Outcome, from, to)
	}
	for _, stage := range stages {
		if st, ok := r.StageState(stage); !ok || st != journal.Undone {
			t.Errorf("%s: run %d: %s is %q, want undone", what, r.ID, stage, st)
		}
	}
	checkNoIntent(t, c, what)
}

// TestRollingCutRollsBack cuts a node off while the batch it is in runs, with max_failed = 0.
// In an upgrade (1.1.0 -> 1.2.0, the node in the third of four batches) the failure is over
// the budget: the run switches every batch back and exits 1 with the cluster exactly as
// before, the cut node included once it is back. In a downgrade (1.2.0 -> 1.1.0) the node is
// the third canary, since a downgrade's first batch after the canaries is its point of no
// return (docs/design.md §11); its config downgrade, which runs before the batches, already reached
// the cut node and cannot be migrated up there while it is gone, so the run switches the
// batches back, keeps its intent and exits 3; once the node is back, `cutover upgrade
// --abort` migrates the config up again and leaves the cluster exactly as before.
func TestRollingCutRollsBack(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{Live: "1.1.0"})
	all := online(c)
	ctx := context.Background()

	// Upgrade: batches node2, node3, node4, node1; node4 is cut as batch 3 begins.
	useRolling(t, c, demo.Rolling{BatchSize: 1, MaxFailed: 0, BatchTimeout: "90s"})
	before := snapshot(t, c)
	res, took := cutInBatch(t, c, "batch-3", "node4", "upgrade", "--to=1.2.0", "--yes")
	if res.ExitCode != 1 || !strings.Contains(res.Stderr, "node4") || !strings.Contains(res.Stderr, "max_failed = 0") {
		t.Errorf("upgrade, node4 cut in batch 3: exit %d, want 1 naming node4 over max_failed = 0\n%s", res.ExitCode, res.Stderr)
	}
	if after := snapshot(t, c); without(after, "node4") != without(before, "node4") {
		t.Errorf("upgrade, node4 cut in batch 3: the reachable nodes changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	checkRolledBack(t, c, "upgrade, node4 cut in batch 3", "1.1.0", "1.2.0", "batch-1", "batch-2")
	r := lastRun(t, c)
	for _, stage := range []string{"batch-4", "config-upgrade"} {
		if _, ok := r.StageState(stage); ok {
			t.Errorf("upgrade, node4 cut in batch 3: run %d started %s", r.ID, stage)
		}
	}
	if err := c.Heal(ctx, "node4"); err != nil {
		t.Fatal(err)
	}
	if after := snapshot(t, c); after != before {
		t.Errorf("upgrade, node4 cut in batch 3: the cluster changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	checkAt(t, c, "1.1.0", all...)
	t.Logf("FIGURES upgrade, node4 cut in batch 3, max_failed = 0: rolled back in %.1fs after the release", took.Seconds())

	// Downgrade: the cluster goes to 1.2.0 first, then batches canary node2, canary node3,
	// canary node4, node1; node4 is cut as its canary batch begins.
	if res := cutover(t, c, "upgrade", "--to=1.2.0", "--yes"); res.ExitCode != 0 {
		t.Fatalf("rolling upgrade to 1.2.0: exit %d", res.ExitCode)
	}
	checkAt(t, c, "1.2.0", all...)
	useRolling(t, c, demo.Rolling{BatchSize: 1, Canaries: []string{"node2", "node3", "node4"}, MaxFailed: 0, BatchTimeout: "90s"})
	before = snapshot(t, c)
	res, took = cutInBatch(t, c, "batch-3", "node4", "upgrade", "--to=1.1.0", "--yes")
	// The config downgrade reached node4 before it was cut, and cannot be migrated up there
	// while it is gone: the run keeps its intent and says to abort it once node4 is back.
	if res.ExitCode != 3 || !strings.Contains(res.Stderr, "canary node4 failed") || !strings.Contains(res.Stderr, "cutover upgrade --abort") {
		t.Errorf("downgrade, node4 cut in its canary batch: exit %d, want 3 naming canary node4 and 'cutover upgrade --abort'\n%s", res.ExitCode, res.Stderr)
	}
	if after := snapshot(t, c); without(after, "node4", "intent") != without(before, "node4", "intent") {
		t.Errorf("downgrade, node4 cut in its canary batch: the reachable nodes changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	r = lastRun(t, c)
	if r.From != "1.2.0" || r.To != "1.1.0" || r.Outcome != journal.FailedPastPONR || r.Travel != journal.RollingBack {
		t.Errorf("downgrade, node4 cut in its canary batch: run %d %s -> %s %s (%s), want 1.2.0 -> 1.1.0 failed while rolling back", r.ID, r.From, r.To, r.Outcome, r.Travel)
	}
	for stage, want := range map[string]journal.State{"batch-1": journal.Undone, "batch-2": journal.Undone, "config-downgrade": journal.UndoFailed} {
		if st, _ := r.StageState(stage); st != want {
			t.Errorf("downgrade, node4 cut in its canary batch: run %d: %s is %q, want %s", r.ID, stage, st, want)
		}
	}
	if _, ok := r.StageState("batch-4"); ok {
		t.Errorf("downgrade, node4 cut in its canary batch: batch 4 started")
	}
	if sh(t, c, c.Master, "test -e /var/lib/cutover/intent.json").ExitCode != 0 {
		t.Errorf("downgrade, node4 cut in its canary batch: no intent left, with node4's config not migrated back")
	}
	if err := c.Heal(ctx, "node4"); err != nil {
		t.Fatal(err)
	}
	if res := cutover(t, c, "upgrade", "--abort"); res.ExitCode != 0 {
		t.Errorf("abort once node4 is back: exit %d, want 0\n%s", res.ExitCode, res.Stderr)
	}
	if ar := lastRun(t, c); ar.ID != r.ID || ar.Outcome != journal.Aborted {
		t.Errorf("abort once node4 is back: last run %d %s, want run %d aborted", ar.ID, ar.Outcome, r.ID)
	}
	checkNoIntent(t, c, "abort once node4 is back")
	if after := snapshot(t, c); after != before {
		t.Errorf("downgrade, node4 cut in its canary batch, then aborted: the cluster changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	checkAt(t, c, "1.2.0", all...)
	t.Logf("FIGURES downgrade, node4 cut in its canary batch, max_failed = 0: rolled back in %.1fs after the release", took.Seconds())
}

// TestRollingCutWithinBudget cuts a node off while the batch it is in runs, with max_failed =
// 1: the node fails within the budget, the run goes on and ends done with every other node at
// the target and the cut node left behind at the source (exit 3 naming it and the sync that
// catches it up). Once the node is back, `cutover sync` brings it to the target, and the next
// run back to the source is not blocked by it.
func TestRollingCutWithinBudget(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{Live: "1.1.0"})
	all := online(c)
	ctx := context.Background()

	// Batches node2, node3, node4, node1; node4 is cut as batch 3 begins.
	useRolling(t, c, demo.Rolling{BatchSize: 1, MaxFailed: 1, BatchTimeout: "90s"})
	source := stateOf(t, c, "node4")
	res, took := cutInBatch(t, c, "batch-3", "node4", "upgrade", "--to=1.2.0", "--yes")
	if res.ExitCode != 3 || !strings.Contains(res.Stderr, "node4") || !strings.Contains(res.Stderr, "cutover sync node4") {
		t.Errorf("node4 cut in batch 3 with max_failed = 1: exit %d, want 3 naming node4 and 'cutover sync node4'\n%s", res.ExitCode, res.Stderr)
	}
	r := lastRun(t, c)
	if r.From != "1.1.0" || r.To != "1.2.0" || r.Outcome != journal.Succeeded || r.Ended.IsZero() {
		t.Errorf("node4 cut in batch 3 with max_failed = 1: run %d %s -> %s %s, want 1.1.0 -> 1.2.0 done", r.ID, r.From, r.To, r.Outcome)
	}
	for stage, want := range map[string]journal.State{"batch-1": journal.Done, "batch-2": journal.Done, "batch-3": journal.Failed, "batch-4": journal.Done, "config-upgrade": journal.Done} {
		if st, _ := r.StageState(stage); st != want {
			t.Errorf("node4 cut in batch 3 with max_failed = 1: run %d: %s is %q, want %s", r.ID, stage, st, want)
		}
	}
	checkNoIntent(t, c, "node4 cut in batch 3 with max_failed = 1")
	checkAt(t, c, "1.2.0", online(c, "node4")...)
	// node4, read from inside while it is still cut off: links, daemon and config of 1.1.0.
	if got := stateOf(t, c, "node4"); got != source {
		t.Errorf("node4 left behind: %+v, want it as it was at 1.1.0: %+v", got, source)
	}
	t.Logf("FIGURES node4 cut in batch 3, max_failed = 1: the run ended in %.1fs after the release", took.Seconds())

	if err := c.Heal(ctx, "node4"); err != nil {
		t.Fatal(err)
	}
	checkAt(t, c, "1.1.0", "node4")
	start := time.Now()
	if res := cutover(t, c, "sync", "--yes", "node4"); res.ExitCode != 0 {
		t.Errorf("sync node4 once it is back: exit %d, want 0\n%s", res.ExitCode, res.Stderr)
	}
	t.Logf("FIGURES sync node4: %.1fs", time.Since(start).Seconds())
	checkAt(t, c, "1.2.0", all...)

	if res := cutover(t, c, "upgrade", "--to=1.1.0", "--yes"); res.ExitCode != 0 {
		t.Errorf("the next run, back to 1.1.0: exit %d, want 0\n%s", res.ExitCode, res.Stderr)
	}
	checkAt(t, c, "1.1.0", all...)
	checkRollingComplete(t, c, "1.2.0", "1.1.0", 4)
}

// checkSkippedThenSync asserts what follows `cutover upgrade --resume --skip-node=NODE` that
// ended run id (from -> to) done without node, still cut off: status shows no pending run and
// node unreachable; once node is healed, status shows it behind with the command that catches
// it up, and that command, `cutover sync NODE`, brings it to the target.
func checkSkippedThenSync(t *testing.T, c *cluster.Cluster, id uint64, from, to, node string) {
	t.Helper()
	ctx := context.Background()
	text := cutover(t, c, "status")
	pending, last := fmt.Sprintf("pending: none; last run %d, ", id), fmt.Sprintf(" %s -> %s: done", from, to)
	if text.ExitCode != 0 || !strings.Contains(text.Stdout, pending) || !strings.Contains(text.Stdout, last) || !strings.Contains(text.Stdout, node+"  unreachable") {
		t.Errorf("status after the run without %s: exit %d, want 0, %q, %q and %s unreachable", node, text.ExitCode, pending, last, node)
	}
	var st statusDoc
	decode(t, cutover(t, c, "--output", "json", "status"), &st)
	if st.Pending != nil || st.Lock != nil {
		t.Errorf("status after the run without %s as JSON: pending %+v, lock %+v; want neither", node, st.Pending, st.Lock)
	}
	if err := c.Heal(ctx, node); err != nil {
		t.Fatal(err)
	}
	st = statusDoc{}
	decode(t, cutover(t, c, "--output", "json", "status"), &st)
	if st.Pending != nil || len(st.Behind) != 1 || st.Behind[0].Node != node || !strings.Contains(st.Behind[0].Command, "cutover sync "+node) {
		t.Errorf("status once %s is back: pending %+v, behind %+v; want no pending run and %s behind with 'cutover sync %s'", node, st.Pending, st.Behind, node, node)
	}
	if res := cutover(t, c, "sync", "--yes", node); res.ExitCode != 0 {
		t.Errorf("sync %s once it is back: exit %d, want 0\n%s", node, res.ExitCode, res.Stderr)
	}
	checkAt(t, c, to, online(c)...)
	st = statusDoc{}
	decode(t, cutover(t, c, "--output", "json", "status"), &st)
	if st.Pending != nil || len(st.Behind) != 0 || st.Version != to {
		t.Errorf("status after the sync: version %s, pending %+v, behind %+v; want %s, no pending run, none behind", st.Version, st.Pending, st.Behind, to)
	}
}

// TestRollingCutSkipNodeAllAtOnce: a node cut off during an all-at-once downgrade's switch,
// past its point of no return, makes the run exit 3; a resume with the node still gone exits
// 3 pointing to --skip-node, and `--resume --skip-node=NODE` ends the run done without it.
// Status then shows no pending run and the node unreachable; once the node is back, status
// shows it behind with `cutover sync NODE`, which catches it up.
func TestRollingCutSkipNodeAllAtOnce(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{Live: "1.1.0"})
	res, took := cutInBatch(t, c, "switch", "node3", "upgrade", "--to=1.0.0", "--yes")
	if res.ExitCode != 3 || !strings.Contains(res.Stdout+res.Stderr, "node3") || !strings.Contains(res.Stderr, "--resume") {
		t.Errorf("node3 cut during the switch: exit %d, want 3 naming node3 and --resume\n%s", res.ExitCode, res.Stderr)
	}
	t.Logf("FIGURES all at once, node3 cut during the switch: the run ended in %.1fs after the release", took.Seconds())
	if res := cutover(t, c, "upgrade", "--resume"); res.ExitCode != 3 || !strings.Contains(res.Stderr, "--skip-node") {
		t.Errorf("resume with node3 still cut off: exit %d, want 3 pointing to --skip-node\n%s", res.ExitCode, res.Stderr)
	}
	if res := cutover(t, c, "upgrade", "--resume", "--skip-node=node3"); res.ExitCode != 0 {
		t.Fatalf("resume --skip-node=node3: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	r := lastRun(t, c)
	if r.Outcome != journal.Succeeded || !slices.Contains(r.Offline, "node3") {
		t.Errorf("resume --skip-node=node3: run %d %s with offline %v, want done with node3 offline", r.ID, r.Outcome, r.Offline)
	}
	checkNoIntent(t, c, "resume --skip-node=node3")
	checkAt(t, c, "1.0.0", online(c, "node3")...)
	checkSkippedThenSync(t, c, r.ID, "1.1.0", "1.0.0", "node3")
}

// TestRollingCutSkipNode cuts a node off in a batch after a rolling downgrade's point of no
// return (its first batch after the canaries): the run goes on with the other batches and
// ends failed, pending, exit 3 pointing to --resume. A resume with the node still gone exits 3
// pointing to --skip-node; `--resume --skip-node=NODE` ends the run done without it; status
// then shows no pending run, and once the node is back, shows it behind with the command
// that catches it up, which does.
func TestRollingCutSkipNode(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{Live: "1.2.0"})

	// Batches canary node2, node3 (the point of no return), node4, node1; node4 is cut as
	// batch 3 begins.
	useRolling(t, c, demo.Rolling{BatchSize: 1, Canaries: []string{"node2"}, MaxFailed: 0, BatchTimeout: "90s"})
	source := stateOf(t, c, "node4")
	res, took := cutInBatch(t, c, "batch-3", "node4", "upgrade", "--to=1.1.0", "--yes")
	if res.ExitCode != 3 || !strings.Contains(res.Stdout+res.Stderr, "node4") || !strings.Contains(res.Stderr, "--resume") {
		t.Errorf("node4 cut past the point of no return: exit %d, want 3 naming node4 and --resume\n%s", res.ExitCode, res.Stderr)
	}
	t.Logf("FIGURES node4 cut in batch 3 past the point of no return: the run ended in %.1fs after the release", took.Seconds())
	checkAt(t, c, "1.1.0", online(c, "node4")...)
	r := lastRun(t, c)
	if r.Outcome != journal.FailedPastPONR || !r.PastPONR {
		t.Errorf("node4 cut past the point of no return: run %d %s (past %v), want failed past its point of no return", r.ID, r.Outcome, r.PastPONR)
	}
	pending := cutover(t, c, "status")
	if want := fmt.Sprintf("pending: run %d, downgrade 1.2.0 -> 1.1.0", r.ID); pending.ExitCode != 0 || !strings.Contains(pending.Stdout, want) || !strings.Contains(pending.Stdout, "--skip-node node4") {
		t.Errorf("status with the run pending: exit %d, want 0, %q and --skip-node node4 advised", pending.ExitCode, want)
	}
	var st statusDoc
	decode(t, cutover(t, c, "--output", "json", "status"), &st)
	if st.Pending == nil || st.Pending.Run != r.ID {
		t.Errorf("status with the run pending as JSON: pending %+v, want run %d", st.Pending, r.ID)
	}

	if res := cutover(t, c, "upgrade", "--resume"); res.ExitCode != 3 || !strings.Contains(res.Stderr, "--skip-node") {
		t.Errorf("resume with node4 still cut off: exit %d, want 3 pointing to --skip-node\n%s", res.ExitCode, res.Stderr)
	}
	if res := cutover(t, c, "upgrade", "--resume", "--skip-node=node4"); res.ExitCode != 0 {
		t.Fatalf("resume --skip-node=node4: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	r = lastRun(t, c)
	if r.Outcome != journal.Succeeded || !slices.Contains(r.Offline, "node4") {
		t.Errorf("resume --skip-node=node4: run %d %s with offline %v, want done with node4 offline", r.ID, r.Outcome, r.Offline)
	}
	// The batches done by the first execution are done once: neither resume switches their
	// nodes again.
	starts := map[string]int{}
	for _, e := range r.Events {
		if e.State == journal.Started {
			starts[e.Stage]++
		}
	}
	for _, b := range []string{"batch-1", "batch-2", "batch-4"} {
		if starts[b] != 1 {
			t.Errorf("run %d: %s started %d times, want once", r.ID, b, starts[b])
		}
	}
	checkNoIntent(t, c, "resume --skip-node=node4")
	checkAt(t, c, "1.1.0", online(c, "node4")...)

	// node4 was never switched (only the config downgrade, which runs before the batches,
	// reached it): it still runs 1.2.0.
	if got := stateOf(t, c, "node4"); got.Lib != source.Lib || got.Share != source.Share || got.Daemon != source.Daemon {
		t.Errorf("node4 left out of the run: %+v, want the links and daemon of 1.2.0: %+v", got, source)
	}
	checkSkippedThenSync(t, c, r.ID, "1.2.0", "1.1.0", "node4")
}
