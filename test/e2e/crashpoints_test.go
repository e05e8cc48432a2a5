package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/test/cluster"
	"github.com/cutover/cutover/upgrade"
)

// crashLog is where the sample's cutover runs log their crash points on the master.
const crashLog = "/run/cutover-crash.log"

// crashSample is one crash point the sample kills the real cutover at, chosen by what it does
// (cmd/cutover's TestCrashPoints kills at every point, on a one-node cluster).
type crashSample struct {
	name string
	// match says whether a crash point's description ("node1: command started: ...") is the
	// one to kill at; the first that matches in a clean run's crash log, or with last the last.
	match func(desc string) bool
	last  bool
	// reboot recovers by a hard reboot of the master (the @reboot resume) instead of
	// `cutover upgrade --resume` by hand.
	reboot bool
	// hold, when set, holds that demoapp command on every node but the master while the run
	// is killed, so that it is certainly in flight on a remote node.
	hold string
}

// pick returns the number of the sample's point in a crash log ("N description" lines), or 0.
func (s crashSample) pick(points []string) int {
	found := 0
	for _, l := range points {
		num, desc, _ := strings.Cut(l, " ")
		if s.match(desc) {
			found, _ = strconv.Atoi(num)
			if !s.last {
				break
			}
		}
	}
	return found
}

// started matches a command of demoapp ending in verb that started, on any node but the
// master when remote is set.
func started(verb string, remote bool, master string) func(string) bool {
	return func(desc string) bool {
		node, rest, _ := strings.Cut(desc, ": ")
		return strings.HasPrefix(rest, "command started: ") && strings.HasSuffix(rest, "sbin/demoapp "+verb) && (!remote || node != master)
	}
}

// TestCrashPointSample kills the real cutover with SIGKILL (CUTOVER_CRASH_AT) at six crash points
// spread over a run on the 4-node container cluster — before the intent, during the drain, with a
// stop in flight on a remote node, between the master's two link switches, right after the point
// of no return, during the start — recovers by `cutover upgrade --resume` or by rebooting the
// master, and checks the crash model's invariant on every node: exactly at the source or at the
// target (links, config bytes, daemons), the queue and watcher as before, no intent, a journal
// that agrees, an exit code that tells the truth, and no command of the dead run still running.
// The runs alternate between 1.0.0 and 1.1.0, each from where the last one ended. Last, a sync
// of a node left behind is killed between that node's two link switches and run again.
func TestCrashPointSample(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{})
	all := online(c)
	versions := [2]string{"1.0.0", "1.1.0"}

	// Clean runs up and down: their crash logs and each version's config on every node.
	configs := map[string]map[string]string{}
	record := func(v string) {
		configs[v] = map[string]string{}
		for _, n := range all {
			configs[v][n] = stateOf(t, c, n).Config
		}
	}
	record("1.0.0")
	logs := map[string][]string{}
	for _, to := range []string{"1.1.0", "1.0.0"} {
		res := sh(t, c, c.Master, fmt.Sprintf("rm -f %[1]s; %[2]s=%[1]s /usr/sbin/cutover upgrade --to=%[3]s --yes", crashLog, upgrade.CrashLogEnv, to))
		if res.ExitCode != 0 {
			t.Fatalf("clean run to %s: exit %d\n%s%s", to, res.ExitCode, res.Stdout, res.Stderr)
		}
		checkAt(t, c, to, all...)
		logs[to] = strings.Split(strings.TrimSpace(must(t, c, c.Master, "cat "+crashLog)), "\n")
		if to == "1.1.0" {
			record("1.1.0")
		}
	}
	for _, n := range all {
		if got := stateOf(t, c, n).Config; got != configs["1.0.0"][n] {
			t.Errorf("%s: config after a clean upgrade and downgrade is not the original: %s, want %s", n, got, configs["1.0.0"][n])
		}
	}
	t.Logf("crash points: %d in an upgrade, %d in a downgrade", len(logs["1.1.0"]), len(logs["1.0.0"]))

	// The kill before the intent comes last: it leaves its run open in the journal until the
	// next run closes it, which would shift the next run's crash points by one.
	samples := []crashSample{
		{name: "during the drain", match: started("queue drain", false, c.Master)},
		{name: "stop in flight on a node", hold: "daemon-stop", reboot: true, match: started("daemon stop", true, c.Master)},
		{name: "between the master's two link switches", last: true, match: func(d string) bool {
			return strings.HasPrefix(d, c.Master+": rename ") && strings.HasSuffix(d, " to /etc/demoapp/lib")
		}},
		{name: "right after the point of no return", reboot: true, match: func(d string) bool {
			return strings.Contains(d, ": write /var/lib/demoapp/config.json")
		}},
		{name: "during the start", match: started("daemon start", false, c.Master)},
		{name: "before the intent", match: func(string) bool { return true }}, // the first point
	}
	passed := 0
	for _, s := range samples {
		from := liveOf(t, c)
		to := versions[0]
		if from == versions[0] {
			to = versions[1]
		}
		n := s.pick(logs[to])
		if n == 0 {
			t.Errorf("%s: no such crash point in a clean run to %s:\n%s", s.name, to, strings.Join(logs[to], "\n"))
			continue
		}
		ok := t.Run(s.name, func(t *testing.T) {
			crashAtSample(t, c, s, n, from, to, configs)
		})
		if ok {
			passed++
		}
		if t.Failed() && !settled(t, c, all) {
			t.Fatalf("the cluster is at neither version after %q: the remaining samples cannot run", s.name)
		}
	}
	if t.Run("sync killed between a node's link switches", func(t *testing.T) { crashSyncSample(t, c) }) {
		passed++
	}
	t.Logf("%d of %d crash points passed", passed, len(samples)+1)
}

