package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
)

// watchPolicy sets the [policy] table of lc's config: a watch of window, a check every second,
// and on_failure.
func watchPolicy(lc *localCluster, window, onFailure string) {
	text := lc.read("cutover.toml")
	if i := strings.Index(text, "\n[policy]"); i >= 0 {
		text = text[:i]
	}
	lc.writeConfig(text + "\n[policy]\nwatch = \"" + window + "\"\nwatch_interval = \"1s\"\nwatch_failures = 2\non_failure = \"" + onFailure + "\"\n")
}

// verifyFailsAfter is a verify that passes its first n runs and, while the links name 1.1.0,
// fails every later one: a release that passes its final verify and fails in the watch.
func verifyFailsAfter(lc *localCluster, n int) string {
	count := lc.path("verify-count")
	return "c=$(cat " + count + " 2>/dev/null || echo 0); c=$((c+1)); echo $c > " + count +
		"; readlink " + lc.path("etc/app/lib") + " | grep -q /1.0.0$ || test $c -le " + string(rune('0'+n))
}

// runs reads the journal's runs.
func (lc *localCluster) runs() []journal.Run {
	lc.t.Helper()
	rs, err := journal.NewStore(lc.path("state/journal.db")).Runs(context.Background())
	if err != nil {
		lc.t.Fatal(err)
	}
	return rs
}

