package upgrade

import (
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
