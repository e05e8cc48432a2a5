package upgrade

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cutover/cutover/upgrade/upgradetest"
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
	}, perNode: nodeState{up: map[string]time.Time{"node1": t0.Add(5 * time.Second), "node2": t0.Add(3 * time.Second)}}}
	d := r.perNode.downtime(r.facts)
	if d.Cluster != 5*time.Second || d.Nodes["node1"] != 5*time.Second || d.Nodes["node2"] != 2*time.Second || len(d.Nodes) != 2 {
		t.Errorf("downtime = %+v, want 5s for the cluster, node1 5s, node2 2s", d)
	}
	if got, want := d.String(), "5s (node1 5s, node2 2s)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if d := (&nodeState{}).downtime(nil); d.Cluster != 0 || len(d.Nodes) != 0 {
		t.Errorf("downtime of a run that stopped nothing = %+v", d)
	}
}

// TestStopJournalsEveryNodeInOneWrite runs the real stop-nodes stage over 256 nodes: each
// node's first stop costs the journal nothing while the stage runs, and all of them one
// write as it ends; an earlier execution's value still wins.
func TestStopJournalsEveryNodeInOneWrite(t *testing.T) {
	names := []string{"master"}
	for i := range 256 {
		names = append(names, fmt.Sprintf("node%d", i))
	}
	w := upgradetest.New(t, upgradetest.Options{Nodes: names})
	j := &memJournal{facts: map[string]string{"down.node7": "2026-11-22T12:00:00Z"}}
	r := testRun(j)
	r.facts = maps(j.facts)
	r.Inventory, r.Online = w.Inventory(), w.Inventory().Online()
	r.Config.Commands.DaemonsStop = "stop"
	r.Config.SSH.Parallel = 32
	r.dial = worldDialer{w}
	// Every stop checks that no fact was journaled yet.
	var called, early atomic.Int32
	w.OnCommand(func(node, command string) {
		called.Add(1)
		j.mu.Lock()
		defer j.mu.Unlock()
		if j.setFacts > 0 {
			early.Add(1)
		}
	})
	if err := (&Runner{Stages: []Stage{stopNodes{}}}).Execute(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if n := called.Load(); n != 256 {
		t.Fatalf("daemons_stop ran on %d nodes, want 256", n)
	}
	if n := early.Load(); n != 0 {
		t.Errorf("%d stops ran after a fact write of the stage, want every write after the stage", n)
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

// TestDowntimeOfAResumedRun: a resumed run never counts the time the daemons served between
// an earlier execution's start (journaled as up.<node>) and this execution's stop; a node
// started by an earlier execution only counts to that start; the cluster's figure is the time
// some node was down, not the span from the first stop to the last start.
func TestDowntimeOfAResumedRun(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) string { return t0.Add(d).Format(time.RFC3339Nano) }
	r := &Run{facts: map[string]string{
		// node1: down 0-1s in the first execution, served, down again 10-11s in this one.
		"down.node1": at(0), "up.node1": at(time.Second),
		// node2: down 0-2s in the first execution; the resumed run did not touch it.
		"down.node2": at(0), "up.node2": at(2 * time.Second),
		// node3: down 0.5-1.5s in the first execution; this one started it again, no stop.
		"down.node3": at(time.Second / 2), "up.node3": at(3 * time.Second / 2),
	},
		perNode: nodeState{
			down: map[string]time.Time{"node1": t0.Add(10 * time.Second)},
			up:   map[string]time.Time{"node1": t0.Add(11 * time.Second), "node3": t0.Add(12 * time.Second)},
		},
	}
	d := r.perNode.downtime(r.facts)
	want := map[string]time.Duration{"node1": 2 * time.Second, "node2": 2 * time.Second, "node3": time.Second}
	for n, w := range want {
		if d.Nodes[n] != w {
			t.Errorf("%s's downtime = %s, want %s (all: %v)", n, d.Nodes[n], w, d.Nodes)
		}
	}
	if d.Cluster != 3*time.Second {
		t.Errorf("the cluster's downtime = %s, want 3s: 0-2s and 10-11s, not the 11s from the first stop to the last start", d.Cluster)
	}
	if d.Longest() != 2*time.Second {
		t.Errorf("Longest() = %s, want 2s", d.Longest())
	}
}
