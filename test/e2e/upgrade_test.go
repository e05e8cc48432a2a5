package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/test/cluster"
)

// TestUpgradeAndDowngrade runs the main job: 1.0.0 -> 1.1.0 -> 1.2.0 (each with jobs in the
// queue), then the downgrade 1.2.0 -> 1.1.0, checking every node after each run.
func TestUpgradeAndDowngrade(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{})
	all := online(c)
	checkAt(t, c, "1.0.0", all...)

	steps := []struct{ from, to string }{{"1.0.0", "1.1.0"}, {"1.1.0", "1.2.0"}, {"1.2.0", "1.1.0"}}
	for _, s := range steps {
		jobs := submitJobs(t, c, 3, 2)
		res := cutover(t, c, "upgrade", "--to="+s.to, "--yes")
		if res.ExitCode != 0 {
			t.Fatalf("%s -> %s: exit %d", s.from, s.to, res.ExitCode)
		}
		if !strings.Contains(res.Stdout, "done: demoapp "+s.to+" on 4 nodes") {
			t.Errorf("%s -> %s: no done line", s.from, s.to)
		}
		checkAt(t, c, s.to, all...)
		checkQueue(t, c, jobs)
		checkBackup(t, c, s.from, s.to)
		checkRunComplete(t, c, s.from, s.to)
		if log := must(t, c, c.Master, "cat /var/lib/demoapp/post-upgrade.log"); !strings.Contains(log, "from "+s.from+" to "+s.to) {
			t.Errorf("post-upgrade did not run with --from %s:\n%s", s.from, log)
		}
	}
	// A downgrade can only go to the previous minor: 1.1 -> 1.0 is allowed, but not now to 1.2's
	// predecessor's predecessor; a second run to the live version does nothing.
	if res := cutover(t, c, "upgrade", "--to=1.1.0", "--yes"); res.ExitCode != 0 || !strings.Contains(res.Stdout, "nothing to do") {
		t.Errorf("upgrade to the live version: exit %d, want 0 and nothing to do", res.ExitCode)
	}
}

// TestUpgradeRefusedWhenTargetMissing proves that a target missing on one node is refused
// before anything changes on any node, the journal included.
func TestUpgradeRefusedWhenTargetMissing(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{Missing: map[string][]string{"node3": {"1.2.0"}}})
	submitJobs(t, c, 1, 1)
	before := snapshot(t, c)
	res := cutover(t, c, "upgrade", "--to=1.2.0", "--yes")
	if res.ExitCode != 1 {
		t.Errorf("exit %d, want 1", res.ExitCode)
	}
	if out := res.Stdout + res.Stderr; !strings.Contains(out, "node3") || !strings.Contains(out, "nothing was changed") {
		t.Errorf("output does not name node3 or say nothing changed:\n%s", out)
	}
	if after := snapshot(t, c); after != before {
		t.Errorf("a refused run changed the cluster:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// A refusal before anything was written leaves no run in the journal.
	if sh(t, c, c.Master, "test -e /var/lib/cutover/journal.db").ExitCode == 0 {
		if rs := runs(t, c); len(rs) != 0 {
			t.Errorf("journal = %+v, want no run", rs)
		}
	}
}

// TestUpgradeSkipsOfflineNode marks node4 offline: the run skips it, says so, and records it.
func TestUpgradeSkipsOfflineNode(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{})
	must(t, c, c.Master, `sed -i '/^name = "node4"$/a offline = true' /etc/cutover/cutover.toml`)
	// The application knows it too: its verify skips the node.
	data, err := c.ReadFile(context.Background(), c.Master, "/var/lib/demoapp/config.json")
	if err != nil {
		t.Fatal(err)
	}
	var conf map[string]any
	if err := json.Unmarshal(data, &conf); err != nil {
		t.Fatal(err)
	}
	conf["nodes"].(map[string]any)["node4"].(map[string]any)["offline"] = true
	out, _ := json.MarshalIndent(conf, "", "  ")
	must(t, c, c.Master, fmt.Sprintf("cat > /var/lib/demoapp/config.json <<'EOF'\n%s\nEOF", out))

	res := cutover(t, c, "upgrade", "--to=1.1.0", "--yes")
	if res.ExitCode != 0 {
		t.Fatalf("exit %d, want 0", res.ExitCode)
	}
	if !strings.Contains(res.Stdout, "node4") || !strings.Contains(res.Stdout, "on 3 of 4 nodes") {
		t.Errorf("output does not report node4 offline:\n%s", res.Stdout)
	}
	checkAt(t, c, "1.1.0", "node1", "node2", "node3")
	if st := stateOf(t, c, "node4"); st.Lib != "/usr/lib/demoapp/1.0.0" || st.Daemon != "running 1.0.0" {
		t.Errorf("offline node4 was touched: %+v", st)
	}
	r := checkRunComplete(t, c, "1.0.0", "1.1.0")
	if len(r.Offline) != 1 || r.Offline[0] != "node4" {
		t.Errorf("journal offline = %v, want [node4]", r.Offline)
	}
}

