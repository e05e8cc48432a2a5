package main

import (
	"context"
	"strings"
	"testing"

	"github.com/cutover/cutover/journal"
)

// TestAutomaticRollback: with [policy] on_failure = "rollback", a run whose final verify fails
// past its point of no return is taken back to its source by a downgrade run linked to it in
// the journal (exit 6), and so is one whose --resume fails; the default, "stop", leaves the run
// pending (exit 3); a rollback is tried at most once per run.
func TestAutomaticRollback(t *testing.T) {
	// verify passes only while the links name 1.0.0: the upgrade's final verify fails.
	verifyOn100 := func(lc *localCluster) string {
		return "readlink " + lc.path("etc/app/lib") + " | grep -q /1.0.0$"
	}
	atSource := func(t *testing.T, lc *localCluster) {
		t.Helper()
		if lib, share := lc.readlink("etc/app/lib"), lc.readlink("etc/app/share"); lib != "/usr/lib/app/1.0.0" || share != "/usr/share/app/1.0.0" {
			t.Errorf("links %s, %s; want 1.0.0", lib, share)
		}
		if cfg := lc.read("var/lib/app/config.json"); !strings.Contains(cfg, `"name": "demo"`) || !strings.Contains(cfg, `"version": "1.0.0"`) {
			t.Errorf("config %q, want 1.0.0's with /name back", cfg)
		}
	}
	runs := func(t *testing.T, lc *localCluster) []journal.Run {
		t.Helper()
		rs, err := journal.NewStore(lc.path("state/journal.db")).Runs(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	policy := func(lc *localCluster, onFailure string) {
		text := lc.read("cutover.toml")
		if i := strings.Index(text, "\n[policy]"); i >= 0 {
			text = text[:i]
		}
		lc.writeConfig(text + "\n[policy]\non_failure = \"" + onFailure + "\"\n")
	}

	t.Run("final verify fails", func(t *testing.T) {
		lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
		lc.setCommand("verify", verifyOn100(lc))
		policy(lc, "rollback")
		code, out, errOut := lc.cutover("upgrade", "--to=1.1.0", "--yes")
		t.Logf("exit %d\n%s%s", code, out, errOut)
		if code != exitRolledBack || !strings.Contains(errOut, "on_failure") || !strings.Contains(out, "rolled back: app 1.0.0") {
			t.Fatalf("exit %d, want %d with the rollback said", code, exitRolledBack)
		}
		atSource(t, lc)
		rs := runs(t, lc)
		if len(rs) != 2 {
			t.Fatalf("journal has %d runs, want the failed run and its rollback", len(rs))
		}
		failed, back := rs[0], rs[1]
		if failed.Outcome != journal.RolledBack || failed.Facts["rollback-run"] != "2" || failed.To != "1.1.0" {
			t.Errorf("failed run: %s -> %s %s, facts %v; want rolled-back with rollback-run 2", failed.From, failed.To, failed.Outcome, failed.Facts)
		}
		if back.Outcome != journal.Succeeded || back.Facts["rollback-of"] != "1" || back.From != "1.1.0" || back.To != "1.0.0" || back.Direction != "downgrade" {
			t.Errorf("rollback run: %s %s -> %s %s, facts %v; want a done downgrade 1.1.0 -> 1.0.0, rollback-of 1", back.Direction, back.From, back.To, back.Outcome, back.Facts)
		}
		if code, out, _ := lc.cutover("upgrade", "--resume"); code != 0 || strings.TrimSpace(out) != "" {
			t.Errorf("resume after the rollback: exit %d, %q; want nothing pending", code, out)
		}
	})

	t.Run("stop leaves the run pending", func(t *testing.T) {
		lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
		lc.setCommand("verify", verifyOn100(lc))
		code, _, errOut := lc.cutover("upgrade", "--to=1.1.0", "--yes")
		if code != exitPastPONR || strings.Contains(errOut, "on_failure") {
			t.Fatalf("exit %d, want %d with no rollback\n%s", code, exitPastPONR, errOut)
		}
		if rs := runs(t, lc); len(rs) != 1 || rs[0].Outcome != journal.FailedPastPONR {
			t.Fatalf("journal %+v, want one run failed past its point of no return", rs)
		}
		// The resume fails too, now under the rollback policy: the cluster goes back.
		policy(lc, "rollback")
		code, out, errOut := lc.cutover("upgrade", "--resume")
		t.Logf("exit %d\n%s%s", code, out, errOut)
		if code != exitRolledBack {
			t.Fatalf("resume: exit %d, want %d", code, exitRolledBack)
		}
		atSource(t, lc)
		if rs := runs(t, lc); len(rs) != 2 || rs[0].Outcome != journal.RolledBack || rs[1].Facts["rollback-of"] != "1" {
			t.Errorf("journal %+v, want run 1 rolled back by run 2", rs)
		}
	})

	t.Run("a rollback the policy forbids leaves the failed run pending", func(t *testing.T) {
		lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
		lc.setCommand("verify", verifyOn100(lc))
		lc.writeConfig(lc.read("cutover.toml") + "\n[policy]\non_failure = \"rollback\"\ndowngrade = \"never\"\n")
		code, _, errOut := lc.cutover("upgrade", "--to=1.1.0", "--yes")
		if code != exitPastPONR || !strings.Contains(errOut, "the automatic rollback did not go through") {
			t.Fatalf("exit %d, want %d saying the rollback did not go through\n%s", code, exitPastPONR, errOut)
		}
		in, err := journal.ReadIntent(lc.path("state/intent.json"))
		if err != nil || in.RunID != 1 {
			t.Errorf("intent %+v, %v; want run 1 still pending", in, err)
		}
		if rs := runs(t, lc); len(rs) != 1 || rs[0].Outcome != journal.FailedPastPONR || rs[0].Facts["rollback"] == "" {
			t.Errorf("journal %+v, want only run 1, failed past its point of no return, its rollback tried", rs)
		}
		if lib := lc.readlink("etc/app/lib"); lib != "/usr/lib/app/1.1.0" {
			t.Errorf("links %s, want the failed run's target left as it was", lib)
		}
	})

	t.Run("at most once", func(t *testing.T) {
		// verify never passes after the first check: the rollback fails its own final verify
		// and is left pending, never rolled back in turn.
		lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
		lc.setCommand("verify", "test ! -e "+lc.path("verified")+" && touch "+lc.path("verified"))
		policy(lc, "rollback")
		code, _, errOut := lc.cutover("upgrade", "--to=1.1.0", "--yes")
		if code != exitPastPONR || !strings.Contains(errOut, "the automatic rollback, run 2, failed too") {
			t.Fatalf("exit %d, want %d naming the failed rollback\n%s", code, exitPastPONR, errOut)
		}
		code, _, errOut = lc.cutover("upgrade", "--resume")
		if code != exitPastPONR || strings.Contains(errOut, "run 3") {
			t.Errorf("resume of the failed rollback: exit %d, want %d and no third run\n%s", code, exitPastPONR, errOut)
		}
		rs := runs(t, lc)
		if len(rs) != 2 || rs[0].Outcome != journal.FailedPastPONR || rs[1].Outcome != journal.FailedPastPONR || rs[1].Facts["rollback-of"] != "1" {
			t.Errorf("journal %+v: want run 1 failed and its rollback, run 2, pending", rs)
		}
	})
}
