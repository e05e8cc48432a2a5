package main

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestRollingCommands runs a rolling upgrade and downgrade on the one-node fixture: plan lists
// the batch, the JSON stream carries the batch events, the text output shows the batch and
// each node's downtime, and without rolling_from in the newer version's policy plan and
// upgrade refuse. A run killed in its batch shows it in status and is resumed.
func TestRollingCommands(t *testing.T) {
	var err error
	if crashBinary, err = os.Executable(); err != nil {
		t.Fatal(err)
	}
	f, err := newCrashFixture(t.TempDir(), fixtureOpts{live: "1.0.0", rolling: true})
	if err != nil {
		t.Fatal(err)
	}

	plan := f.cutover(0, "--output", "json", "plan", "--to=1.1.0")
	if plan.code != 0 {
		t.Fatalf("plan: %v", plan)
	}
	var doc struct {
		Stages []struct {
			Name, Where string
			Nodes       []string
		}
	}
	if err := json.Unmarshal([]byte(plan.stdout), &doc); err != nil {
		t.Fatalf("plan document: %v\n%s", err, plan.stdout)
	}
	var batches []string
	for _, s := range doc.Stages {
		if s.Where == "batch" || s.Where == "canary" {
			batches = append(batches, s.Name+" "+s.Where+" "+strings.Join(s.Nodes, ","))
		}
	}
	if want := "batch-1 batch " + f.master; len(batches) != 1 || batches[0] != want {
		t.Errorf("plan's batches = %q, want [%q]", batches, want)
	}

	run := f.cutover(0, "--output", "json", "upgrade", "--to=1.1.0", "--yes")
	if run.code != 0 || f.world().at() != "1.1.0" {
		t.Fatalf("rolling upgrade: %v", run)
	}
	var states []string
	for _, line := range strings.Split(strings.TrimSpace(run.stdout), "\n") {
		var e struct {
			Type, State, Stage, Direction string
			Rolling                       bool
			Downtime                      int64            `json:"downtime_ns"`
			Outage                        int64            `json:"outage_ns"`
			NodeDowntime                  map[string]int64 `json:"node_downtime_ns"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("event %q: %v", line, err)
		}
		if e.Type == "batch" {
			states = append(states, e.Stage+":"+e.State)
		}
		if e.Type == "done" {
			// A rolling run's outage is the longest node's downtime: the others serve meanwhile.
			var longest int64
			for _, d := range e.NodeDowntime {
				longest = max(longest, d)
			}
			if !e.Rolling || e.Direction != "upgrade" || e.Outage <= 0 || e.Outage != longest {
				t.Errorf("done event: rolling %v, direction %q, outage_ns %d, node_downtime_ns %v; want rolling, upgrade, the longest node's downtime", e.Rolling, e.Direction, e.Outage, e.NodeDowntime)
			}
		}
	}
	if want := []string{"batch-1:started", "batch-1:node-ok", "batch-1:done"}; strings.Join(states, " ") != strings.Join(want, " ") {
		t.Errorf("batch events = %v, want %v", states, want)
	}

	text := f.cutover(0, "upgrade", "--to=1.0.0", "--yes")
	t.Logf("%s", text.stdout)
	if text.code != 0 || f.world().at() != "1.0.0" {
		t.Fatalf("rolling downgrade: %v", text)
	}
	for _, want := range []string{"batch 1 of 1: " + f.master, "1 batch, each node down at most"} {
		if !strings.Contains(text.stdout, want) {
			t.Errorf("rolling downgrade's output does not show %q:\n%s", want, text.stdout)
		}
	}
	// Runs follow each other within a second: each archive still gets a name of its own.
	if up := f.cutover(0, "upgrade", "--to=1.1.0", "--yes"); up.code != 0 {
		t.Fatalf("rolling upgrade again: %v", up)
	}

	// A run killed right after its batch started is pending: status shows how far each batch
	// got, and --resume finishes it.
	at := text.findPoint("journal: batch-1 started", false)
	if at == 0 {
		t.Fatalf("no crash point records batch-1 started:\n%s", strings.Join(text.points, "\n"))
	}
	if killed := f.cutover(at, "upgrade", "--to=1.0.0", "--yes"); !killed.killed {
		t.Fatalf("the downgrade was to die at point %d: %v", at, killed)
	}
	status := f.cutover(0, "status")
	if !strings.Contains(status.stdout, "rolling, the cluster runs both versions meanwhile") || !regexp.MustCompile(`batch-1 +batch +started +`+f.master).MatchString(status.stdout) {
		t.Errorf("status of a pending rolling run does not show its batch:\n%s", status.stdout)
	}
	if res := f.cutover(0, "upgrade", "--resume"); res.code != 0 || f.world().at() != "1.0.0" {
		t.Fatalf("resume of the rolling downgrade: %v", res)
	}
	if up := f.cutover(0, "upgrade", "--to=1.1.0", "--yes"); up.code != 0 {
		t.Fatalf("rolling upgrade once more: %v", up)
	}

	// Without rolling_from in the newer version's policy, a rolling downgrade is refused.
	if err := os.Remove(f.path("usr/share/app/1.1.0/cutover/upgrade-policy.json")); err != nil {
		t.Fatal(err)
	}
	refused := f.cutover(0, "plan", "--to=1.0.0")
	if refused.code != 1 || !strings.Contains(refused.stdout, "declares no rolling_from") {
		t.Errorf("plan without rolling_from: %v, want exit 1 naming rolling_from", refused)
	}
	down := f.cutover(0, "upgrade", "--to=1.0.0", "--yes")
	if down.code != 1 || f.world().at() != "1.1.0" {
		t.Errorf("rolling downgrade without rolling_from: %v, want exit 1 and nothing changed", down)
	}
}

// TestPlanRollingSaysWhoDeclares: plan's rolling check repeats the newer version's
// declaration as one, naming its file, rather than stating that the versions run side by side.
func TestPlanRollingSaysWhoDeclares(t *testing.T) {
	var err error
	if crashBinary, err = os.Executable(); err != nil {
		t.Fatal(err)
	}
	f, err := newCrashFixture(t.TempDir(), fixtureOpts{live: "1.0.0", rolling: true})
	if err != nil {
		t.Fatal(err)
	}
	plan := f.cutover(0, "plan", "--to=1.1.0")
	if plan.code != 0 {
		t.Fatalf("plan: %v", plan)
	}
	line := ""
	for _, l := range strings.Split(plan.stdout, "\n") {
		if strings.Contains(l, "rolling") && strings.Contains(l, "ok") && !strings.Contains(l, "strategy") {
			line = l
		}
	}
	if !strings.Contains(line, "1.1.0 declares rolling_from") || !strings.Contains(line, "(upgrade-policy.json)") || strings.Contains(plan.stdout, "run side by side") {
		t.Errorf("plan's rolling check = %q, want 1.1.0's declaration named as one:\n%s", line, plan.stdout)
	}
}