// TestUpgradeRollsBackWhenDaemonWontStop makes node3's daemon refuse to stop: the run undoes
// what it did and leaves the cluster exactly as before, exit 1.
func TestUpgradeRollsBackWhenDaemonWontStop(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{})
	must(t, c, "node3", "mkdir -p /run/demoapp/fail && touch /run/demoapp/fail/daemon-stop")
	before := snapshot(t, c)
	res := cutover(t, c, "upgrade", "--to=1.1.0", "--yes")
	if res.ExitCode != 1 {
		t.Errorf("exit %d, want 1", res.ExitCode)
	}
	if !strings.Contains(res.Stdout, "node3") || !strings.Contains(res.Stdout, "daemon-stop failed on demand") {
		t.Errorf("output does not show node3's failure and stderr:\n%s", res.Stdout)
	}
	if after := snapshot(t, c); after != before {
		t.Errorf("a rolled-back run changed the cluster:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	rs := runs(t, c)
	if r := rs[len(rs)-1]; r.Outcome != "rolled-back" {
		t.Errorf("journal outcome %s, want rolled-back", r.Outcome)
	} else if st, _ := r.StageState("stop-nodes"); st != "undone" {
		t.Errorf("stop-nodes is %s, want undone", st)
	}
}

// TestUpgradeNodeCutAfterPONR cuts node3 off the network after the point of no return: the run
// pushes through on the other nodes, exits 3 and names node3.
func TestUpgradeNodeCutAfterPONR(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{})
	// Hold the master's ensure-dirs (the stage after the config upgrade) until node3 is cut.
	must(t, c, c.Master, "mkdir -p /run/demoapp/hold && touch /run/demoapp/hold/ensure-dirs && rm -f /run/demoapp/reached/ensure-dirs")
	done := make(chan cluster.Result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		res, err := c.Cutover(ctx, "upgrade", "--to=1.1.0", "--yes")
		if err != nil {
			res.ExitCode, res.Stderr = -1, err.Error()
		}
		done <- res
	}()
	deadline := time.Now().Add(2 * time.Minute)
	var poll cluster.Poll
	for sh(t, c, c.Master, "test -e /run/demoapp/reached/ensure-dirs").ExitCode != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the run never reached ensure-dirs")
		}
		poll.Wait()
	}
	ctx := context.Background()
	if err := c.Cut(ctx, "node3"); err != nil {
		t.Fatal(err)
	}
	must(t, c, c.Master, "rm /run/demoapp/hold/ensure-dirs")
	res := <-done
	t.Logf("cutover: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	if res.ExitCode != 3 {
		t.Errorf("exit %d, want 3", res.ExitCode)
	}
	if !strings.Contains(res.Stderr, "--resume") || !strings.Contains(res.Stdout, "node3") {
		t.Errorf("output does not name node3 and the way forward")
	}
	checkAt(t, c, "1.1.0", "node1", "node2", "node4")
	if code := sh(t, c, c.Master, "test -e /var/lib/cutover/intent.json").ExitCode; code != 0 {
		t.Errorf("the intent is gone after a run that failed past the PONR")
	}
	if err := c.Heal(ctx, "node3"); err != nil {
		t.Fatal(err)
	}
}
