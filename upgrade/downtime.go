package upgrade

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cutover/cutover/nodes"
)

// The downtime window of a run: on each node, from the moment its daemons' stop command
// started to the moment its last start command ended; for the cluster, from the first stop to
// the last start. The first stop of a node is journaled as a fact (down.<node>), so a resumed
// run counts from the first execution's stop; the facts of a stage's nodes are journaled
// together as the stage ends (Run.Remember), so a stage stopped by a crash leaves a resumed
// run to count those nodes from its own stop. The window is journaled when the run ends.
const (
	factDownPrefix = "down."
	factDowntime   = "downtime"
)

// daemons runs the daemons' stop (start false) or start command on every node of list and
// records the downtime window. A start runs the start command on every node first and only
// then checks each node that started for daemons of another version (settleDaemons): the
// window closes with the last start, not with the last check queued behind it when the
// cluster has more nodes than ssh.parallel.
func (r *Run) daemons(ctx context.Context, list []nodes.Node, start bool) error {
	command := r.Config.Commands.DaemonsStop
	if start {
		command = r.Config.Commands.DaemonsStart
	}
	if command == "" {
		return nil
	}
	if !start {
		return r.OnNodes(ctx, list, false, func(ctx context.Context, c Conn, n nodes.Node) error {
			return r.daemonsOn(ctx, c, n.Name, false)
		})
	}
	var mu sync.Mutex
	started := map[string]bool{}
	err := r.OnNodes(ctx, list, false, func(ctx context.Context, c Conn, n nodes.Node) error {
		if _, err := r.daemonCommand(ctx, c, n.Name, true); err != nil {
			return err
		}
		mu.Lock()
		started[n.Name] = true
		mu.Unlock()
		return nil
	})
	var check []nodes.Node
	for _, n := range list {
		if started[n.Name] {
			check = append(check, n)
		}
	}
	return errors.Join(err, r.checkDaemons(ctx, check))
}

// daemonsOn runs the daemons' stop or start command on one node and records the window. After
// a stop it records the node's boot identity, the one the stop ran in; after a start it checks
// that no daemon of another version runs and that the node did not boot meanwhile
// (settleDaemons).
func (r *Run) daemonsOn(ctx context.Context, c Conn, node string, start bool) error {
	command := r.Config.Commands.DaemonsStop
	if start {
		command = r.Config.Commands.DaemonsStart
	}
	if command == "" {
		return nil
	}
	if !start {
		r.Remember(factDownPrefix+node, time.Now().UTC().Format(time.RFC3339Nano))
	}
	res, err := r.daemonCommand(ctx, c, node, start)
	if err != nil {
		return err
	}
	if !start {
		// A stop that ran in the node's command shell ran in the boot the shell knows: no read.
		boot := res.Boot
		if boot == "" {
			boot = r.readBoot(c, node)
		}
		r.stoppedAt(node, boot)
		return nil
	}
	return r.settleDaemons(ctx, c, node)
}

// Downtime is the downtime window of a run: the cluster's, from the first stop to the last
// start, and each node's. Nodes whose daemons were stopped but not started again are left
// out, and so is a run that stopped nothing.
type Downtime struct {
	Cluster time.Duration
	Nodes   map[string]time.Duration
}

// downtime computes the run's downtime window so far.
func (r *Run) downtime() Downtime {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := Downtime{Nodes: map[string]time.Duration{}}
	var first, last time.Time
	for k, v := range r.facts {
		node, ok := strings.CutPrefix(k, factDownPrefix)
		if !ok {
			continue
		}
		down, err := time.Parse(time.RFC3339Nano, v)
		up, started := r.up[node]
		if err != nil || !started {
			continue
		}
		d.Nodes[node] = up.Sub(down)
		if first.IsZero() || down.Before(first) {
			first = down
		}
		if up.After(last) {
			last = up
		}
	}
	if !first.IsZero() {
		d.Cluster = last.Sub(first)
	}
	return d
}

// String is the window as the journal keeps it: "12.1s (node1 10.2s, node2 11.9s)".
func (d Downtime) String() string {
	names := make([]string, 0, len(d.Nodes))
	for n := range d.Nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %s", n, d.Nodes[n].Round(time.Millisecond))
	}
	return fmt.Sprintf("%s (%s)", d.Cluster.Round(time.Millisecond), strings.Join(parts, ", "))
}
