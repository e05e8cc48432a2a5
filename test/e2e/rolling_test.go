package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/test/cluster"
	demo "github.com/cutover/cutover/test/demoapp"
	"github.com/cutover/cutover/upgrade"
)

// useRolling rewrites the master's cutover.toml for a rolling run with strategy r.
func useRolling(t *testing.T, c *cluster.Cluster, r demo.Rolling) {
	t.Helper()
	must(t, c, c.Master, "test -e /etc/cutover/cutover.toml.all-at-once || cp -p /etc/cutover/cutover.toml /etc/cutover/cutover.toml.all-at-once")
	orig := must(t, c, c.Master, "cat /etc/cutover/cutover.toml.all-at-once")
	text := base64.StdEncoding.EncodeToString(demo.RollingConfig([]byte(orig+"\n"), r))
	must(t, c, c.Master, fmt.Sprintf("umask 077; echo %s | base64 -d > /etc/cutover/cutover.toml.new && mv /etc/cutover/cutover.toml.new /etc/cutover/cutover.toml", text))
}

// useAllAtOnce puts the master's original cutover.toml back, if useRolling replaced it.
func useAllAtOnce(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	must(t, c, c.Master, "! test -e /etc/cutover/cutover.toml.all-at-once || cp -p /etc/cutover/cutover.toml.all-at-once /etc/cutover/cutover.toml")
}

// loadClient is the demo application's load client running on the master.
type loadClient struct{ c *cluster.Cluster }

func startLoad(t *testing.T, c *cluster.Cluster) loadClient {
	t.Helper()
	// The client runs from a copy outside the version trees, as a client of the cluster
	// would: cutover ends every process of a version tree other than the live one when it
	// starts a node's daemons, and the master's turn comes while the client runs.
	must(t, c, c.Master, "cp "+demoapp+" /usr/local/bin/demoapp-load && rm -f /run/demoapp/load.stop /tmp/load.out; "+
		"setsid nohup /usr/local/bin/demoapp-load load --seconds 600 > /tmp/load.out 2>&1 < /dev/null &")
	// Let it send a few requests before the run starts.
	time.Sleep(time.Second)
	return loadClient{c}
}

// stop ends the client and returns what it served and failed, and its failure lines.
func (l loadClient) stop(t *testing.T) (served, failed int, failures []string) {
	t.Helper()
	must(t, l.c, l.c.Master, "touch /run/demoapp/load.stop")
	total := regexp.MustCompile(`total served (\d+) failed (\d+)`)
	deadline := time.Now().Add(30 * time.Second)
	var poll cluster.Poll
	for {
		out := sh(t, l.c, l.c.Master, "cat /tmp/load.out").Stdout
		if m := total.FindStringSubmatch(out); m != nil {
			served, _ = strconv.Atoi(m[1])
			failed, _ = strconv.Atoi(m[2])
			for _, line := range strings.Split(out, "\n") {
				if strings.HasPrefix(line, "failed ") {
					failures = append(failures, line)
				}
			}
			t.Logf("load client:\n%s", out[strings.Index(out, "node "):])
			return served, failed, failures
		}
		if time.Now().After(deadline) {
			t.Fatalf("the load client did not end:\n%s", out)
		}
		poll.Wait()
	}
}

// checkRollingComplete asserts that the last run went from -> to in batches batches, each
// done, ended done and left no intent.
func checkRollingComplete(t *testing.T, c *cluster.Cluster, from, to string, batches int) {
	t.Helper()
	rs := runs(t, c)
	r := rs[len(rs)-1]
	if r.From != from || r.To != to || r.Outcome != journal.Succeeded || r.Ended.IsZero() {
		t.Errorf("last run %d: %s -> %s %s, want %s -> %s done", r.ID, r.From, r.To, r.Outcome, from, to)
	}
	// A resumed run skips the batches an earlier execution completed.
	done := map[string]bool{}
	for _, e := range r.Events {
		if e.State == journal.Done {
			done[e.Stage] = true
		}
	}
	for i := 1; i <= batches; i++ {
		name := fmt.Sprintf("batch-%d", i)
		if st, ok := r.StageState(name); !ok || !done[name] || st != journal.Done && st != journal.Skipped {
			t.Errorf("run %d: %s is %q, want done", r.ID, name, st)
		}
	}
	if _, ok := r.StageState(fmt.Sprintf("batch-%d", batches+1)); ok {
		t.Errorf("run %d has more than %d batches", r.ID, batches)
	}
	if code := sh(t, c, c.Master, "test -e /var/lib/cutover/intent.json").ExitCode; code == 0 {
		t.Errorf("intent left after a finished run")
	}
}

