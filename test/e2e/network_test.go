package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/test/cluster"
)

// TestNetworkFaults makes the network fail in between a run's stages, on one three-node
// cluster at 1.1.0, as the master's packets held on one connection and a one-way cut do.
//
// A held go: the run is held before stop-nodes; node2 is frozen, so the stop's request waits in
// its kernel; the run goes on, the master's packets on node2's connection are held and node2
// thawed: its command shell reads the request and asks, and the go cutover sends is held. The
// keepalive gives the connection up, the run rolls back before its point of no return through
// a new connection (exit 1), and the hold is lifted: what node2 then receives of the old
// connection arrives after the run said that nothing changed, and nothing may act on it: every
// node stays as before, node2's daemon running 1.1.0. (Whether the go itself still arrives
// depends on how the master's kernel closed the given-up connection; nodes'
// TestLateGoNeverActs delivers a late go for certain, over a real sshd.)
//
// A one-way cut past the point of no return: the run is held before start and the master's
// packets to node3 are dropped while node3's still reach the master: the run pends (exit 3)
// naming node3 and the resume, and after the cut is lifted the resume converges.
func TestNetworkFaults(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{Nodes: 3, Live: "1.1.0"})
	ctx := context.Background()
	before := snapshot(t, c)

	h := startHeld(t, c, "stop-nodes", "upgrade", "--to=1.2.0", "--yes")
	res := releaseGoHeld(t, c, h, "node2")
	if res.ExitCode != 1 || !strings.Contains(res.Stdout+res.Stderr, "node2") {
		t.Errorf("a held go on node2 at stop-nodes: exit %d, want 1 (rolled back) naming node2", res.ExitCode)
	}
	if after := snapshot(t, c); after != before {
		t.Errorf("a go that arrived after the run rolled back changed the cluster:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	checkRolledBack(t, c, "held go", "1.1.0", "1.2.0")

	h = startHeld(t, c, "start", "upgrade", "--to=1.2.0", "--yes")
	cut, err := c.CutOneWay(ctx, "node3")
	if err != nil {
		t.Fatal(err)
	}
	res = h.release(t, c)
	if res.ExitCode != 3 || !strings.Contains(res.Stdout+res.Stderr, "node3") || !strings.Contains(res.Stderr, "--resume") {
		t.Errorf("a one-way cut of node3 at start: exit %d, want 3 naming node3 and --resume", res.ExitCode)
	}
	if sh(t, c, c.Master, "test -e /var/lib/cutover/intent.json").ExitCode != 0 {
		t.Error("after a one-way cut past the point of no return: no intent, want the run pending")
	}
	if err := cut.Lift(ctx); err != nil {
		t.Fatal(err)
	}
	if res := cutover(t, c, "upgrade", "--resume"); res.ExitCode != 0 {
		t.Fatalf("resume after the cut was lifted: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	checkRunComplete(t, c, "1.1.0", "1.2.0")
	checkAt(t, c, "1.2.0", "node1", "node2", "node3")
}

// releaseGoHeld releases the held run h so that its next request to node is held on the way to
// node's command shell: node is frozen while the run goes on (the request waits in its kernel),
// the master's packets on its connections to node are then held and node thawed, so its shell
// reads the request and asks, and the go cutover sends is held. It returns the run's result and,
// once the hold is lifted, waits until the held connection has closed (TCP retransmits what was
// held, the connection's end after it), so that whatever the late go would start has started.
func releaseGoHeld(t *testing.T, c *cluster.Cluster, h *heldRun, node string) cluster.Result {
	t.Helper()
	ctx := context.Background()
	if err := c.Freeze(ctx, node); err != nil {
		t.Fatal(err)
	}
	must(t, c, c.Master, "rm -rf "+holdDir+"/hold")
	time.Sleep(2 * time.Second) // the request reaches node's kernel
	hold, err := c.HoldConnections(ctx, node)
	if err != nil {
		c.Thaw(ctx, node)
		t.Fatal(err)
	}
	if err := c.Thaw(ctx, node); err != nil {
		t.Fatal(err)
	}
	res := h.wait(t)
	if err := hold.Lift(ctx); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, hold, node)
	time.Sleep(2 * time.Second) // what the late go would start, it has started by now
	return res
}
