package upgrade

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/nodes"
)

// timeStep records that step of node's work in the current stage ran from start to now; the
// node's result carries it into the journal with the stage's end.
func (r *Run) timeStep(node, step string, start time.Time) {
	end := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stage == nil {
		return
	}
	if r.stage.steps == nil {
		r.stage.steps = map[string][]journal.Step{}
	}
	r.stage.steps[node] = append(r.stage.steps[node], journal.Step{Name: step, Start: start, End: end})
}

// result records one node's outcome in the current stage: how it ended, when its work began
// and ended, and the steps timed meanwhile.
func (r *Run) result(node string, start, end time.Time, res *nodes.Result, err error) {
	nr := journal.NodeResult{Node: node, OK: err == nil, Duration: end.Sub(start), Start: start, End: end}
	if res != nil {
		nr.ExitCode = res.ExitCode
		nr.StderrTail = tail(string(res.Stderr), 512)
	}
	if err != nil {
		nr.Error = err.Error()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stage == nil {
		return
	}
	nr.Steps = r.stage.steps[node]
	delete(r.stage.steps, node)
	// A stage that works on a node twice (a start, then the check of the daemons) reports it
	// once: from the first start to the last end.
	for i, prev := range r.stage.nodes {
		if prev.Node == node {
			merged := nr
			if !prev.OK {
				merged = prev
			}
			merged.Duration = prev.Duration + nr.Duration
			merged.Start, merged.End = prev.Start, nr.End
			if nr.Start.Before(prev.Start) {
				merged.Start = nr.Start
			}
			if prev.End.After(nr.End) {
				merged.End = prev.End
			}
			merged.Steps = append(slices.Clip(prev.Steps), nr.Steps...)
			r.stage.nodes[i] = merged
			return
		}
	}
	r.stage.nodes = append(r.stage.nodes, nr)
}

// OnNodes runs fn on every node of list, at most ssh.parallel at once, the master last when
// masterLast is set, recording each node's result; the error joins the failed nodes' errors.
func (r *Run) OnNodes(ctx context.Context, list []nodes.Node, masterLast bool, fn func(ctx context.Context, c Conn, n nodes.Node) error) error {
	last := ""
	if masterLast {
		last = r.Inventory.Master
	}
	var mu sync.Mutex
	pending := map[string]bool{}
	for _, n := range list {
		pending[n.Name] = true
	}
	stop := r.watchSlow(func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, n := range list {
			if pending[n.Name] {
				out = append(out, n.Name)
			}
		}
		return out
	})
	defer stop()
	_, err := nodes.Each(ctx, list, r.Config.SSH.Parallel, last, func(ctx context.Context, n nodes.Node) error {
		start := r.now()
		c, err := r.Conn(ctx, n.Name)
		if err == nil {
			err = fn(ctx, c, n)
		}
		var res *nodes.Result
		if lr, ok := c.(*loggedConn); ok {
			res = lr.last()
		}
		r.result(n.Name, start, r.now(), res, err)
		mu.Lock()
		delete(pending, n.Name)
		mu.Unlock()
		return err
	})
	return err
}

// watchSlow reports, every waitReportEvery while a fan-out lasts, which nodes it still waits
// for. The returned function stops it.
func (r *Run) watchSlow(pending func() []string) (stop func()) {
	done := make(chan struct{})
	every := waitReportEvery // read here: a goroutine left from a fan-out must not read it later
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if p := pending(); len(p) > 0 {
					if stage := r.currentStage(); stage != "" {
						r.Wait("%s: waiting for %s to finish", stage, joinNames(p))
					} else {
						r.Wait("waiting for %s to finish", joinNames(p))
					}
				}
			}
		}
	}()
	return func() { close(done) }
}

// Command runs one of the configured commands on every node of list (see OnNodes). An empty
// command is not configured and does nothing.
func (r *Run) Command(ctx context.Context, list []nodes.Node, masterLast bool, command string) error {
	if command == "" {
		return nil
	}
	return r.OnNodes(ctx, list, masterLast, func(ctx context.Context, c Conn, n nodes.Node) error {
		_, err := c.RunShell(ctx, r.expand(command, n.Name))
		return err
	})
}

// OnMaster runs a configured command on the master and returns its result.
func (r *Run) OnMaster(ctx context.Context, command string) (nodes.Result, error) {
	var out nodes.Result
	err := r.OnNodes(ctx, []nodes.Node{r.MasterNode()}, false, func(ctx context.Context, c Conn, n nodes.Node) error {
		res, err := c.RunShell(ctx, r.expand(command, n.Name))
		out = res
		return err
	})
	return out, err
}
