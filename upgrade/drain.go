package upgrade

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cutover/cutover/nodes"
)

// drain stops new jobs from entering the queue and waits until no job runs or waits. A queue
// that was drained before the run is recorded and left drained afterwards.
type drain struct{}

func (drain) Name() string { return "drain" }

func (drain) Where() Where { return OnMaster }

func (drain) Skip(r *Run) bool { return r.Config.Commands.QueueDrain == "" }

// RestartAt makes a run resumed before its point of no return start again here, once
// everything every execution did has been undone.
func (drain) RestartAt(_ Direction, past bool) bool { return !past }

// drainPoll is how often the queue is asked how many jobs it still has.
var drainPoll = time.Second

func (drain) Run(ctx context.Context, r *Run) error {
	cmds := r.Config.Commands
	if err := awaitDaemons(ctx, r); err != nil {
		return err
	}
	was := "no"
	if cmds.QueueDrained != "" {
		drained, err := probe(ctx, r, cmds.QueueDrained)
		if err != nil {
			return err
		}
		if drained {
			was = "yes"
		}
	}
	was, err := r.Learn(ctx, factQueueDrained, was)
	if err != nil {
		return err
	}
	if _, err := r.OnMaster(ctx, cmds.QueueDrain); err != nil {
		return err
	}
	deadline := time.Now().Add(r.Config.Policy.DrainTimeout.Duration)
	first := -1
	for {
		n, err := queueBusy(ctx, r)
		if err != nil {
			return err
		}
		if first < 0 {
			first = n
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the queue still has %s after drain_timeout %s", plural(n, "job"), r.Config.Policy.DrainTimeout)
		}
		r.Wait("waiting for %s to finish", plural(n, "job"))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(drainPoll):
		}
	}
	if was == "yes" {
		r.Note("was drained before; waited for %s", plural(first, "job"))
	} else {
		r.Note("waited for %s", plural(first, "job"))
	}
	return nil
}

// Undo undrains the queue only when the run learned that it was not drained before: a
// probe cut short learned nothing, and then the drain never ran, so there is nothing to undo.
func (drain) Undo(ctx context.Context, r *Run) error {
	if v, _ := r.Fact(factQueueDrained); v != "no" {
		return nil
	}
	return undrainQueue(ctx, r)
}

const (
	factQueueDrained    = "queue_was_drained"
	factReconcilerPause = "reconciler_was_paused"
)

// queueBusy asks the master how many jobs run or wait.
func queueBusy(ctx context.Context, r *Run) (int, error) {
	c, err := r.Conn(ctx, r.Inventory.Master)
	if err != nil {
		return 0, err
	}
	res, err := c.RunShell(ctx, r.Config.Commands.QueueBusy)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("queue_busy printed %q, not a number of jobs", strings.TrimSpace(string(res.Stdout)))
	}
	return n, nil
}

// probe runs a yes/no command on the master: exit 0 is yes, another exit code is no, and a
// command that could not run is an error.
func probe(ctx context.Context, r *Run, command string) (bool, error) {
	c, err := r.Conn(ctx, r.Inventory.Master)
	if err != nil {
		return false, err
	}
	_, err = c.RunShell(ctx, r.expand(command, r.Inventory.Master))
	if err == nil {
		return true, nil
	}
	if code, ok := nodes.ExitCode(err); ok && code > 0 {
		return false, nil
	}
	return false, err
}
