package e2e

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/test/cluster"
	demo "github.com/cutover/cutover/test/demoapp"
	"github.com/cutover/cutover/upgrade"
)

// netFault is one network fault TestNetworkFaultsAtBoundaries makes at a boundary.
type netFault string

const (
	// faultCut takes the node's link down both ways until the run has ended.
	faultCut netFault = "cut"
	// faultOneWay drops the master's packets to the node, while the node's reach the master.
	faultOneWay netFault = "one-way"
	// faultHeld holds the master's packets on its connections to the node: the run's next
	// request there reaches the node, what follows it (a go, an SFTP request) does not until
	// the run has given the connection up and ended.
	faultHeld netFault = "held"
	// faultFlap takes the node's link down and up again, two seconds each way, until the
	// run has ended: for the master, its whole network flapping.
	faultFlap netFault = "flap"
)

// netFaultCase is a fault of one node at one boundary: the run is held before stage (a
// rolling run's "batch-N"), the fault made, and the run let go.
type netFaultCase struct {
	rolling bool
	stage   string
	fault   netFault
	node    string
}

func (fc netFaultCase) String() string {
	mode := "all-at-once"
	if fc.rolling {
		mode = "rolling"
	}
	return fmt.Sprintf("%s/%s/%s/%s", mode, fc.stage, fc.fault, fc.node)
}

// netFaultSpread are the cases make test runs: each fault before and past the point of no
// return, on stages with commands, with file changes and with neither, all at once and
// rolling, beside TestNetworkFaults' and TestRollingNetworkFaults' own (a held go at
// stop-nodes and at batch 2, a one-way cut at start and at batch 2). make crash-all runs
// every stage of an upgrade, and every batch of a rolling one, with every fault
// (netFaultCases).
var netFaultSpread = []netFaultCase{
	{stage: "drain", fault: faultCut, node: "node2"},
	{stage: "switch", fault: faultHeld, node: "node3"},
	{stage: "finish", fault: faultOneWay, node: "node2"},
	{rolling: true, stage: "batch-3", fault: faultCut, node: "node3"},
	{stage: "stop-nodes", fault: faultFlap, node: "node1"},
}

// netFaultCases returns the cases to run: the spread, or with CUTOVER_CRASH_ALL=1 every stage
// an upgrade runs and every batch of the rolling run with every fault, on node2.
func netFaultCases(t *testing.T) []netFaultCase {
	if os.Getenv("CUTOVER_CRASH_ALL") != "1" {
		return netFaultSpread
	}
	stages, _ := stagesRun(t, upgrade.Up)
	var out []netFaultCase
	for _, f := range []netFault{faultCut, faultOneWay, faultHeld, faultFlap} {
		for _, st := range stages {
			out = append(out, netFaultCase{stage: st, fault: f, node: "node2"})
		}
		for _, b := range []string{"batch-1", "batch-2", "batch-3"} {
			out = append(out, netFaultCase{rolling: true, stage: b, fault: f, node: "node2"})
		}
	}
	return out
}

// TestNetworkFaultsAtBoundaries makes a node's network fail at a run's stage boundaries, on
// one three-node cluster at 1.1.0, upgrading to 1.2.0 (rolling: batches of one node, node2,
// node3, then the master; max_failed = 0): cut both ways, cut one way, or its connections
// held. Whatever the fault, the run either converges or ends naming its way out:
//   - exit 0 only with every node at the target, links, config and daemon;
//   - exit 1 (nothing changed: rolled back, or refused) only with the cluster exactly as
//     before — also once the fault is lifted and what the network kept back of the run's
//     connections was delivered or given up: nothing acts after the run said it did not;
//   - exit 3 (pending or left behind) naming the command that finishes the work;
//   - the journal never says done while a node is not at the target;
//
// and after the fault is lifted, the advised command converges: every node at one version,
// the source or the target.
func TestNetworkFaultsAtBoundaries(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{Nodes: 3, Live: "1.1.0"})
	const from, to = "1.1.0", "1.2.0"
	all := online(c)
	stages, _ := stagesRun(t, upgrade.Up)
	for _, fc := range netFaultCases(t) {
		if !fc.rolling && !slices.Contains(stages, fc.stage) {
			t.Fatalf("%s: an upgrade runs no stage %q (%v)", fc, fc.stage, stages)
		}
		t.Run(fc.String(), func(t *testing.T) {
			if fc.rolling {
				useRolling(t, c, demo.Rolling{BatchSize: 1, MaxFailed: 0, BatchTimeout: "60s"})
			} else {
				useAllAtOnce(t, c)
			}
			before := snapshot(t, c)
			res, conns := netFaultRun(t, c, fc, "upgrade", "--to="+to, "--yes")
			what := fc.String()
			checkDoneMeansAt(t, c, what, to)
			out := res.Stdout + res.Stderr
			switch res.ExitCode {
			case 0:
				checkAt(t, c, to, all...)
			case 1:
				waitConnectionsClosed(t, conns, fc.node)
				if after := snapshot(t, c); after != before {
					t.Errorf("%s: exit 1 (nothing changed) but the cluster changed:\nbefore:\n%s\nafter:\n%s", what, before, after)
				}
			case 3:
				if advised(out) == "" {
					t.Errorf("%s: exit 3 names no command to finish the work:\n%s", what, out)
				}
			default:
				t.Errorf("%s: exit %d, want 0, 1 or 3\n%s", what, res.ExitCode, out)
			}
			if r := lastRun(t, c); r.Outcome == journal.Running {
				t.Errorf("%s: run %d is still running in the journal", what, r.ID)
			}
			if cmd := advised(out); res.ExitCode == 3 && cmd != "" {
				args := strings.Fields(strings.TrimPrefix(cmd, "cutover "))
				if args[0] == "sync" {
					args = slices.Insert(args, 1, "--yes")
				}
				if res := cutover(t, c, args...); res.ExitCode != 0 {
					t.Fatalf("%s: the advised %q after the fault was lifted: exit %d", what, cmd, res.ExitCode)
				}
			}
			v := converged(t, c, what, from, to)
			if v == to {
				useAllAtOnce(t, c)
				if res := cutover(t, c, "upgrade", "--to="+from, "--yes"); res.ExitCode != 0 {
					t.Fatalf("%s: back to %s: exit %d", what, from, res.ExitCode)
				}
				checkAt(t, c, from, all...)
			}
		})
	}
}

