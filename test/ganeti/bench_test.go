package ganeti

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// timing is one run in the side-by-side comparison.
type timing struct {
	total, down time.Duration
	code        int
}

// pollDaemons is a loop on the master that prints, every 0.2 s, whether its daemons all run.
const pollDaemons = `setsid sh -c 'echo $$ >/tmp/poll.pid; while :; do ` +
	`if pgrep -x ganeti-luxid >/dev/null && pgrep -x ganeti-wconfd >/dev/null && pgrep -x ganeti-confd >/dev/null && pgrep -f /usr/sbin/ganeti-noded >/dev/null; ` +
	`then s=up; else s=down; fi; echo "$(date +%s.%N) $s"; sleep 0.2; done' >/tmp/poll.log 2>&1 </dev/null &`

// timed runs command on the master with the daemons polled: its duration, its exit code and the
// master's downtime, from the first moment a daemon was missing to the last moment all ran again.
func (c *cluster) timed(t testing.TB, command string) (timing, string) {
	t.Helper()
	c.must(t, master, pollDaemons)
	start := time.Now()
	res := c.run(t, master, command)
	total := time.Since(start)
	c.must(t, master, "sleep 0.5; kill $(cat /tmp/poll.pid)")
	var first, back float64
	for _, line := range strings.Split(c.must(t, master, "cat /tmp/poll.log"), "\n") {
		ts, state, ok := strings.Cut(line, " ")
		at, err := strconv.ParseFloat(ts, 64)
		if !ok || err != nil {
			continue
		}
		if state == "down" {
			if first == 0 {
				first = at
			}
			back = 0
		} else if first != 0 && back == 0 {
			back = at
		}
	}
	tm := timing{total: total, code: res.code}
	if first != 0 && back != 0 {
		tm.down = time.Duration((back - first) * float64(time.Second))
	}
	return tm, res.output()
}

// sideBySide upgrades the cluster to 3.1 and back with Ganeti's own gnt-cluster upgrade, then
// with cutover, and reports both tools' total time and the master's daemon downtime.
// Ganeti's own ends in gnt-cluster verify, which exits 1 on the ENODESETUP every container
// reports: its exit code 1 is accepted when that is its only error.
func sideBySide(t testing.TB, c *cluster) map[string]timing {
	if c.version(t) != "3.0" {
		c.restore(t)
	}
	c.checkAt(t, "3.0")
	results := map[string]timing{}
	for _, step := range []struct{ tool, to, command string }{
		{"ganeti up", "3.1", "/usr/sbin/gnt-cluster upgrade --to=3.1"},
		{"ganeti down", "3.0", "/usr/sbin/gnt-cluster upgrade --to=3.0"},
		{"cutover up", "3.1", "/usr/sbin/cutover upgrade --to=3.1 --yes"},
		{"cutover down", "3.0", "/usr/sbin/cutover upgrade --to=3.0 --yes"},
	} {
		tm, out := c.timed(t, step.command)
		ok := tm.code == 0
		if strings.HasPrefix(step.tool, "ganeti") && tm.code == 1 {
			ok = strings.Count(out, "ERROR:") == strings.Count(out, "ERROR: node") && strings.Contains(out, "node setup error")
		}
		if !ok {
			t.Fatalf("%s: exit %d\n%s", step.command, tm.code, out)
		}
		c.checkAt(t, step.to)
		results[step.tool] = tm
		t.Logf("%-12s total %5.1fs  master daemons down %5.1fs  exit %d", step.tool, tm.total.Seconds(), tm.down.Seconds(), tm.code)
	}
	for _, dir := range []string{"up", "down"} {
		g, cu := results["ganeti "+dir], results["cutover "+dir]
		// A margin for the noise of a shared machine; the figures are in the log.
		if cu.down > g.down*5/4+2*time.Second {
			t.Errorf("%s: cutover's downtime %s is longer than gnt-cluster upgrade's %s", dir, cu.down.Round(100*time.Millisecond), g.down.Round(100*time.Millisecond))
		}
	}
	return results
}

// BenchmarkGanetiSideBySide upgrades a real Ganeti cluster to 3.1 and back with Ganeti's own
// gnt-cluster upgrade, then with cutover, and reports each run's total time and the master's
// daemon downtime (make bench); cutover's downtime must not be longer.
func BenchmarkGanetiSideBySide(b *testing.B) {
	c := startCluster(b)
	for b.Loop() {
		for tool, tm := range sideBySide(b, c) {
			name := strings.ReplaceAll(tool, " ", "-")
			b.ReportMetric(tm.total.Seconds(), "s-"+name)
			b.ReportMetric(tm.down.Seconds(), "s-down-"+name)
		}
	}
}
