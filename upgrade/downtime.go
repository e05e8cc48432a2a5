package upgrade

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// The downtime of a run: on each node, the time its daemons were down, from the moment their
// stop command started to the moment their start command ended; for the cluster, the time
// some node's daemons were down (the union of the nodes' intervals: for an all-at-once run,
// from the first stop to the last start). The first stop of a node is journaled as a fact
// (down.<node>), and so is its first start (up.<node>), so a resumed run counts from the first
// execution's stop and never counts the time the daemons served between an earlier
// execution's start and this execution's stop; the facts of a stage's nodes are journaled
// together as the stage ends (Run.Remember), so a stage stopped by a crash leaves a resumed
// run to count those nodes from its own stop or to its own start. The figures are journaled
// when the run ends.
const (
	factDownPrefix = "down."
	factUpPrefix   = "up."
	factDowntime   = "downtime"
)

// stoppingAt records that this execution stops node's daemons now: the node's first stop is
// journaled (down.<node>), this execution's last one kept in memory.
func (r *Run) stoppingAt(node string) {
	now := r.now()
	r.Remember(factDownPrefix+node, now.UTC().Format(time.RFC3339Nano))
	r.perNode.stopping(node, now)
}

// startedAt records that node's daemons were started: the node's first start is journaled
// (up.<node>), so that a later execution knows since when they served.
func (r *Run) startedAt(node string) {
	r.Remember(factUpPrefix+node, r.now().UTC().Format(time.RFC3339Nano))
}

// Downtime is the downtime of a run: the cluster's, the time some node's daemons were down
// (for an all-at-once run, from the first stop to the last start), and each node's, the time
// its daemons were down. A time the daemons served between two executions of the run counts
// in neither. Nodes whose daemons were stopped but never started again are left out, and so
// is a run that stopped nothing.
type Downtime struct {
	Cluster time.Duration
	Nodes   map[string]time.Duration
}

// Longest is the longest downtime of a single node: what a client of a rolling run, served by
// the other nodes meanwhile, sees at most.
func (d Downtime) Longest() time.Duration {
	var m time.Duration
	for _, v := range d.Nodes {
		m = max(m, v)
	}
	return m
}

// interval is one stretch of time a node's daemons were down.
type interval struct{ from, to time.Time }

// downIntervals returns the stretches node's daemons were down over every execution of the
// run, from the journaled first stop and first start and this execution's last stop and
// start; none when they were never started again. facts are the run's. Called with s.mu held.
func (s *nodeState) downIntervals(node string, facts map[string]string) []interval {
	parse := func(key string) (time.Time, bool) {
		v, ok := facts[key]
		if !ok {
			return time.Time{}, false
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		return t, err == nil
	}
	first, ok := parse(factDownPrefix + node)
	if !ok {
		return nil
	}
	served, servedOK := parse(factUpPrefix + node) // the first start, of any execution
	up, upOK := s.up[node]                         // this execution's last start
	stop, stopOK := s.down[node]                   // this execution's last stop
	switch {
	case !upOK && !servedOK:
		return nil // stopped, never started again
	case !upOK:
		return []interval{{first, served}}
	case servedOK && served.Before(up) && stopOK && stop.After(served):
		// Started in an earlier execution (or earlier in this one), served, stopped again in
		// this one: the time in between is no downtime.
		return []interval{{first, served}, {stop, up}}
	case servedOK && served.Before(up) && !stopOK:
		// Started in an earlier execution and started again in this one without a stop:
		// the daemons served since the first start.
		return []interval{{first, served}}
	}
	return []interval{{first, up}}
}

// downtime computes the run's downtime so far from its facts and this execution's stops and
// starts.
func (s *nodeState) downtime(facts map[string]string) Downtime {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := Downtime{Nodes: map[string]time.Duration{}}
	var all []interval
	for k := range facts {
		node, ok := strings.CutPrefix(k, factDownPrefix)
		if !ok {
			continue
		}
		ivs := s.downIntervals(node, facts)
		if len(ivs) == 0 {
			continue
		}
		var sum time.Duration
		for _, iv := range ivs {
			if iv.to.After(iv.from) {
				sum += iv.to.Sub(iv.from)
				all = append(all, iv)
			}
		}
		d.Nodes[node] = sum
	}
	d.Cluster = unionLength(all)
	return d
}

// unionLength is how long at least one of ivs lasts.
func unionLength(ivs []interval) time.Duration {
	sort.Slice(ivs, func(i, j int) bool { return ivs[i].from.Before(ivs[j].from) })
	var total time.Duration
	var cur interval
	for i, iv := range ivs {
		switch {
		case i == 0:
			cur = iv
		case !iv.from.After(cur.to):
			if iv.to.After(cur.to) {
				cur.to = iv.to
			}
		default:
			total += cur.to.Sub(cur.from)
			cur = iv
		}
	}
	if len(ivs) > 0 {
		total += cur.to.Sub(cur.from)
	}
	return total
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