// netFaultRun runs cutover with args, held before fc's stage, makes fc's fault there, lets
// the run go and lifts the fault once it ended. It returns the run's result and the master's
// connections to the node from before the fault (none for a held connection, whose helper
// waits for them itself).
func netFaultRun(t *testing.T, c *cluster.Cluster, fc netFaultCase, args ...string) (cluster.Result, *cluster.Fault) {
	t.Helper()
	ctx := context.Background()
	h := startHeld(t, c, fc.stage, args...)
	switch fc.fault {
	case faultHeld:
		return releaseGoHeld(t, c, h, fc.node), nil
	case faultFlap:
		return flapping(t, c, h, fc.node), nil
	}
	conns, err := c.Connections(ctx, fc.node)
	if err != nil {
		h.release(t, c)
		t.Fatal(err)
	}
	var lift func() error
	switch fc.fault {
	case faultCut:
		err = c.Cut(ctx, fc.node)
		lift = func() error { return c.Heal(ctx, fc.node) }
	case faultOneWay:
		var f *cluster.Fault
		f, err = c.CutOneWay(ctx, fc.node)
		lift = func() error { return f.Lift(ctx) }
	}
	if err != nil {
		h.release(t, c)
		t.Fatal(err)
	}
	res := h.release(t, c)
	if err := lift(); err != nil {
		t.Fatal(err)
	}
	return res, conns
}

// flapping lets the held run h go while node's link goes down and up again, two seconds each
// way, until the run has ended, and returns the run's result with the link up.
func flapping(t *testing.T, c *cluster.Cluster, h *heldRun, node string) cluster.Result {
	t.Helper()
	ctx := context.Background()
	stop, flapped := make(chan struct{}), make(chan error, 1)
	go func() {
		var err error
		defer func() { flapped <- err }()
		for {
			if err = c.Cut(ctx, node); err != nil {
				return
			}
			time.Sleep(2 * time.Second)
			if err = c.Heal(ctx, node); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Second):
			}
		}
	}()
	res := h.release(t, c)
	close(stop)
	if err := <-flapped; err != nil {
		t.Fatalf("flapping %s: %v", node, err)
	}
	return res
}

// waitConnectionsClosed waits until the master's connections to node from before a fault
// have closed (nil: nothing to wait for).
func waitConnectionsClosed(t *testing.T, conns *cluster.Fault, node string) {
	t.Helper()
	if conns == nil || len(conns.Ports) == 0 {
		return
	}
	waitClosed(t, conns, node)
	time.Sleep(2 * time.Second) // what a late request would start, it has started by now
}

// syncCommand finds a sync a run's output names to catch nodes up.
var syncCommand = regexp.MustCompile(`cutover sync(?: node[0-9]+)+`)

// advised returns the command out names to finish a run's work: the resume of a pending run
// where it names one, else a sync; "" for none.
func advised(out string) string {
	if strings.Contains(out, "cutover upgrade --resume") {
		return "cutover upgrade --resume"
	}
	return syncCommand.FindString(out)
}

// converged asserts that every node runs one version, from or to, with no run pending, and
// returns it.
func converged(t *testing.T, c *cluster.Cluster, what, from, to string) string {
	t.Helper()
	checkNoIntent(t, c, what)
	v := strings.TrimPrefix(stateOf(t, c, c.Master).Lib, "/usr/lib/demoapp/")
	if !slices.Contains([]string{from, to}, v) {
		t.Fatalf("%s: the master runs %q, want %s or %s", what, v, from, to)
	}
	checkAt(t, c, v, online(c)...)
	return v
}
