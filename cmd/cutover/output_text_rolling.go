package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/cutover/cutover/upgrade"
)

// batchLine shows a rolling run's batch event: the batch starting, each node done or failed,
// a batch over its timeout, a batch switched back. The stage line that follows says how the
// batch ended.
func (o *textOutput) batchLine(e upgrade.Event) {
	switch e.State {
	case "started", "timed-out", "undo":
		fmt.Fprintf(o.w, "        %s\n", e.Message)
	case "node-ok":
		for _, n := range e.Nodes {
			fmt.Fprintf(o.w, "          %-16s ok      %6s\n", n.Node, seconds(n.Duration))
		}
	case "node-failed":
		// The batch's stage line and its node lines say why.
		for _, n := range e.Nodes {
			fmt.Fprintf(o.w, "          %-16s FAILED  %6s\n", n.Node, seconds(n.Duration))
		}
	}
}

// rollingDowntime ends a rolling run's summary line: the batches, and the longest time any
// one node's daemons were down (the others served meanwhile).
func (o *textOutput) rollingDowntime(res *upgrade.Result) {
	fmt.Fprintf(o.w, "; %s", count(len(res.Batches), "batch"))
	var longest time.Duration
	var node string
	names := make([]string, 0, len(res.Downtime.Nodes))
	for n := range res.Downtime.Nodes {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if d := res.Downtime.Nodes[n]; d > longest {
			longest, node = d, n
		}
	}
	if longest > 0 {
		fmt.Fprintf(o.w, ", each node down at most %s (%s)", seconds(longest), node)
	}
}

// printRollingStatus shows, under a pending rolling run, how far each batch got: the
// cluster runs both versions until the last batch is done.
func printRollingStatus(w io.Writer, batches []upgrade.BatchStatus) {
	if len(batches) == 0 {
		return
	}
	fmt.Fprintln(w, "  rolling, the cluster runs both versions meanwhile:")
	for _, b := range batches {
		what := "batch "
		if b.Canary {
			what = "canary"
		}
		state := b.State
		if state == "" {
			state = "waiting"
		}
		fmt.Fprintf(w, "    %-8s %s %-10s %s\n", b.Stage, what, state, strings.Join(b.Nodes, ", "))
	}
}
