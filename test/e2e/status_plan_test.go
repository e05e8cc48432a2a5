package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cutover/cutover/test/cluster"
)

// planDoc is what the tests read of `cutover --output json plan`.
type planDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	From, To   string
	Nodes      []string `json:"nodes"`
	Checks     []struct {
		Name    string `json:"name"`
		Node    string `json:"node"`
		OK      bool   `json:"ok"`
		Message string `json:"message"`
	} `json:"checks"`
	Stages []struct {
		Index   int      `json:"index"`
		Name    string   `json:"name"`
		Where   string   `json:"where"`
		Nodes   []string `json:"nodes"`
		Skipped bool     `json:"skipped"`
		PONR    bool     `json:"ponr"`
	} `json:"stages"`
	Proceed  bool     `json:"proceed"`
	Refusals []string `json:"refusals"`
}

// statusDoc is what the tests read of `cutover --output json status`.
type statusDoc struct {
	Kind    string `json:"kind"`
	Version string `json:"version"`
	Nodes   []struct {
		Name      string   `json:"name"`
		Reachable bool     `json:"reachable"`
		Lib       string   `json:"lib"`
		Share     string   `json:"share"`
		Live      string   `json:"live"`
		Installed []string `json:"installed"`
		Error     string   `json:"error"`
	} `json:"nodes"`
	Verify *struct {
		Ran bool `json:"ran"`
		OK  bool `json:"ok"`
	} `json:"verify"`
	Pending *struct {
		Run   uint64 `json:"run"`
		Stage string `json:"stage"`
	} `json:"pending"`
	Lock *struct {
		Host string `json:"host"`
		PID  int    `json:"pid"`
	} `json:"lock"`
	Behind []struct {
		Node    string `json:"node"`
		Command string `json:"command"`
	} `json:"behind"`
}

func decode(t *testing.T, res cluster.Result, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(res.Stdout), v); err != nil {
		t.Fatalf("not one JSON document: %v\n%s", err, res.Stdout)
	}
}

// stateDir lists cutover's state directory on the master: every file with its size and
// modification time, or nothing when it does not exist.
func stateDir(t *testing.T, c *cluster.Cluster) string {
	t.Helper()
	return sh(t, c, c.Master, "find /var/lib/cutover -printf '%p %s %T@\\n' 2>/dev/null | sort").Stdout
}

