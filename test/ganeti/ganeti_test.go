package ganeti

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestGaneti runs every scenario on one cluster, one after another: each leaves the cluster
// converged on its target, which the next starts from. The comparison with Ganeti's own
// gnt-cluster upgrade is BenchmarkGanetiSideBySide (make bench).
func TestGaneti(t *testing.T) {
	c := startCluster(t)
	t.Run("jobs during the drain, up and back", func(t *testing.T) { jobsDuringDrain(t, c) })
	// The master restarted hard in each direction, before and after the point of no return;
	// the @reboot line finishes each run. Each scenario starts where the one before ended,
	// and together they end where they began (3.0): make ganeti-reboots runs them alone,
	// round after round (rebootRounds).
	for round := 1; round <= rebootRounds(t); round++ {
		suffix := ""
		if round > 1 {
			suffix = fmt.Sprintf(" round %d", round)
		}
		for _, s := range []struct{ name, to, stage, minor string }{
			{"reboot up after the PONR", "3.1", "start", "3.1"},
			{"reboot down before the PONR", "3.0", "backup", "3.0"},
			{"reboot up before the PONR", "3.1", "stop-nodes", "3.1"},
			{"reboot down after the PONR", "3.0", "switch", "3.0"},
		} {
			t.Run(s.name+suffix, func(t *testing.T) {
				if c.version(t) == s.minor {
					t.Fatalf("the cluster is at %s already: the scenario before failed", s.minor)
				}
				c.lastDone(t)
				rebootDuring(t, c, s.to, s.stage)
				c.checkAt(t, s.minor)
			})
		}
		t.Run("node cut off after the PONR"+suffix, func(t *testing.T) {
			if c.version(t) != "3.0" {
				t.Fatalf("the cluster is at %s, want 3.0: a scenario before failed", c.version(t))
			}
			c.lastDone(t)
			cutAfterPONR(t, c, "3.1", "node3")
			c.checkAt(t, "3.1")
		})
		// The master restarted once more while its boot starts the daemons of the version
		// its links named (3.1: the downgrade is held before its switch, past its point of
		// no return): the second boot's resume must still end with every daemon on 3.0.
		t.Run("reboot twice while the old daemons start"+suffix, func(t *testing.T) {
			if c.version(t) != "3.1" {
				t.Fatalf("the cluster is at %s, want 3.1: a scenario before failed", c.version(t))
			}
			c.lastDone(t)
			rebootTwice(t, c, "3.0", "switch")
			c.checkAt(t, "3.0")
		})
	}
}

// roundsEnv sets how many rounds of the four reboot scenarios TestGaneti runs (1 unless set).
const roundsEnv = "CUTOVER_GANETI_ROUNDS"

// rebootRounds is the number of rounds roundsEnv asks for.
func rebootRounds(t testing.TB) int {
	v := os.Getenv(roundsEnv)
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a number of rounds, 1 or more", roundsEnv, v)
	}
	return n
}

// lastDone stops a scenario whose start the one before left unfinished: a run still pending
// refuses the next upgrade, which would then never reach its hold.
func (c *cluster) lastDone(t testing.TB) {
	t.Helper()
	if last := c.lastRun(t); last != "no runs yet" && !strings.Contains(last, " done ") {
		t.Fatalf("the last run is not done: %q: a scenario before failed", last)
	}
}

// version is the minor the master's links point at.
func (c *cluster) version(t testing.TB) string {
	t.Helper()
	out := strings.TrimSpace(c.must(t, master, "readlink /etc/ganeti/lib"))
	return out[strings.LastIndex(out, "/")+1:]
}

// jobsDuringDrain upgrades with one job running and one waiting for its lock as the drain
// starts (cutover is held there until both are submitted): cutover waits for both before it
// stops a daemon, and both end in success. Then it downgrades back, 3.1's cfgupgrade migrating
// the config down before the switch.
func jobsDuringDrain(t testing.TB, c *cluster) {
	c.checkAt(t, "3.0")
	c.must(t, master, "rm -rf /tmp/hold /tmp/upgrade.rc && mkdir -p /tmp/hold/hold && touch /tmp/hold/hold/drain")
	c.must(t, master, "(CUTOVER_HOLD_DIR=/tmp/hold /usr/sbin/cutover upgrade --to=3.1 --yes >/tmp/upgrade.log 2>&1; echo $? >/tmp/upgrade.rc) </dev/null >/dev/null 2>&1 &")
	c.waitHeld(t, "drain")
	// Two delays on the same node: the second waits for the first's node lock. The first
	// lasts a minute, so that both are still in the queue when the drain first counts it
	// however slowly the machine gets there: on a loaded one, releasing the hold and the
	// drain's first Ganeti commands have taken half of that.
	c.must(t, master, "/usr/sbin/gnt-debug delay --submit -n node2."+domain+" 60 && /usr/sbin/gnt-debug delay --submit -n node2."+domain+" 5")
	c.waitFor(t, "/usr/sbin/gnt-job list --no-headers -o status | grep -q running", time.Minute)
	start := time.Now()
	c.must(t, master, "rm /tmp/hold/hold/drain")
	c.waitFor(t, "test -s /tmp/upgrade.rc", 15*time.Minute)
	out := c.must(t, master, "cat /tmp/upgrade.log")
	if rc := strings.TrimSpace(c.must(t, master, "cat /tmp/upgrade.rc")); rc != "0" {
		t.Fatalf("cutover upgrade --to=3.1: exit %s\n%s", rc, out)
	}
	t.Logf("cutover upgrade --to=3.1 with 2 jobs: exit 0 in %s after the drain started", time.Since(start).Round(time.Second))
	// The two delay jobs at least; the cluster's own jobs (the verify of the health gate)
	// may still be in the queue too.
	n := 0
	if m := regexp.MustCompile(`waited for (\d+) jobs`).FindStringSubmatch(out); m != nil {
		n, _ = strconv.Atoi(m[1])
	}
	if n < 2 {
		t.Errorf("drain: want 'waited for N jobs' with N at least 2 in\n%s", out)
	}
	// The two delay jobs must succeed: the drain waited for them. The cluster's own jobs
	// are not the test's: the watcher's verify-disks, submitted by cron just before the
	// drain, ends in error when the drained queue refuses the jobs it submits in turn.
	jobs := c.must(t, master, "/usr/sbin/gnt-job list --no-headers -o id,status,summary")
	delays := 0
	for _, line := range strings.Split(strings.TrimSpace(jobs), "\n") {
		if !strings.Contains(line, "TEST_DELAY") {
			continue
		}
		delays++
		if !strings.Contains(line, "success") {
			t.Errorf("job %s did not succeed: daemons stopped under it?", line)
		}
	}
	if delays < 2 {
		t.Errorf("%d delay jobs in the queue, want 2:\n%s", delays, jobs)
	}
	c.checkAt(t, "3.1")
	c.logRestart(t)
	c.upgrade(t, "3.0")
	c.checkAt(t, "3.0")
	c.logRestart(t)
}

// logRestart logs whether the last run restarted the daemons after redist-conf, and why:
// the files it changed that the daemons read (restart_watch).
func (c *cluster) logRestart(t testing.TB) {
	t.Helper()
	out := c.run(t, master, `grep -h -e 'redist-conf done' -e 'restart done' -e 'restart skipped' -e 'changed what the daemons read' "$(ls -t /var/lib/cutover/log/run-*.log | head -1)"`).stdout
	t.Logf("redist-conf and restart:\n%s", out)
}
