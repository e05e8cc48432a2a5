package upgrade

import (
	"context"
	"sync"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/nodes"
)

// nodeResult is one node's outcome in a stage: how it ended, and when its work began and
// ended.
func nodeResult(node string, start, end time.Time, res *nodes.Result, err error) journal.NodeResult {
	nr := journal.NodeResult{Node: node, OK: err == nil, Duration: end.Sub(start), Start: start, End: end}
	if res != nil {
		nr.ExitCode = res.ExitCode
		nr.StderrTail = tail(string(res.Stderr), 512)
	}
	if err != nil {
		nr.Error = err.Error()
	}
	return nr
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
	stop := watchSlow(&r.stage, r.Wait, func() []string {
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
		r.stage.result(nodeResult(n.Name, start, r.now(), res, err))
		mu.Lock()
		delete(pending, n.Name)
		mu.Unlock()
		return err
	})
	return err
}

// watchSlow reports through wait, every waitReportEvery while a fan-out in stage lasts, which
// nodes it still waits for (pending). The returned function stops it.
func watchSlow(stage *stageLog, wait func(format string, args ...any), pending func() []string) (stop func()) {
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
					if name := stage.name(); name != "" {
						wait("%s: waiting for %s to finish", name, joinNames(p))
					} else {
						wait("waiting for %s to finish", joinNames(p))
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