// TestStatusAndPlan runs plan and status on one cluster where node3 lacks 1.2.0: plans that
// proceed and plans that are refused for several reasons at once, none of which writes
// anything; status on a healthy cluster, with a node behind, with a node cut off, and during
// a run that holds the lock.
func TestStatusAndPlan(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{Missing: map[string][]string{"node3": {"1.2.0"}}})
	ctx := context.Background()
	before := snapshot(t, c)
	stateBefore := stateDir(t, c)

	// A healthy plan: 19 stages, config-upgrade the point of no return, exit 0.
	res := cutover(t, c, "--output", "json", "plan", "--to=1.1.0")
	if res.ExitCode != 0 {
		t.Fatalf("plan to 1.1.0: exit %d, want 0", res.ExitCode)
	}
	var p planDoc
	decode(t, res, &p)
	if p.APIVersion != "cutover/v1" || p.Kind != "Plan" || !p.Proceed || len(p.Refusals) != 0 {
		t.Errorf("plan: %s %s proceed %v refusals %q", p.APIVersion, p.Kind, p.Proceed, p.Refusals)
	}
	if len(p.Stages) != 19 {
		t.Fatalf("plan lists %d stages, want 19", len(p.Stages))
	}
	for _, s := range p.Stages {
		if s.PONR != (s.Name == "config-upgrade") {
			t.Errorf("stage %d %s: ponr %v", s.Index, s.Name, s.PONR)
		}
	}
	if s := p.Stages[10]; s.Name != "switch" || s.Where != "all" || strings.Join(s.Nodes, " ") != "node1 node2 node3 node4" {
		t.Errorf("stage 11 = %+v, want switch on all four nodes", s)
	}
	installed := 0
	for _, ch := range p.Checks {
		if ch.Name == "verify-installed" && ch.OK {
			installed++
		}
	}
	if installed != 4 {
		t.Errorf("plan checked verify-installed on %d nodes, want 4: %+v", installed, p.Checks)
	}
	if res := cutover(t, c, "plan", "--to=1.1.0"); res.ExitCode != 0 || !strings.Contains(res.Stdout, "config-upgrade") || !strings.Contains(res.Stdout, "point of no return") {
		t.Errorf("plan as text: exit %d, want 0 with config-upgrade marked as the point of no return", res.ExitCode)
	}

	// 1.2.0 is missing on node3.
	res = cutover(t, c, "plan", "--to=1.2.0")
	if res.ExitCode != 1 || !strings.Contains(res.Stdout, "node3") || !strings.Contains(res.Stdout, "REFUSED") {
		t.Errorf("plan to 1.2.0: exit %d, want 1 naming node3", res.ExitCode)
	}

	// Two refusals at once: a skipped minor and the missing version, and a major hop.
	must(t, c, c.Master, `sed -i 's/^allow_minor_jump = true/allow_minor_jump = false/' /etc/cutover/cutover.toml`)
	res = cutover(t, c, "--output", "json", "plan", "--to=1.2.0")
	must(t, c, c.Master, `sed -i 's/^allow_minor_jump = false/allow_minor_jump = true/' /etc/cutover/cutover.toml`)
	p = planDoc{}
	decode(t, res, &p)
	refusals := strings.Join(p.Refusals, "\n")
	if res.ExitCode != 1 || p.Proceed || !strings.Contains(refusals, "skips a minor version") || !strings.Contains(refusals, "node3: demoapp 1.2.0 is not installed") {
		t.Errorf("plan to 1.2.0 with allow_minor_jump = false: exit %d, refusals:\n%s\nwant both the skipped minor and node3", res.ExitCode, refusals)
	}
	res = cutover(t, c, "plan", "--to=2.0.0")
	if res.ExitCode != 1 || !strings.Contains(res.Stdout, "changes the major version") || strings.Count(res.Stdout, "2.0.0 is not installed") < 4 {
		t.Errorf("plan to 2.0.0: exit %d, want 1 with the major hop and every node refused", res.ExitCode)
	}

	// None of it wrote anything: no journal, no lock file, nothing changed on any node.
	if after := stateDir(t, c); after != stateBefore {
		t.Errorf("plan changed /var/lib/cutover:\nbefore:\n%s\nafter:\n%s", stateBefore, after)
	}
	if code := sh(t, c, c.Master, "test -e /var/lib/cutover/journal.db || test -e /var/lib/cutover/lock").ExitCode; code == 0 && stateBefore == "" {
		t.Errorf("plan created the journal or the lock file")
	}
	if after := snapshot(t, c); after != before {
		t.Errorf("plan changed the cluster:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// Status: every node at 1.0.0, verify ok; it writes nothing either.
	res = cutover(t, c, "--output", "json", "status")
	var st statusDoc
	decode(t, res, &st)
	if res.ExitCode != 0 || st.Kind != "Status" || st.Version != "1.0.0" || st.Verify == nil || !st.Verify.OK || st.Pending != nil || st.Lock != nil {
		t.Errorf("status: exit %d, %+v", res.ExitCode, st)
	}
	for _, n := range st.Nodes {
		wantInstalled := "1.0.0 1.1.0 1.2.0"
		if n.Name == "node3" {
			wantInstalled = "1.0.0 1.1.0"
		}
		if !n.Reachable || n.Lib != "1.0.0" || n.Share != "1.0.0" || n.Live != "1.0.0" || strings.Join(n.Installed, " ") != wantInstalled {
			t.Errorf("status of %s = %+v, want at 1.0.0 with %s installed", n.Name, n, wantInstalled)
		}
	}
	if len(st.Nodes) != 4 || len(st.Behind) != 0 {
		t.Errorf("status: %d nodes, behind %+v; want 4 and none", len(st.Nodes), st.Behind)
	}
	if res := cutover(t, c, "status"); res.ExitCode != 0 || strings.Count(res.Stdout, "1.0.0  1.0.0") != 4 {
		t.Errorf("status as text: exit %d, want 0 and four nodes at 1.0.0", res.ExitCode)
	}
	if after := stateDir(t, c); after != stateBefore {
		t.Errorf("status changed /var/lib/cutover:\nbefore:\n%s\nafter:\n%s", stateBefore, after)
	}

	// A node whose links point elsewhere is behind, with the command that catches it up.
	must(t, c, "node4", "ln -sfn /usr/lib/demoapp/1.1.0 /etc/demoapp/lib && ln -sfn /usr/share/demoapp/1.1.0 /etc/demoapp/share")
	res = cutover(t, c, "status")
	must(t, c, "node4", "ln -sfn /usr/lib/demoapp/1.0.0 /etc/demoapp/lib && ln -sfn /usr/share/demoapp/1.0.0 /etc/demoapp/share")
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "node4  behind") || !strings.Contains(res.Stdout, "run 'cutover sync node4'") {
		t.Errorf("status with node4 elsewhere: exit %d, want node4 behind and the sync command", res.ExitCode)
	}

	// A node cut off is shown unreachable; status still exits 0.
	if err := c.Cut(ctx, "node4"); err != nil {
		t.Fatal(err)
	}
	res = cutover(t, c, "status")
	if err := c.Heal(ctx, "node4"); err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "node4  unreachable") {
		t.Errorf("status with node4 cut: exit %d, want 0 and node4 unreachable", res.ExitCode)
	}

	// During a run holding the lock: status answers with the run, its stage and the holder,
	// and the run goes on undisturbed. The run stays held at backup until it is released
	// below, so a status that waited for the lock would never answer (the helper gives up
	// after minutes and fails the test); how fast it answers is a matter for benchmarks.
	h := startHeld(t, c, "backup", "upgrade", "--to=1.1.0", "--yes")
	res = cutover(t, c, "status")
	jsonRes := cutover(t, c, "--output", "json", "status")
	if res := h.release(t, c); res.ExitCode != 0 {
		t.Errorf("the held run: exit %d, want 0", res.ExitCode)
	}
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "pending: run 1, upgrade 1.0.0 -> 1.1.0, at backup") ||
		!strings.Contains(res.Stdout, "lock: held by pid") || !strings.Contains(res.Stdout, "on node1") {
		t.Errorf("status during a run: exit %d, want the pending run 1 at backup and the lock holder on node1", res.ExitCode)
	}
	st = statusDoc{}
	decode(t, jsonRes, &st)
	if st.Pending == nil || st.Pending.Run != 1 || st.Pending.Stage != "backup" || st.Lock == nil || st.Lock.Host != "node1" || st.Lock.PID == 0 {
		t.Errorf("status during a run as JSON: pending %+v, lock %+v", st.Pending, st.Lock)
	}
	checkAt(t, c, "1.1.0", online(c)...)
	checkRunComplete(t, c, "1.0.0", "1.1.0")
	if res := cutover(t, c, "status"); res.ExitCode != 0 || !strings.Contains(res.Stdout, "demoapp 1.1.0 on 4 nodes") || !strings.Contains(res.Stdout, "last run 1, upgrade 1.0.0 -> 1.1.0: done") {
		t.Errorf("status after the run: exit %d, want 1.1.0 and the last run done", res.ExitCode)
	}
}