// batchTimes reads the duration of every batch from a run's JSON events.
func batchTimes(t *testing.T, stdout string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var e struct {
			Type, Stage, State string
			Duration           time.Duration `json:"duration_ns"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Type == "stage" && strings.HasPrefix(e.Stage, "batch-") && e.State == "ok" {
			out = append(out, fmt.Sprintf("%s %.1fs", e.Stage, e.Duration.Seconds()))
		}
	}
	return out
}

// TestRollingUnderLoad switches a 4-node cluster from 1.1.0 to 1.2.0 and back batch by batch
// (canary node2 alone, then node3 and node4, then the master) while a client keeps sending
// requests to every node that is not drained: no request fails. The same upgrade all at once
// is measured for comparison.
func TestRollingUnderLoad(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{Live: "1.1.0"})
	all := online(c)
	useRolling(t, c, demo.Rolling{BatchSize: 2, Canaries: []string{"node2"}, BatchTimeout: "2m"})

	plan := cutover(t, c, "plan", "--to=1.2.0")
	for _, want := range []string{"batch-1", "canary", "node2", "batch-2", "node3, node4", "batch-3"} {
		if !strings.Contains(plan.Stdout, want) {
			t.Errorf("plan does not show %q", want)
		}
	}
	for _, s := range []struct{ from, to string }{{"1.1.0", "1.2.0"}, {"1.2.0", "1.1.0"}} {
		load := startLoad(t, c)
		start := time.Now()
		res := cutover(t, c, "--output", "json", "upgrade", "--to="+s.to, "--yes")
		took := time.Since(start)
		served, failed, failures := load.stop(t)
		if res.ExitCode != 0 {
			t.Fatalf("rolling %s -> %s: exit %d", s.from, s.to, res.ExitCode)
		}
		checkAt(t, c, s.to, all...)
		checkRollingComplete(t, c, s.from, s.to, 3)
		if failed > 0 || served == 0 {
			t.Errorf("rolling %s -> %s under load: %d requests served, %d failed, want none failed:\n%s", s.from, s.to, served, failed, strings.Join(failures, "\n"))
		}
		t.Logf("FIGURES rolling %s -> %s: %.1fs, batches %v; requests served %d, failed %d", s.from, s.to, took.Seconds(), batchTimes(t, res.Stdout), served, failed)
	}

	useAllAtOnce(t, c)
	load := startLoad(t, c)
	start := time.Now()
	res := cutover(t, c, "upgrade", "--to=1.2.0", "--yes")
	took := time.Since(start)
	served, failed, _ := load.stop(t)
	if res.ExitCode != 0 {
		t.Fatalf("all-at-once 1.1.0 -> 1.2.0: exit %d", res.ExitCode)
	}
	checkAt(t, c, "1.2.0", all...)
	t.Logf("FIGURES all-at-once 1.1.0 -> 1.2.0: %.1fs; requests served %d, failed %d", took.Seconds(), served, failed)
}

// TestRollingFailures: a failing canary is the only node touched and is switched back (exit
// 1); a batch over its timeout switches every batch back (exit 1); with max_failed = 1 one bad
// node does not stop the run, which ends done with the node left behind at the source (exit 3
// naming it), and sync catches the node up; a master
// rebooted between two batches is resumed by cron from the batch it was in.
func TestRollingFailures(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{Live: "1.1.0"})
	all := online(c)
	ctx := context.Background()
	fail := func(what string) { must(t, c, c.Master, "mkdir -p /run/demoapp/fail && touch /run/demoapp/fail/"+what) }
	clear := func() { must(t, c, c.Master, "rm -rf /run/demoapp/fail /run/demoapp/hold") }

	// A failing canary.
	useRolling(t, c, demo.Rolling{BatchSize: 1, Canaries: []string{"node2"}, MaxFailed: 3, BatchTimeout: "20s"})
	before := snapshot(t, c)
	fail("node-verify-node2")
	res := cutover(t, c, "upgrade", "--to=1.2.0", "--yes")
	clear()
	if res.ExitCode != 1 || !strings.Contains(res.Stderr, "canary node2 failed") {
		t.Errorf("failing canary: exit %d, want 1 naming the canary", res.ExitCode)
	}
	if after := snapshot(t, c); after != before {
		t.Errorf("failing canary changed the cluster:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	rs := runs(t, c)
	for _, e := range rs[len(rs)-1].Events {
		if strings.HasPrefix(e.Stage, "batch-") && e.Stage != "batch-1" {
			t.Errorf("failing canary: %s %s, want only the canary's batch touched", e.Stage, e.State)
		}
	}

	// A batch over its timeout: node_verify hangs on batch 2.
	useRolling(t, c, demo.Rolling{BatchSize: 3, MaxFailed: 3, BatchTimeout: "8s"})
	must(t, c, c.Master, "mkdir -p /run/demoapp/hold && touch /run/demoapp/hold/node-verify-node1")
	res = cutover(t, c, "upgrade", "--to=1.2.0", "--yes")
	clear()
	if res.ExitCode != 1 || !strings.Contains(res.Stderr, "did not finish within strategy.batch_timeout 8s") {
		t.Errorf("batch timeout: exit %d, want 1 and the timeout named", res.ExitCode)
	}
	if after := snapshot(t, c); after != before {
		t.Errorf("batch timeout changed the cluster:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// One bad node within the budget.
	useRolling(t, c, demo.Rolling{BatchSize: 1, MaxFailed: 1, BatchTimeout: "20s"})
	fail("node-verify-node3")
	res = cutover(t, c, "upgrade", "--to=1.2.0", "--yes")
	clear()
	if res.ExitCode != 3 || !strings.Contains(res.Stderr, "node3") || !strings.Contains(res.Stderr, "cutover sync node3") {
		t.Errorf("one bad node with max_failed = 1: exit %d, want 3 naming node3 and 'cutover sync node3'", res.ExitCode)
	}
	// The run is done with node3 left behind at the source: nothing is pending, and sync
	// catches node3 up once it is healthy.
	checkAt(t, c, "1.2.0", "node1", "node2", "node4")
	if st := stateOf(t, c, "node3"); st.Lib != "/usr/lib/demoapp/1.1.0" || st.Daemon != "running 1.1.0" {
		t.Errorf("node3 left behind: links %s, daemon %q; want 1.1.0 and running 1.1.0", st.Lib, st.Daemon)
	}
	if rs := runs(t, c); rs[len(rs)-1].Outcome != journal.Succeeded {
		t.Errorf("one bad node within the budget: run %d %s, want done", rs[len(rs)-1].ID, rs[len(rs)-1].Outcome)
	}
	if res := sh(t, c, c.Master, "test -e /var/lib/cutover/intent.json"); res.ExitCode == 0 {
		t.Errorf("one bad node within the budget: the intent is left")
	}
	if res := cutover(t, c, "sync", "--yes", "node3"); res.ExitCode != 0 {
		t.Errorf("sync of the node left behind: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	checkAt(t, c, "1.2.0", all...)

	// A rolling downgrade whose canary fails: the config was migrated down before the canary,
	// and is migrated up again; the cluster is exactly as before, exit 1.
	useRolling(t, c, demo.Rolling{BatchSize: 2, Canaries: []string{"node2"}, MaxFailed: 3, BatchTimeout: "20s"})
	before = snapshot(t, c)
	fail("node-verify-node2")
	res = cutover(t, c, "upgrade", "--to=1.1.0", "--yes")
	clear()
	if res.ExitCode != 1 || !strings.Contains(res.Stderr, "canary node2 failed") {
		t.Errorf("rolling downgrade, failing canary: exit %d, want 1 naming the canary\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if after := snapshot(t, c); after != before {
		t.Errorf("rolling downgrade, failing canary: the cluster changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	checkAt(t, c, "1.2.0", all...)

	// The master rebooted between batches: cron's resume goes on from the batch it was in.
	h := startHeld(t, c, "batch-3", "upgrade", "--to=1.1.0", "--yes")
	// Mixed on purpose while the run is pending: plan refuses, and advises resuming or
	// aborting the run, never syncing the switched nodes back.
	if res := cutover(t, c, "plan", "--to=1.1.0"); res.ExitCode != 1 || strings.Contains(res.Stdout+res.Stderr, "cutover sync") || !strings.Contains(res.Stdout+res.Stderr, "--resume") {
		t.Errorf("plan during a pending rolling run: exit %d, want 1 advising --resume and no sync:\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if err := c.Reboot(ctx, c.Master); err != nil {
		t.Fatal(err)
	}
	h.wait(t)
	deadline := time.Now().Add(3 * time.Minute)
	for sh(t, c, c.Master, "test -e /var/lib/cutover/intent.json").ExitCode == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the @reboot resume did not finish the rolling run:\n%s", sh(t, c, c.Master, "cat /var/log/cutover-resume.log").Stdout)
		}
		time.Sleep(time.Second)
	}
	t.Logf("resume at boot:\n%s", must(t, c, c.Master, "cat /var/log/cutover-resume.log"))
	checkAt(t, c, "1.1.0", all...)
	rs = runs(t, c)
	r := rs[len(rs)-1]
	if r.Outcome != journal.Succeeded || r.To != "1.1.0" {
		t.Errorf("run %d: %s -> %s %s, want done", r.ID, r.From, r.To, r.Outcome)
	}
	starts := map[string]int{}
	for _, e := range r.Events {
		if e.State == journal.Started {
			starts[e.Stage]++
		}
	}
	if starts["batch-1"] != 1 || starts["batch-2"] != 1 || starts["batch-3"] != 2 {
		t.Errorf("batch starts %v: want batches 1 and 2 once and batch 3 again after the reboot", starts)
	}
}

// TestRollingCrashSample kills a rolling run with SIGKILL at two crash points of the real
// cluster (cmd/cutover's TestCrashPoints kills at every point, on one node): an upgrade while a
// daemon stop runs on a node of the second batch, before the point of no return, and a
// downgrade between the two link switches of a node of the last batch but one, past it. Each
// time `cutover upgrade --resume` continues from the batch the run was in and brings every node
// to the target, leaving the batches done before alone.
func TestRollingCrashSample(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{Live: "1.1.0"})
	all := online(c)
	useRolling(t, c, demo.Rolling{BatchSize: 1, BatchTimeout: "1m"}) // node2, node3, node4, node1

	logs := map[string][]string{}
	for _, to := range []string{"1.2.0", "1.1.0"} {
		res := sh(t, c, c.Master, fmt.Sprintf("rm -f %[1]s; %[2]s=%[1]s /usr/sbin/cutover upgrade --to=%[3]s --yes", crashLog, upgrade.CrashLogEnv, to))
		if res.ExitCode != 0 {
			t.Fatalf("clean rolling run to %s: exit %d\n%s%s", to, res.ExitCode, res.Stdout, res.Stderr)
		}
		logs[to] = strings.Split(strings.TrimSpace(must(t, c, c.Master, "cat "+crashLog)), "\n")
	}
	samples := []struct {
		name   string
		to     string
		sample crashSample
		batch  string // the batch the run was in
	}{
		{"upgrade: a stop in flight on node3", "1.2.0", crashSample{match: func(d string) bool {
			return strings.HasPrefix(d, "node3: command started: ") && strings.HasSuffix(d, "sbin/demoapp daemon stop")
		}}, "batch-2"},
		{"downgrade: between node4's link switches", "1.1.0", crashSample{match: func(d string) bool {
			return strings.HasPrefix(d, "node4: rename ") && strings.HasSuffix(d, " to /etc/demoapp/lib")
		}}, "batch-3"},
	}
	for _, s := range samples {
		n := s.sample.pick(logs[s.to])
		if n == 0 {
			t.Fatalf("%s: no such crash point:\n%s", s.name, strings.Join(logs[s.to], "\n"))
		}
		killed := sh(t, c, c.Master, fmt.Sprintf("%s=%d /usr/sbin/cutover upgrade --to=%s --yes", upgrade.CrashAtEnv, n, s.to))
		if killed.ExitCode != 137 {
			t.Fatalf("%s: the run was to die at point %d: exit %d\n%s%s", s.name, n, killed.ExitCode, killed.Stdout, killed.Stderr)
		}
		if res := cutover(t, c, "upgrade", "--resume"); res.ExitCode != 0 {
			t.Errorf("%s: --resume exit %d, want 0", s.name, res.ExitCode)
		}
		checkAt(t, c, s.to, all...)
		rs := runs(t, c)
		r := rs[len(rs)-1]
		if r.Outcome != journal.Succeeded || r.To != s.to {
			t.Errorf("%s: run %d %s -> %s %s, want done", s.name, r.ID, r.From, r.To, r.Outcome)
		}
		starts := map[string]int{}
		for _, e := range r.Events {
			if e.State == journal.Started {
				starts[e.Stage]++
			}
		}
		if starts["batch-1"] != 1 || starts[s.batch] != 2 {
			t.Errorf("%s: batch starts %v, want batch-1 once and %s again on resume", s.name, starts, s.batch)
		}
	}
}
