package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/nodes/sshdtest"
)

// syncWatchCluster is the master and node2, a real sshd that shares the master's file system
// (crashfixture_test.go), for the watch of `cutover sync`.
type syncWatchCluster struct {
	t *testing.T
	f *crashFixture
}

func newSyncWatchCluster(t *testing.T) *syncWatchCluster {
	t.Helper()
	c := sshdtest.Start(t, 1)
	f, err := newCrashFixture(c.UserDir(t), fixtureOpts{ssh: c, sshDir: c.UserDir(t), live: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.release() })
	return &syncWatchCluster{t: t, f: f}
}

// cutover runs the command line in-process on the cluster's config.
func (sw *syncWatchCluster) cutover(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"cutover", "--config", sw.f.cfg}, args...), strings.NewReader(""), &stdout, &stderr)
	sw.t.Logf("cutover %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	return code, stdout.String(), stderr.String()
}

// read returns a file of the fixture, "" when it is missing.
func (sw *syncWatchCluster) read(rel string) string {
	data, _ := os.ReadFile(sw.f.path(rel))
	return string(data)
}

// policy sets the config's [policy] table (before [config]) and its verify command.
func (sw *syncWatchCluster) policy(policy, verify string) {
	sw.t.Helper()
	var lines []string
	skip := false
	for _, l := range strings.Split(sw.read("cutover.toml"), "\n") {
		switch {
		case l == "[policy]":
			skip = true
			continue
		case strings.HasPrefix(l, "["):
			skip = false
		case skip:
			continue
		case strings.HasPrefix(l, "verify = "):
			l = "verify = " + verify
		}
		if l == "[config]" && policy != "" {
			lines = append(lines, "[policy]", policy)
		}
		lines = append(lines, l)
	}
	if err := os.WriteFile(sw.f.cfg, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		sw.t.Fatal(err)
	}
}

// lastRun is the journal's last run.
func (sw *syncWatchCluster) lastRun() journal.Run {
	sw.t.Helper()
	runs, err := journal.NewStore(sw.f.path("state/journal.db")).Runs(context.Background())
	if err != nil || len(runs) == 0 {
		sw.t.Fatalf("journal: %d runs, %v", len(runs), err)
	}
	return runs[len(runs)-1]
}

// wantSynced fails the test unless the last run is a sync of node2 that ended with outcome,
// its watch ending with end, and nothing is pending.
func (sw *syncWatchCluster) wantSynced(outcome journal.Outcome, end string) journal.Run {
	sw.t.Helper()
	jr := sw.lastRun()
	ev, _ := jr.LastEvent("watch")
	wantState := map[journal.Outcome]journal.State{journal.Succeeded: journal.Done, journal.FailedPastPONR: journal.Failed}[outcome]
	if jr.Kind != "sync" || jr.Outcome != outcome || ev.State != wantState || !strings.HasPrefix(jr.Facts["watch.1.end"], end) {
		sw.t.Errorf("journal: run %d %s %s, watch %s, end %q; want a sync %s, its watch %s ending %q",
			jr.ID, jr.Kind, jr.Outcome, ev.State, jr.Facts["watch.1.end"], outcome, wantState, end)
	}
	if _, err := os.Stat(sw.f.path("state/intent.json")); !os.IsNotExist(err) {
		sw.t.Errorf("an intent after a sync (%v): a sync is never pending", err)
	}
	if got := sw.read("run/daemons.node2"); got != "running 1.0.0\n" {
		sw.t.Errorf("node2's daemons %q, want running 1.0.0: nothing undone", got)
	}
	return jr
}

// watchChecks counts the checks jr's watch journaled.
func watchChecks(jr journal.Run) int {
	n := 0
	for k := range jr.Facts {
		if strings.HasPrefix(k, "watch.1.check.") {
			n++
		}
	}
	return n
}