// TestWatch: a run with a watch is done only once its window passed healthy; failed checks in
// a row end the watch failed, and then the cluster goes back by itself with on_failure =
// "rollback", or the run stays pending (exit 3) naming both ways out, which status shows and
// --abort takes (the watch ends early, the run done at its target).
func TestWatch(t *testing.T) {
	t.Run("a healthy window ends the run done", func(t *testing.T) {
		lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
		watchPolicy(lc, "2s", "stop")
		start := time.Now()
		code, out, errOut := lc.cutover("upgrade", "--to=1.1.0", "--yes")
		t.Logf("exit %d\n%s%s", code, out, errOut)
		if code != exitOK || !strings.Contains(out, "] watch") || !strings.Contains(out, "watch: ") {
			t.Fatalf("exit %d, want 0 with the watch stage and its progress shown", code)
		}
		if took := time.Since(start); took < 2*time.Second {
			t.Errorf("the run took %s, less than its 2s window", took)
		}
		// Two checks, one a second into the window and one at its end; on a busy machine a
		// first check that takes a second itself ends past the window, and is the last.
		jr := lc.journalRun()
		var passed, checks int
		fmt.Sscanf(jr.Facts["watch.1.end"], "passed: %d of %d checks", &passed, &checks)
		if ev, _ := jr.LastEvent("watch"); jr.Outcome != journal.Succeeded || ev.State != journal.Done || passed < 1 || passed > 2 || passed != checks {
			t.Errorf("journal: run %s, watch %s, end %q; want done after every check passed, one or two", jr.Outcome, ev.State, jr.Facts["watch.1.end"])
		}
		if _, err := os.Stat(lc.path("state/intent.json")); !os.IsNotExist(err) {
			t.Errorf("intent after a watched run: %v, want none", err)
		}
		if got := strings.Count(lc.read("calls"), "verify\n"); got != 2+checks {
			t.Errorf("verify ran %d times, want %d: the health gate, the final verify and the %d checks", got, 2+checks, checks)
		}
		// --watch=0 turns the watch off for one run: the way back has no watch stage.
		code, out, _ = lc.cutover("upgrade", "--to=1.0.0", "--yes", "--watch=0")
		if code != exitOK || strings.Contains(out, "] watch") {
			t.Errorf("--watch=0: exit %d, want 0 without a watch\n%s", code, out)
		}
	})

	t.Run("failures in a row roll the cluster back", func(t *testing.T) {
		lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
		lc.setCommand("verify", verifyFailsAfter(lc, 2))
		watchPolicy(lc, "1h", "rollback")
		code, out, errOut := lc.cutover("upgrade", "--to=1.1.0", "--yes")
		t.Logf("exit %d\n%s%s", code, out, errOut)
		if code != exitRolledBack || !strings.Contains(out, "rolled back: app 1.0.0") {
			t.Fatalf("exit %d, want %d with the rollback said", code, exitRolledBack)
		}
		if lib := lc.readlink("etc/app/lib"); lib != "/usr/lib/app/1.0.0" {
			t.Errorf("links %s, want 1.0.0 back", lib)
		}
		rs := lc.runs()
		if len(rs) != 2 || rs[0].Outcome != journal.RolledBack || rs[1].Facts["rollback-of"] != "1" || rs[1].Outcome != journal.Succeeded {
			t.Fatalf("journal %+v, want run 1 rolled back by run 2", rs)
		}
		if end := rs[0].Facts["watch.1.end"]; !strings.HasPrefix(end, "failed: 2 checks in a row failed") {
			t.Errorf("run 1's watch ended %q, want failed after 2 checks", end)
		}
		if _, watched := rs[1].Facts["watch"]; watched {
			t.Error("the rollback run watches too; it must not")
		}
	})

	t.Run("failures in a row leave the run pending, and --abort ends the watch", func(t *testing.T) {
		lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
		lc.setCommand("verify", verifyFailsAfter(lc, 2))
		watchPolicy(lc, "1h", "stop")
		code, out, errOut := lc.cutover("upgrade", "--to=1.1.0", "--yes")
		t.Logf("exit %d\n%s%s", code, out, errOut)
		if code != exitPastPONR || !strings.Contains(errOut, "the watch of run 1 failed") ||
			!strings.Contains(errOut, "'cutover upgrade --resume'") || !strings.Contains(errOut, "'cutover upgrade --abort'") {
			t.Fatalf("exit %d, want %d naming the failure and both ways out", code, exitPastPONR)
		}
		if jr := lc.journalRun(); jr.Outcome != journal.FailedPastPONR {
			t.Errorf("journal: run %s, want failed", jr.Outcome)
		}
		code, out, _ = lc.cutover("status", "--no-verify")
		if code != exitOK || !strings.Contains(out, "watch: failed: 2 checks in a row failed") || !strings.Contains(out, "'cutover upgrade --abort' ends the watch") {
			t.Errorf("status: exit %d, want the failed watch and its ways out\n%s", code, out)
		}
		_, out, _ = lc.cutover("--output", "json", "status", "--no-verify")
		var doc struct {
			Pending struct {
				Watch struct {
					State    string `json:"state"`
					Checks   int    `json:"checks"`
					Failures int    `json:"failures"`
				} `json:"watch"`
			} `json:"pending"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Pending.Watch.State != "failed" || doc.Pending.Watch.Failures != 2 {
			t.Errorf("status JSON: %+v, %v; want the pending run's watch failed after 2 failures\n%s", doc, err, out)
		}
		code, out, errOut = lc.cutover("upgrade", "--abort")
		t.Logf("abort: exit %d\n%s%s", code, out, errOut)
		if code != exitOK || !strings.Contains(out, "ended the watch of run 1 early: app 1.1.0 stays") {
			t.Fatalf("abort: exit %d, want 0 ending the watch", code)
		}
		jr := lc.journalRun()
		if ev, _ := jr.LastEvent("watch"); jr.Outcome != journal.Succeeded || ev.State != journal.Done || !strings.Contains(ev.Message, "ended early") ||
			!strings.HasPrefix(jr.Facts["watch.2.end"], "ended-early: by 'cutover upgrade --abort'") {
			t.Errorf("journal: run %s, watch %s %q, end %q; want done, the watch ended early", jr.Outcome, ev.State, ev.Message, jr.Facts["watch.2.end"])
		}
		if lib := lc.readlink("etc/app/lib"); lib != "/usr/lib/app/1.1.0" {
			t.Errorf("links %s, want 1.1.0 kept", lib)
		}
		if code, out, _ := lc.cutover("journal", "1"); code != exitOK || !strings.Contains(out, "watch    ended-early") {
			t.Errorf("journal 1: exit %d, want the watch's end shown\n%s", code, out)
		}
	})

	t.Run("Ctrl-C leaves the watch to the resume", func(t *testing.T) {
		lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
		watchPolicy(lc, "4s", "stop")
		type result struct {
			code        int
			out, errOut string
		}
		done := make(chan result, 1)
		go func() {
			code, out, errOut := lc.cutover("upgrade", "--to=1.1.0", "--yes")
			done <- result{code, out, errOut}
		}()
		deadline := time.Now().Add(30 * time.Second)
		for strings.Count(lc.read("calls"), "verify\n") < 3 { // the health gate, the final verify, a check
			if time.Now().After(deadline) {
				t.Fatalf("no check of the watch within 30s; calls %q", lc.read("calls"))
			}
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond) // the check's fact is journaled
		_ = syscall.Kill(os.Getpid(), syscall.SIGINT)
		res := <-done
		t.Logf("exit %d\n%s%s", res.code, res.out, res.errOut)
		if res.code != exitPastPONR || !strings.Contains(res.errOut, "the watch of run 1 was left") || !strings.Contains(res.errOut, "--resume") {
			t.Fatalf("exit %d, want %d leaving the watch to the resume", res.code, exitPastPONR)
		}
		if jr := lc.journalRun(); jr.Outcome != journal.Running || jr.Facts["watch.1.end"] != "" {
			t.Fatalf("journal: run %s, end %q; want the run pending and its watch not ended", jr.Outcome, jr.Facts["watch.1.end"])
		}
		if code, out, _ := lc.cutover("status", "--no-verify"); code != exitOK || !strings.Contains(out, "checks passed (a check every 1s)") {
			t.Errorf("status: exit %d, want the watch's time left and checks\n%s", code, out)
		}
		stops := strings.Count(lc.read("calls"), "stop\n")
		code, out, errOut := lc.cutover("upgrade", "--resume")
		t.Logf("resume: exit %d\n%s%s", code, out, errOut)
		jr := lc.journalRun()
		if code != exitOK || jr.Outcome != journal.Succeeded || !strings.HasPrefix(jr.Facts["watch.1.end"], "passed") {
			t.Fatalf("resume: exit %d, run %s, end %q; want the watch passed and the run done", code, jr.Outcome, jr.Facts["watch.1.end"])
		}
		if got := strings.Count(lc.read("calls"), "stop\n"); got != stops {
			t.Errorf("the resume of a watch stopped the daemons (%d stops, want %d)", got, stops)
		}
	})

	t.Run("--watch is refused where it does not belong", func(t *testing.T) {
		lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
		for _, args := range [][]string{{"upgrade", "--resume", "--watch=1m"}, {"upgrade", "--to=1.1.0", "--yes", "--watch=soon"}, {"upgrade", "--to=1.1.0", "--yes", "--watch=-1m"}} {
			if code, _, errOut := lc.cutover(args...); code != exitUsage || !strings.Contains(errOut, "--watch") {
				t.Errorf("%v: exit %d, want %d naming --watch\n%s", args, code, exitUsage, errOut)
			}
		}
		if lc.read("calls") != "" {
			t.Errorf("a refused --watch ran commands: %q", lc.read("calls"))
		}
	})
}
