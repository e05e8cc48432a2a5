package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/test/cluster"
)

// setWatch sets the watch of the cluster's config: [policy] lines (watch, watch_interval,
// watch_failures, watch_boots, on_failure) in place of any set before, and a short
// daemons_ready_timeout for the boots inside the window.
func setWatch(t *testing.T, c *cluster.Cluster, policy string) {
	t.Helper()
	policy = strings.ReplaceAll(strings.TrimSpace(policy), "\n", `\n`)
	must(t, c, c.Master, `sed -i -e '/^watch/d' -e '/^on_failure/d' -e '/^daemons_ready_timeout/d' `+
		`-e 's#^\[policy\]$#[policy]\n`+policy+`#' -e 's#^\[commands\]$#[commands]\ndaemons_ready_timeout = "20s"#' /etc/cutover/cutover.toml && `+
		`grep -q '^watch = ' /etc/cutover/cutover.toml`)
}

// dieAfter makes 1.2.0 a release built to crash on every node of names: its daemons die that
// long after they start (demoapp's die-after file); "" makes it a good release again.
func dieAfter(t *testing.T, c *cluster.Cluster, after string, names ...string) {
	t.Helper()
	for _, n := range names {
		if after == "" {
			must(t, c, n, "rm -f /usr/share/demoapp/1.2.0/die-after")
		} else {
			must(t, c, n, "echo "+after+" > /usr/share/demoapp/1.2.0/die-after")
		}
	}
}

// waitIntentGone waits until no run is pending, as the boot resume ends one.
func waitIntentGone(t *testing.T, c *cluster.Cluster, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for sh(t, c, c.Master, "test -e /var/lib/cutover/intent.json").ExitCode == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the boot resume did not end the run within %s:\n%s", limit, sh(t, c, c.Master, "cat /var/log/cutover-resume.log").Stdout)
		}
		time.Sleep(time.Second)
	}
}

