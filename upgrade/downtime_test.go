package upgrade

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestDowntime: the window runs from each node's first stop, as the journal kept it across
// executions, to its last start in this one; a node not started again is left out.
func TestDowntime(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	r := &Run{facts: map[string]string{
		"down.node1":        t0.Format(time.RFC3339Nano),
		"down.node2":        t0.Add(time.Second).Format(time.RFC3339Nano),
		"down.node3":        t0.Add(2 * time.Second).Format(time.RFC3339Nano),
		"queue_was_drained": "no",
	}, up: map[string]time.Time{"node1": t0.Add(5 * time.Second), "node2": t0.Add(3 * time.Second)}}
	d := r.downtime()
	if d.Cluster != 5*time.Second || d.Nodes["node1"] != 5*time.Second || d.Nodes["node2"] != 2*time.Second || len(d.Nodes) != 2 {
		t.Errorf("downtime = %+v, want 5s for the cluster, node1 5s, node2 2s", d)
	}
	if got, want := d.String(), "5s (node1 5s, node2 2s)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if d := (&Run{}).downtime(); d.Cluster != 0 || len(d.Nodes) != 0 {
		t.Errorf("downtime of a run that stopped nothing = %+v", d)
	}
}

// stopEverywhere is a stage that remembers a daemon stop on many nodes, as a fan-out does,
// and looks at the journal while it runs.
type stopEverywhere struct {
	nodes        int
	j            *memJournal
	writesDuring int
}

func (stopEverywhere) Name() string { return "stop-nodes" }
func (stopEverywhere) Where() Where { return OnOthers }
func (s *stopEverywhere) Run(_ context.Context, r *Run) error {
	for i := range s.nodes {
		r.Remember(fmt.Sprintf("down.node%d", i), time.Now().UTC().Format(time.RFC3339Nano))
	}
	s.j.mu.Lock()
	s.writesDuring = s.j.setFacts
	s.j.mu.Unlock()
	return nil
}

// TestRememberedFactsOneWritePerStage: the first stop of 256 nodes costs the journal one write,
// as the stage ends, not one per node; an earlier execution's value still wins.
func TestRememberedFactsOneWritePerStage(t *testing.T) {
	j := &memJournal{facts: map[string]string{"down.node7": "2026-11-22T12:00:00Z"}}
	st := &stopEverywhere{nodes: 256, j: j}
	r := testRun(j)
	r.facts = maps(j.facts)
	if err := (&Runner{Stages: []Stage{st}}).Execute(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if st.writesDuring != 0 {
		t.Errorf("%d fact writes while the stage ran, want none", st.writesDuring)
	}
	if j.setFacts != 1 {
		t.Errorf("%d fact writes for 256 nodes, want 1", j.setFacts)
	}
	for i := range 256 {
		if _, ok := j.facts[fmt.Sprintf("down.node%d", i)]; !ok {
			t.Fatalf("down.node%d not journaled", i)
		}
	}
	if v, _ := r.Fact("down.node7"); v != "2026-11-22T12:00:00Z" || j.facts["down.node7"] != v {
		t.Errorf("down.node7 = %q (journal %q), want the earlier execution's", v, j.facts["down.node7"])
	}
}