// TestSyncWatch: `cutover sync --watch` (or [policy] watch) watches the synced node after the
// sync's verify, on a master and a real sshd node. A healthy window ends the sync done; failed
// checks in a row end it with exit 3 and no rollback, and the same sync run again (the node
// already at the live version) syncs and watches again; Ctrl-C ends the watch early with exit
// 3 and nothing pending. Status, the journal and the JSON show the watch.
func TestSyncWatch(t *testing.T) {
	sw := newSyncWatchCluster(t)
	calls := sw.f.path("run/calls")
	passing := `": verify; echo verify >> ` + calls + `"`

	// A --watch that is not a duration is refused before anything runs.
	for _, bad := range []string{"--watch=soon", "--watch=-1m"} {
		if code, _, errOut := sw.cutover("sync", "--yes", bad, "node2"); code != exitUsage || !strings.Contains(errOut, "--watch") {
			t.Errorf("sync %s: exit %d, want %d naming --watch", bad, code, exitUsage)
		}
	}
	if got := sw.read("run/calls") + sw.read("run/events"); got != "" {
		t.Fatalf("a refused --watch ran commands: %q", got)
	}

	// A healthy window: the sync is done once it passed.
	start := time.Now()
	code, out, _ := sw.cutover("sync", "--yes", "--watch=2s", "node2")
	if code != exitOK || !strings.Contains(out, "] watch") || !strings.Contains(out, "watch: ") {
		t.Fatalf("sync --watch=2s: exit %d, want 0 with the watch stage and its progress shown", code)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("the sync took %s, less than its 2s window", took)
	}
	jr := sw.wantSynced(journal.Succeeded, "passed: ")
	checks := watchChecks(jr)
	if got := strings.Count(sw.read("run/calls"), "verify\n"); checks < 1 || got != 1+checks {
		t.Errorf("verify ran %d times with %d checks journaled, want the sync's verify and every check", got, checks)
	}
	if code, out, _ := sw.cutover("journal", "1"); code != exitOK || !strings.Contains(out, "watch    passed: ") {
		t.Errorf("journal 1: exit %d, want the sync's watch shown", code)
	}
	if code, out, _ := sw.cutover("status", "--no-verify"); code != exitOK || !strings.Contains(out, "last run 1, sync") || !strings.Contains(out, "  watch: passed: ") {
		t.Errorf("status: exit %d, want the last sync's watch shown\n%s", code, out)
	}

	// Failed checks in a row: exit 3, no rollback; the cause fixed, the sync run again
	// syncs the node (already at the live version) and watches again.
	sw.policy("watch = \"1h\"\nwatch_interval = \"1s\"\nwatch_failures = 2\non_failure = \"rollback\"",
		`": verify; echo verify >> `+calls+`; test ! -e `+sw.f.path("run/verify-count")+` || exit 1; touch `+sw.f.path("run/verify-count")+`"`)
	stops := strings.Count(sw.read("run/events"), "stop-start")
	code, out, errOut := sw.cutover("--output", "json", "sync", "--yes", "node2")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var done struct {
		Type    string `json:"type"`
		Exit    int    `json:"exit"`
		Watched bool   `json:"watched"`
		Error   string `json:"error"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &done); err != nil {
		t.Fatalf("last line %q: %v", lines[len(lines)-1], err)
	}
	if code != exitPastPONR || done.Type != "done" || done.Exit != exitPastPONR || !done.Watched ||
		!strings.Contains(done.Error, "the watch of sync run 2 of node2 failed: 2 checks in a row failed") ||
		!strings.Contains(done.Error, "run 'cutover sync node2' again") || strings.Contains(errOut+out, "--resume") || strings.Contains(errOut+out, "--abort") {
		t.Fatalf("a failing watch: exit %d, done %+v; want %d naming the failure and the sync to run again, no resume or abort", code, done, exitPastPONR)
	}
	if !strings.Contains(out, `"stage":"watch"`) || !strings.Contains(out, `"watch":{`) {
		t.Errorf("the JSON events show no watch progress")
	}
	sw.wantSynced(journal.FailedPastPONR, "failed: 2 checks in a row failed, the last: verify: ")
	if got := strings.Count(sw.read("run/events"), "stop-start"); got != stops+1 {
		t.Errorf("node2 stopped %d times in the sync, want once: a failed watch of a sync rolls nothing back", got-stops)
	}
	if jr := sw.lastRun(); jr.ID != 2 {
		t.Errorf("the last run is %d, want the sync (2): no rollback run", jr.ID)
	}
	sw.policy("watch = \"1s\"\nwatch_interval = \"1s\"", passing)
	if code, out, _ := sw.cutover("sync", "--yes", "node2"); code != exitOK || !strings.Contains(out, "] watch") {
		t.Fatalf("the sync run again: exit %d, want 0 with the watch", code)
	}
	sw.wantSynced(journal.Succeeded, "passed")
	if got := strings.Count(sw.read("run/events"), "stop-start"); got != stops+2 {
		t.Errorf("the sync run again stopped node2 %d times, want once more", got-stops-1)
	}

	// Ctrl-C in the watch ends it early: exit 3, nothing pending.
	verifies := strings.Count(sw.read("run/calls"), "verify\n")
	type result struct {
		code        int
		out, errOut string
	}
	ended := make(chan result, 1)
	go func() {
		code, out, errOut := sw.cutover("sync", "--yes", "--watch=1h", "node2")
		ended <- result{code, out, errOut}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(sw.read("run/calls"), "verify\n") < verifies+2 { // the sync's verify, a check
		if time.Now().After(deadline) {
			t.Fatalf("no check of the watch within 30s; calls %q", sw.read("run/calls"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // the check's fact is journaled
	_ = syscall.Kill(os.Getpid(), syscall.SIGINT)
	res := <-ended
	if res.code != exitPastPONR || !strings.Contains(res.errOut, "the watch of sync run 4 of node2 was not completed: it ended early by SIGINT") ||
		!strings.Contains(res.errOut, "run 'cutover sync node2' again to watch them again") ||
		strings.Contains(res.errOut+res.out, "--resume") || strings.Contains(res.errOut+res.out, "--abort") {
		t.Fatalf("Ctrl-C: exit %d, want %d saying the watch was not completed and to sync again, no resume or abort", res.code, exitPastPONR)
	}
	sw.wantSynced(journal.FailedPastPONR, "ended-early: by SIGINT at ")
	if code, out, _ := sw.cutover("status", "--no-verify"); code != exitOK || !strings.Contains(out, "pending: none; last run 4, sync") || !strings.Contains(out, "  watch: ended-early: by SIGINT") {
		t.Errorf("status: exit %d, want nothing pending and the sync's watch ended early\n%s", code, out)
	}
	if code, out, _ := sw.cutover("--output", "json", "journal", "4"); code != exitOK || !strings.Contains(out, `"state": "ended-early"`) {
		t.Errorf("journal 4 JSON: exit %d, want the watch ended early\n%s", code, out)
	}
}