// TestWatch runs the watch on the real cluster, one scenario after the other on one cluster:
// a release whose daemons die 15 s after they start passes its final verify and fails its
// watch, and is rolled back by itself with on_failure = "rollback"; without it the run stays
// pending naming both ways out, and --abort ends the watch; a good release whose master reboots
// inside the window is watched on by the boot resume and ends done; and a release whose master
// does not become healthy after its boots is rolled back after watch_boots of them.
func TestWatch(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{Live: "1.1.0"})
	all := online(c)
	ctx := context.Background()

	// A release that dies, on_failure = "rollback": the cluster goes back by itself.
	dieAfter(t, c, "15s", all...)
	setWatch(t, c, "watch = \"60s\"\nwatch_interval = \"3s\"\nwatch_failures = 2\non_failure = \"rollback\"")
	res := cutover(t, c, "upgrade", "--to=1.2.0", "--yes")
	if res.ExitCode != 6 || !strings.Contains(res.Stdout, "watch: ") || !strings.Contains(res.Stdout, "rolled back: demoapp 1.1.0") {
		t.Fatalf("upgrade to a release that dies in its watch: exit %d, want 6 with the watch and the rollback shown", res.ExitCode)
	}
	checkAt(t, c, "1.1.0", all...)
	rs := runs(t, c)
	failed, back := rs[len(rs)-2], rs[len(rs)-1]
	if failed.To != "1.2.0" || failed.Outcome != journal.RolledBack || !strings.HasPrefix(failed.Facts["watch.1.end"], "failed: 2 checks in a row failed") {
		t.Errorf("run %d: -> %s %s, watch end %q; want 1.2.0 rolled back after 2 failed checks", failed.ID, failed.To, failed.Outcome, failed.Facts["watch.1.end"])
	}
	if ev, _ := failed.LastEvent("finish"); ev.State != journal.Done {
		t.Errorf("run %d: finish %s, want done: the final verify passed", failed.ID, ev.State)
	}
	if back.Facts["rollback-of"] != fmt.Sprint(failed.ID) || back.Outcome != journal.Succeeded {
		t.Errorf("run %d: facts %v, %s; want the done rollback of run %d", back.ID, back.Facts, back.Outcome, failed.ID)
	}

	// The same without on_failure: the run stays pending, both ways out named; --abort ends the
	// watch and keeps 1.2.0.
	setWatch(t, c, "watch = \"60s\"\nwatch_interval = \"3s\"\nwatch_failures = 2")
	res = cutover(t, c, "upgrade", "--to=1.2.0", "--yes")
	if res.ExitCode != 3 || !strings.Contains(res.Stderr, "the watch of run") || !strings.Contains(res.Stderr, "'cutover upgrade --resume'") || !strings.Contains(res.Stderr, "'cutover upgrade --abort'") {
		t.Fatalf("upgrade to a release that dies in its watch, on_failure = \"stop\": exit %d, want 3 naming both ways out", res.ExitCode)
	}
	st := cutover(t, c, "status")
	if !strings.Contains(st.Stdout, "watch: failed: 2 checks in a row failed") || !strings.Contains(st.Stdout, "'cutover upgrade --abort' ends the watch") {
		t.Errorf("status does not show the failed watch and its ways out")
	}
	res = cutover(t, c, "upgrade", "--abort")
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "ended the watch of run") {
		t.Fatalf("--abort of the failed watch: exit %d, want 0 ending the watch", res.ExitCode)
	}
	r := lastRun(t, c)
	if ev, _ := r.LastEvent("watch"); r.Outcome != journal.Succeeded || ev.State != journal.Done || !strings.Contains(ev.Message, "ended early") {
		t.Errorf("run %d: %s, watch %s %q; want done, the watch ended early", r.ID, r.Outcome, ev.State, ev.Message)
	}
	if st := stateOf(t, c, c.Master); st.Lib != "/usr/lib/demoapp/1.2.0" {
		t.Errorf("master's links -> %s after --abort of the watch, want 1.2.0 kept", st.Lib)
	}
	dieAfter(t, c, "", all...)
	if res := cutover(t, c, "upgrade", "--to=1.1.0", "--yes", "--force=unhealthy", "--watch=0"); res.ExitCode != 0 {
		t.Fatalf("back to 1.1.0: exit %d", res.ExitCode)
	}
	checkAt(t, c, "1.1.0", all...)

	// A good release whose master reboots inside the window: the boot resume watches on and
	// the run ends done.
	setWatch(t, c, "watch = \"40s\"\nwatch_interval = \"3s\"\nwatch_failures = 2\non_failure = \"rollback\"")
	h := startWatched(t, c)
	if err := c.Reboot(ctx, c.Master); err != nil {
		t.Fatal(err)
	}
	h.wait(t)
	waitIntentGone(t, c, 4*time.Minute)
	t.Logf("resume at boot:\n%s", must(t, c, c.Master, "cat /var/log/cutover-resume.log"))
	checkAt(t, c, "1.2.0", all...)
	r = lastRun(t, c)
	if !strings.HasPrefix(r.Facts["watch.1.end"], "passed") || r.Outcome != journal.Succeeded || !hasFact(r, "watch.1.boot.", "healthy") {
		t.Errorf("run %d: %s, watch end %q, facts %v; want done, the watch passed with a healthy boot inside it", r.ID, r.Outcome, r.Facts["watch.1.end"], r.Facts)
	}

	// A release whose master does not become healthy after a boot: each boot inside the
	// window is a failed attempt, the second (watch_boots = 2) ends the watch failed, and the
	// rollback takes the cluster back.
	must(t, c, c.Master, "rm -f /var/log/cutover-resume.log")
	setWatch(t, c, "watch = \"10m\"\nwatch_interval = \"3s\"\nwatch_failures = 3\nwatch_boots = 2\non_failure = \"rollback\"")
	if res := cutover(t, c, "upgrade", "--to=1.1.0", "--yes", "--watch=0"); res.ExitCode != 0 {
		t.Fatalf("back to 1.1.0: exit %d", res.ExitCode)
	}
	h = startWatched(t, c)
	dieAfter(t, c, "1ms", c.Master) // from its next start on, the master's daemon dies at once
	for boot := 1; boot <= 2; boot++ {
		if err := c.Reboot(ctx, c.Master); err != nil {
			t.Fatal(err)
		}
		if boot == 1 {
			h.wait(t)
			deadline := time.Now().Add(3 * time.Minute)
			for !strings.Contains(sh(t, c, c.Master, "cat /var/log/cutover-resume.log").Stdout, "did not become healthy") {
				if time.Now().After(deadline) {
					t.Fatalf("the first boot inside the watch was not counted:\n%s", sh(t, c, c.Master, "cat /var/log/cutover-resume.log").Stdout)
				}
				time.Sleep(time.Second)
			}
		}
	}
	waitIntentGone(t, c, 4*time.Minute)
	log := must(t, c, c.Master, "cat /var/log/cutover-resume.log")
	t.Logf("resumes at boot:\n%s", log)
	if !strings.Contains(log, "rolled back: demoapp 1.1.0") {
		t.Errorf("the resume log does not say the cluster was rolled back")
	}
	dieAfter(t, c, "", c.Master)
	checkAt(t, c, "1.1.0", all...)
	rs = runs(t, c)
	failed = rs[len(rs)-2]
	if failed.Outcome != journal.RolledBack || !strings.HasPrefix(failed.Facts["watch.1.end"], "failed: 2 boots of the master") {
		t.Errorf("run %d: %s, watch end %q; want rolled back after 2 failed boots", failed.ID, failed.Outcome, failed.Facts["watch.1.end"])
	}
}

// startWatched starts an upgrade to 1.2.0 with a watch on the master and returns once its watch
// journaled a check.
func startWatched(t *testing.T, c *cluster.Cluster) *heldRun {
	t.Helper()
	h := &heldRun{done: make(chan cluster.Result, 1)}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		res, err := c.Shell(ctx, c.Master, "/usr/sbin/cutover upgrade --to=1.2.0 --yes")
		if err != nil {
			res = cluster.Result{ExitCode: -1, Stderr: err.Error()}
		}
		h.done <- res
	}()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		select {
		case res := <-h.done:
			t.Fatalf("the upgrade ended before its watch checked: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
		default:
		}
		if rs := runs(t, c); len(rs) > 0 && hasFact(rs[len(rs)-1], "watch.1.check.", "passed") {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatal("the upgrade's watch did not check within 3 minutes")
		}
		time.Sleep(time.Second)
	}
}

// hasFact reports whether a fact of run r under prefix has value.
func hasFact(r journal.Run, prefix, value string) bool {
	for k, v := range r.Facts {
		if strings.HasPrefix(k, prefix) && v == value {
			return true
		}
	}
	return false
}