// crashSyncSample leaves node4 behind (offline during an upgrade), kills `cutover sync node4`
// between node4's two link switches, and checks that running the sync again brings node4 to
// the live version, links, config and daemon, and touches no other node. The point is found in
// the crash log of a clean sync of node4 after an upgrade the other way.
func crashSyncSample(t *testing.T, c *cluster.Cluster) {
	const node = "node4"
	must(t, c, c.Master, `sed -i '/^name = "node4"$/a offline = true' /etc/cutover/cutover.toml`)
	defer must(t, c, c.Master, `sed -i '/^offline = true$/d' /etc/cutover/cutover.toml`)
	behind := func(to string) {
		t.Helper()
		setAppOffline(t, c, node, true)
		if res := cutover(t, c, "upgrade", "--to="+to, "--yes"); res.ExitCode != 0 {
			t.Fatalf("upgrade to %s with %s offline: exit %d", to, node, res.ExitCode)
		}
		setAppOffline(t, c, node, false)
	}
	start := liveOf(t, c)
	other := "1.1.0"
	if start == other {
		other = "1.0.0"
	}

	behind(other)
	clean := sh(t, c, c.Master, fmt.Sprintf("rm -f %[1]s; %[2]s=%[1]s /usr/sbin/cutover sync --yes %[3]s", crashLog, upgrade.CrashLogEnv, node))
	if clean.ExitCode != 0 {
		t.Fatalf("clean sync of %s: exit %d\n%s%s", node, clean.ExitCode, clean.Stdout, clean.Stderr)
	}
	points := strings.Split(strings.TrimSpace(must(t, c, c.Master, "cat "+crashLog)), "\n")
	s := crashSample{match: func(d string) bool {
		return strings.HasPrefix(d, node+": rename ") && strings.HasSuffix(d, " to /etc/demoapp/lib")
	}}
	n := s.pick(points)
	if n == 0 {
		t.Fatalf("no crash point of a clean sync renames %s's lib link:\n%s", node, strings.Join(points, "\n"))
	}

	behind(start)
	before := map[string]nodeState{}
	for _, other := range online(c, node) {
		before[other] = stateOf(t, c, other)
	}
	nruns := len(runs(t, c))
	killed := sh(t, c, c.Master, fmt.Sprintf("rm -f %[1]s; %[2]s=%[1]s %[3]s=%[4]d /usr/sbin/cutover sync --yes %[5]s",
		crashLog, upgrade.CrashLogEnv, upgrade.CrashAtEnv, n, node))
	t.Logf("sync %s killed at point %d of %d: %s", node, n, len(points), lastLine(sh(t, c, c.Master, "cat "+crashLog).Stdout))
	if killed.ExitCode != 137 {
		t.Errorf("the sync was to die at point %d by SIGKILL: exit %d\n%s%s", n, killed.ExitCode, killed.Stdout, killed.Stderr)
	}
	t.Logf("%s after the kill: %+v", node, stateOf(t, c, node))
	if res := cutover(t, c, "upgrade", "--resume"); res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != "" {
		t.Errorf("--resume after a killed sync: exit %d %q, want a silent 0", res.ExitCode, res.Stdout)
	}
	if res := cutover(t, c, "sync", "--yes", node); res.ExitCode != 0 {
		t.Errorf("sync %s again: exit %d, want 0", node, res.ExitCode)
	}
	checkAt(t, c, start, node)
	master := stateOf(t, c, c.Master)
	if st := stateOf(t, c, node); st.Config != master.Config {
		t.Errorf("%s: config %s, want the master's %s", node, st.Config, master.Config)
	}
	for other, want := range before {
		if got := stateOf(t, c, other); got != want {
			t.Errorf("the sync of %s changed %s: %+v, was %+v", node, other, got, want)
		}
	}
	rs := runs(t, c)
	for _, r := range rs[nruns:] {
		if r.Outcome == journal.Running {
			t.Errorf("run %d (%s) is still running in the journal", r.ID, r.Kind)
		}
	}
	if r := rs[len(rs)-1]; r.Kind != "sync" || r.Outcome != journal.Succeeded {
		t.Errorf("last run %d: %s %s, want a sync done", r.ID, r.Kind, r.Outcome)
	}
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// liveOf returns the version both of the master's links point at, or says where each points.
func liveOf(t *testing.T, c *cluster.Cluster) string {
	t.Helper()
	st := stateOf(t, c, c.Master)
	lib, share := strings.TrimPrefix(st.Lib, "/usr/lib/demoapp/"), strings.TrimPrefix(st.Share, "/usr/share/demoapp/")
	if lib != share {
		return fmt.Sprintf("lib %s, share %s", lib, share)
	}
	return lib
}

// settled brings a cluster a failed sample left behind to one version if it can: resume, then
// abort. It reports whether every node is at one version with no run pending.
func settled(t *testing.T, c *cluster.Cluster, all []string) bool {
	t.Helper()
	for _, args := range [][]string{{"upgrade", "--resume"}, {"upgrade", "--abort"}} {
		if sh(t, c, c.Master, "test -e /var/lib/cutover/intent.json").ExitCode == 0 {
			cutover(t, c, args...)
		}
	}
	live := liveOf(t, c)
	for _, n := range all {
		st := stateOf(t, c, n)
		if st.Lib != "/usr/lib/demoapp/"+live || st.Share != "/usr/share/demoapp/"+live || st.Daemon != "running "+live {
			return false
		}
	}
	return sh(t, c, c.Master, "test -e /var/lib/cutover/intent.json").ExitCode != 0
}

// crashAtSample kills a run from -> to at crash point n, recovers and checks the invariant.
func crashAtSample(t *testing.T, c *cluster.Cluster, s crashSample, n int, from, to string, configs map[string]map[string]string) {
	all := online(c)
	jobs := submitJobs(t, c, 1, 1)
	before := snapshot(t, c)
	nruns := len(runs(t, c))
	for _, node := range all[1:] {
		if s.hold != "" {
			must(t, c, node, "mkdir -p /run/demoapp/hold && touch /run/demoapp/hold/"+s.hold)
		}
	}
	killed := sh(t, c, c.Master, fmt.Sprintf("rm -f %[1]s; %[2]s=%[1]s %[3]s=%[4]d /usr/sbin/cutover upgrade --to=%[5]s --yes",
		crashLog, upgrade.CrashLogEnv, upgrade.CrashAtEnv, n, to))
	points := strings.Split(strings.TrimSpace(sh(t, c, c.Master, "cat "+crashLog).Stdout), "\n")
	desc := "?"
	for _, l := range points {
		if num, d, _ := strings.Cut(l, " "); num == strconv.Itoa(n) {
			desc = d
		}
	}
	t.Logf("%s -> %s killed at point %d: %s (last point passed: %s); exit %d", from, to, n, desc, points[len(points)-1], killed.ExitCode)
	if !s.match(desc) {
		t.Logf("note: point %d is not where the sample meant to kill: this run's points are numbered unlike the clean run's", n)
	}
	if killed.ExitCode != 137 {
		t.Errorf("the run was to die at point %d by SIGKILL: exit %d\n%s%s", n, killed.ExitCode, killed.Stdout, killed.Stderr)
	}

	// No command of the dead run may still run, here or on a node.
	time.Sleep(200 * time.Millisecond)
	for _, node := range all {
		res := sh(t, c, node, `pgrep -af '[s]bin/demoapp (daemon (start|stop)|queue|watcher|ensure-dirs|post-upgrade|verify)|/usr/sbin/[c]utover' || true`)
		if out := strings.TrimSpace(res.Stdout); out != "" {
			t.Errorf("%s: commands of the killed run still run on %s:\n%s", s.name, node, out)
		}
	}
	for _, node := range all[1:] {
		if s.hold != "" {
			must(t, c, node, "rm -f /run/demoapp/hold/"+s.hold)
		}
	}
	intent := sh(t, c, c.Master, "test -e /var/lib/cutover/intent.json").ExitCode == 0

	// Recover as cron at boot or the operator would.
	var res cluster.Result
	if s.reboot {
		size := strings.TrimSpace(sh(t, c, c.Master, "wc -c < /var/log/cutover-resume.log 2>/dev/null || echo 0").Stdout)
		if err := c.Reboot(context.Background(), c.Master); err != nil {
			t.Fatal(err)
		}
		waitBootResume(t, c, size)
		res = cutover(t, c, "upgrade", "--resume")
		if res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != "" {
			t.Errorf("--resume after the boot's resume: exit %d %q, want a silent 0: the boot's resume should have finished the run", res.ExitCode, res.Stdout)
		}
	} else {
		for range 3 {
			res = cutover(t, c, "upgrade", "--resume")
			if res.ExitCode != 3 {
				break
			}
		}
	}

	// Exactly at one end.
	live := liveOf(t, c)
	atTarget := live == to
	switch live {
	case to:
		checkAt(t, c, to, all...)
		for _, node := range all {
			if got, want := stateOf(t, c, node).Config, configs[to][node]; got != want {
				t.Errorf("%s: config %s, want the bytes of a clean run to %s: %s", node, got, to, want)
			}
		}
	case from:
		if after := snapshot(t, c); after != before {
			t.Errorf("back at %s but not as before the run:\nbefore:\n%s\nafter:\n%s", from, before, after)
		}
	default:
		var b strings.Builder
		for _, node := range all {
			fmt.Fprintf(&b, "\n%s: %+v", node, stateOf(t, c, node))
		}
		t.Errorf("the cluster is at neither %s nor %s: the master's links are at %s%s", from, to, live, b.String())
	}
	checkQueue(t, c, jobs)
	if sh(t, c, c.Master, "test -e /var/lib/cutover/intent.json").ExitCode == 0 {
		t.Errorf("the intent is still there after the recovery")
	}

	// The journal agrees, and the exit code tells the truth.
	rs := runs(t, c)
	preIntent := false
	if len(rs) > nruns {
		st, _ := rs[len(rs)-1].StageState("intent")
		preIntent = !intent && st != journal.Done
	}
	for _, r := range rs {
		if r.Outcome == journal.Running && !(preIntent && r.ID == rs[len(rs)-1].ID) {
			t.Errorf("run %d (%s -> %s) is still running in the journal", r.ID, r.From, r.To)
		}
	}
	if len(rs) > nruns {
		r := rs[len(rs)-1]
		switch {
		case atTarget && r.Outcome != journal.Succeeded:
			t.Errorf("run %d at the target: outcome %s, want done", r.ID, r.Outcome)
		case !atTarget && r.Outcome != journal.RolledBack && !(preIntent && (r.Outcome == journal.Running || r.Outcome == journal.Aborted)):
			t.Errorf("run %d back at the source: outcome %s, want rolled-back", r.ID, r.Outcome)
		}
	}
	if !s.reboot {
		switch {
		case !intent && (res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != ""):
			t.Errorf("--resume with no intent: exit %d %q, want a silent 0", res.ExitCode, res.Stdout)
		case intent && atTarget && res.ExitCode != 0:
			t.Errorf("--resume ended at the target: exit %d, want 0", res.ExitCode)
		case intent && live == from && res.ExitCode != 1:
			t.Errorf("--resume ended back at the source: exit %d, want 1", res.ExitCode)
		}
	}
}

// waitBootResume waits until the @reboot resume wrote to its log (beyond size bytes) and no
// cutover runs any more.
func waitBootResume(t *testing.T, c *cluster.Cluster, size string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var poll cluster.Poll
	for {
		now := strings.TrimSpace(sh(t, c, c.Master, "wc -c < /var/log/cutover-resume.log 2>/dev/null || echo 0").Stdout)
		running := sh(t, c, c.Master, "pgrep -x cutover").ExitCode == 0
		if now != size && !running {
			t.Logf("resume at boot:\n%s", sh(t, c, c.Master, fmt.Sprintf("tail -c +%d /var/log/cutover-resume.log", mustAtoi(size)+1)).Stdout)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the @reboot resume did not finish:\n%s", sh(t, c, c.Master, "cat /var/log/cutover-resume.log").Stdout)
		}
		poll.Wait()
	}
}

func mustAtoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
