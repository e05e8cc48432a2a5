package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/test/cluster"
)

// setAppOffline marks node offline (or online again) in the demo application's config on the
// master, as its operator would: the application's verify skips an offline node.
func setAppOffline(t *testing.T, c *cluster.Cluster, node string, offline bool) {
	t.Helper()
	data, err := c.ReadFile(context.Background(), c.Master, "/var/lib/demoapp/config.json")
	if err != nil {
		t.Fatal(err)
	}
	var conf map[string]any
	if err := json.Unmarshal(data, &conf); err != nil {
		t.Fatal(err)
	}
	n, ok := conf["nodes"].(map[string]any)[node].(map[string]any)
	if !ok {
		t.Fatalf("config has no node %s: %s", node, data)
	}
	if offline {
		n["offline"] = true
	} else {
		delete(n, "offline")
	}
	out, _ := json.MarshalIndent(conf, "", "  ")
	must(t, c, c.Master, fmt.Sprintf("cat > /var/lib/demoapp/config.json <<'EOF'\n%s\nEOF", out))
}

// TestSyncBringsOfflineNodeBack: node4 is offline during an upgrade to 1.1.0 and stays at
// 1.0.0; `cutover sync node4` brings it to 1.1.0 (links, config, daemon) and journals a sync
// run. An unknown node, a daemon that will not stop and a pending run are refused, and leave
// the cluster as it was.
func TestSyncBringsOfflineNodeBack(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{})
	must(t, c, c.Master, `sed -i '/^name = "node4"$/a offline = true' /etc/cutover/cutover.toml`)
	setAppOffline(t, c, "node4", true)
	if res := cutover(t, c, "upgrade", "--to=1.1.0", "--yes"); res.ExitCode != 0 {
		t.Fatalf("upgrade with node4 offline: exit %d", res.ExitCode)
	}
	checkAt(t, c, "1.1.0", "node1", "node2", "node3")
	if st := stateOf(t, c, "node4"); st.Lib != "/usr/lib/demoapp/1.0.0" || st.Daemon != "running 1.0.0" {
		t.Fatalf("offline node4 after the upgrade: %+v, want at 1.0.0", st)
	}
	// node4 is back: the application counts it again, so verify checks it from now on.
	setAppOffline(t, c, "node4", false)

	before := snapshot(t, c)
	nruns := len(runs(t, c))
	if res := cutover(t, c, "sync", "--yes", "node9"); res.ExitCode != 2 || !strings.Contains(res.Stderr, `unknown node "node9"`) {
		t.Errorf("sync of an unknown node: exit %d %q, want 2 naming it", res.ExitCode, res.Stderr)
	}
	must(t, c, "node4", "mkdir -p /run/demoapp/fail && touch /run/demoapp/fail/daemon-stop")
	if res := cutover(t, c, "sync", "--yes", "node4"); res.ExitCode != 1 || !strings.Contains(res.Stdout, "daemon-stop failed on demand") {
		t.Errorf("sync with node4's daemon refusing to stop: exit %d, want 1 showing its stderr", res.ExitCode)
	}
	must(t, c, "node4", "rm -f /run/demoapp/fail/daemon-stop")
	if after := snapshot(t, c); after != before {
		t.Errorf("refused syncs changed the cluster:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if rs := runs(t, c); len(rs) != nruns+1 || rs[len(rs)-1].Outcome != journal.RolledBack {
		t.Errorf("journal after the refusals: %d runs, want %d with the last rolled back", len(rs), nruns+1)
	}

	res := cutover(t, c, "sync", "--yes", "node4")
	if res.ExitCode != 0 {
		t.Fatalf("sync node4: exit %d", res.ExitCode)
	}
	if !strings.Contains(res.Stdout, "done: demoapp 1.1.0 on node4") || !strings.Contains(res.Stdout, "still marked offline") {
		t.Errorf("sync output lacks the done line or the offline flag hint:\n%s", res.Stdout)
	}
	checkAt(t, c, "1.1.0", online(c)...)
	rs := runs(t, c)
	r := rs[len(rs)-1]
	if r.Kind != "sync" || r.From != "1.0.0" || r.To != "1.1.0" || r.Outcome != journal.Succeeded {
		t.Errorf("journal run %d: %s %s -> %s %s, want sync 1.0.0 -> 1.1.0 done", r.ID, r.Kind, r.From, r.To, r.Outcome)
	}
	for _, stage := range []string{"verify-installed", "stop-nodes", "switch", "ensure-dirs", "redistribute", "start", "verify"} {
		if st, _ := r.StageState(stage); st != journal.Done {
			t.Errorf("sync run %d: stage %s is %q, want done", r.ID, stage, st)
		}
	}

	// A pending run: a sync waits for the lock while the run holds it, and is refused once the
	// run is interrupted, naming it.
	h := startHeld(t, c, "drain", "upgrade", "--to=1.2.0", "--yes")
	if res := cutover(t, c, "sync", "--yes", "node4"); res.ExitCode != 4 {
		t.Errorf("sync while a run holds the lock: exit %d, want 4", res.ExitCode)
	}
	must(t, c, c.Master, "pkill -KILL -x cutover")
	h.wait(t)
	must(t, c, c.Master, "rm -rf "+holdDir)
	before = snapshot(t, c)
	pending := runs(t, c)[len(runs(t, c))-1]
	res = cutover(t, c, "sync", "--yes", "node4")
	if want := fmt.Sprintf("run %d (1.1.0 -> 1.2.0) is pending", pending.ID); res.ExitCode != 1 || !strings.Contains(res.Stderr, want) {
		t.Errorf("sync while a run is pending: exit %d %q, want 1 and %q", res.ExitCode, res.Stderr, want)
	}
	if after := snapshot(t, c); after != before {
		t.Errorf("a sync refused for a pending run changed the cluster:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if res := cutover(t, c, "upgrade", "--abort"); res.ExitCode != 0 {
		t.Errorf("abort the pending run: exit %d", res.ExitCode)
	}
	checkAt(t, c, "1.1.0", online(c)...)
}
