package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/test/cluster"
	demo "github.com/cutover/cutover/test/demoapp"
)

// TestRollingNetworkFaults makes the network fail at a rolling run's batch boundary, on one
// three-node cluster (batches of one node: node2, node3, then the master node1; max_failed =
// 0), as the master's packets held on one connection and a one-way cut do.
//
// A held go before the point of no return: an upgrade 1.1.0 -> 1.2.0 is held before batch 2;
// node3 is frozen, so its batch's first request (the stop) waits in its kernel; the run goes
// on, the master's packets on node3's connection are held and node3 thawed: its command shell
// reads the request and asks, and the go cutover sends is held. The keepalive gives that
// connection up: node3's batch fails over the budget and the run switches the batches back
// (exit 1) through a new connection. Once the hold is lifted, what the old connection carried
// arrives after the run said nothing was changed, and nothing acts on it: the cluster is as
// before, node3's daemon running 1.1.0, and the same upgrade run again converges.
//
// A one-way cut past it: a downgrade 1.2.0 -> 1.1.0 with node2 as its canary (so batch 2 is its
// point of no return) is held before batch 2 and the master's packets to node3 are dropped,
// while node3's still reach the master: the run pends (exit 3) naming node3 and the resume, and
// after the cut is lifted the resume converges.
//
// After every run the journal says done only if every node is at the target, links, config
// and daemons.
func TestRollingNetworkFaults(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{Nodes: 3, Live: "1.1.0"})
	ctx := context.Background()
	all := online(c)

	useRolling(t, c, demo.Rolling{BatchSize: 1, MaxFailed: 0, BatchTimeout: "60s"})
	before := snapshot(t, c)
	h := startHeld(t, c, "batch-2", "upgrade", "--to=1.2.0", "--yes")
	res := releaseGoHeld(t, c, h, "node3")
	checkDoneMeansAt(t, c, "held connection to node3 at batch 2", "1.2.0")
	if res.ExitCode != 1 || !strings.Contains(res.Stdout+res.Stderr, "node3") {
		t.Errorf("held connection to node3 at batch 2: exit %d, want 1 (rolled back) naming node3", res.ExitCode)
	}
	if after := snapshot(t, c); after != before {
		t.Errorf("held connection to node3 at batch 2: the cluster changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	checkRolledBack(t, c, "held connection to node3 at batch 2", "1.1.0", "1.2.0", "batch-1", "batch-2")
	if ev, ok := lastRun(t, c).LastEvent("batch-3"); ok {
		t.Errorf("held connection to node3 at batch 2: batch 3 ran: %+v", ev)
	}
	if res := cutover(t, c, "upgrade", "--to=1.2.0", "--yes"); res.ExitCode != 0 {
		t.Fatalf("the upgrade again once the hold is lifted: exit %d", res.ExitCode)
	}
	checkRollingComplete(t, c, "1.1.0", "1.2.0", 3)
	checkAt(t, c, "1.2.0", all...)

	useRolling(t, c, demo.Rolling{BatchSize: 1, Canaries: []string{"node2"}, MaxFailed: 0, BatchTimeout: "60s"})
	h = startHeld(t, c, "batch-2", "upgrade", "--to=1.1.0", "--yes")
	cut, err := c.CutOneWay(ctx, "node3")
	if err != nil {
		h.release(t, c)
		t.Fatal(err)
	}
	res = h.release(t, c)
	checkDoneMeansAt(t, c, "one-way cut of node3 at batch 2", "1.1.0")
	if res.ExitCode != 3 || !strings.Contains(res.Stdout+res.Stderr, "node3") || !strings.Contains(res.Stderr, "cutover upgrade --resume") {
		t.Errorf("one-way cut of node3 at batch 2: exit %d, want 3 naming node3 and 'cutover upgrade --resume'", res.ExitCode)
	}
	r := lastRun(t, c)
	if r.Outcome != journal.FailedPastPONR || !r.PastPONR {
		t.Errorf("one-way cut of node3 at batch 2: run %d %s (past its point of no return: %v), want failed past it", r.ID, r.Outcome, r.PastPONR)
	}
	if ev, ok := r.LastEvent("batch-2"); !ok || ev.State != journal.Failed || !failedOn(ev, "node3") {
		t.Errorf("one-way cut of node3 at batch 2: run %d: batch-2 %+v, want failed on node3", r.ID, ev)
	}
	if sh(t, c, c.Master, "test -e /var/lib/cutover/intent.json").ExitCode != 0 {
		t.Error("one-way cut of node3 at batch 2: no intent, want the run pending")
	}
	checkAt(t, c, "1.1.0", "node2")
	if err := cut.Lift(ctx); err != nil {
		t.Fatal(err)
	}
	if res := cutover(t, c, "upgrade", "--resume"); res.ExitCode != 0 {
		t.Fatalf("resume after the cut was lifted: exit %d", res.ExitCode)
	}
	checkRollingComplete(t, c, "1.2.0", "1.1.0", 3)
	checkAt(t, c, "1.1.0", all...)
}

// checkDoneMeansAt asserts that the last run, if the journal says it is done, left every node
// it did not record offline at version to.
func checkDoneMeansAt(t *testing.T, c *cluster.Cluster, what, to string) {
	t.Helper()
	r := lastRun(t, c)
	if r.Outcome != journal.Succeeded {
		return
	}
	t.Logf("%s: run %d is done: every node must be at %s", what, r.ID, to)
	checkAt(t, c, to, online(c, r.Offline...)...)
}

// waitClosed waits until no connection hold kept to node is open on the master: TCP
// retransmits what the hold kept back, and the connection's end after it, within a minute.
func waitClosed(t *testing.T, hold *cluster.Fault, node string) {
	t.Helper()
	var poll cluster.Poll
	deadline := time.Now().Add(90 * time.Second)
	for {
		open, err := hold.Open(context.Background(), node)
		if err != nil {
			t.Fatal(err)
		}
		if !open {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the held connection to %s is still open 90 s after the hold was lifted", node)
		}
		poll.Wait()
	}
}
