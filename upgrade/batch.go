package upgrade

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cutover/cutover/nodes"
)

// The places of a rolling run's stages.
const (
	OnCanary Where = "canary" // one canary node, alone
	OnBatch  Where = "batch"  // the nodes of one batch, in parallel
)

// batch switches the nodes of one batch of a rolling run while the other nodes serve: per
// node, in parallel, node_drain (on the master), stop, switch, ensure-dirs, start,
// node_undrain and node_verify (on the master), all within batch_timeout. A failed canary, a
// batch over its timeout, or more failed nodes than max_failed fail the stage, so the runner
// switches every batch back; failures within the budget are reported and the run goes on.
type batch struct {
	n, of  int // 1-based position among the batches, and their number
	canary bool
	nodes  []string
	// ponrDown marks the first batch after the canaries: a rolling downgrade crosses its
	// point of no return there, since until then the canaries can be switched back and the
	// config migrated up again (docs/design.md §11).
	ponrDown bool
}

// PONR makes the first batch after the canaries the point of no return of a rolling
// downgrade.
func (b batch) PONR(d Direction) bool { return d == Down && b.ponrDown }

func (b batch) Name() string { return fmt.Sprintf("batch-%d", b.n) }

func (b batch) Where() Where {
	if b.canary {
		return OnCanary
	}
	return OnBatch
}

// StageNodes are the nodes the batch works on.
func (b batch) StageNodes() []string { return b.nodes }

// Once skips a batch that an earlier execution of the run completed: a resumed rolling run
// continues from the first batch not done.
func (batch) Once() bool { return true }

// errBatchTimeout is the cause of a batch's context when batch_timeout runs out.
var errBatchTimeout = errors.New("batch timeout")

// nodeVerifyWait is how long node_verify is retried on a node that just started: at most
// this, and at most half the batch timeout, so that a node that never verifies fails its
// batch rather than timing it out.
var nodeVerifyWait = 20 * time.Second

func (b batch) Run(ctx context.Context, r *Run) error {
	if left, ok := r.Fact(factToleratedPrefix + b.Name()); ok {
		// An earlier execution ended this batch within the failure budget: its failed nodes
		// stay behind for 'cutover sync', and the others are switched. It is never run again.
		r.Note("ended by an earlier execution: %s left behind within strategy.max_failed", left)
		return errSkipped
	}
	list, err := b.list(r)
	if err != nil {
		return err
	}
	timeout := r.Config.Strategy.BatchTimeout.Duration
	bctx, cancel := context.WithTimeoutCause(ctx, timeout, errBatchTimeout)
	defer cancel()
	b.report(r, "started", fmt.Sprintf("%s of %d: %s", b.label(), b.of, strings.Join(b.nodes, ", ")), nil)
	failed, err := b.roll(bctx, r, list)
	switch {
	case err == nil:
		r.Note("%s", strings.Join(b.nodes, ", "))
		b.report(r, "done", b.label()+" done", nil)
		return nil
	case ctx.Err() != nil:
		// Interrupted (a signal): the runner rolls the run back.
		return err
	case errors.Is(context.Cause(bctx), errBatchTimeout):
		// The nodes that did not finish in time are failed nodes like any other (docs/design.md
		// §11): the failure budget decides below, unless they are a canary or the master.
		b.report(r, "timed-out", fmt.Sprintf("%s did not finish within %s: %s", b.label(), timeout, joinNames(failed)), nil)
		err = fmt.Errorf("%s (%s) did not finish within strategy.batch_timeout %s: %w", b.label(), strings.Join(b.nodes, ", "), timeout, err)
	default:
		b.report(r, "failed", fmt.Sprintf("%s: %s failed", b.label(), joinNames(failed)), nil)
	}
	if b.canary {
		return fmt.Errorf("canary %s failed, so no other node is touched: %w", joinNames(failed), err)
	}
	if slices.Contains(failed, r.Inventory.Master) {
		// The master runs the config migration after the last batch: it is never left behind.
		return fmt.Errorf("the master %s failed in %s, and the master is never left behind: %w", r.Inventory.Master, b.Name(), err)
	}
	return b.tolerate(ctx, r, list, failed, err)
}

// roll switches the nodes of list to the run's target in parallel (rollNode), reporting each
// node's end, and returns the nodes that failed: a node that could not be reached, or did not
// finish in time, failed as surely as one whose verify failed, so every node of the batch
// that did not end well counts.
func (b batch) roll(ctx context.Context, r *Run, list []nodes.Node) (failed []string, err error) {
	var mu sync.Mutex
	ok := map[string]bool{}
	err = r.OnNodes(ctx, list, false, func(ctx context.Context, c Conn, n nodes.Node) error {
		start := time.Now()
		err := r.rollNode(ctx, c, n.Name, r.To, true)
		state := "node-ok"
		if err != nil {
			state = "node-failed"
		} else {
			mu.Lock()
			ok[n.Name] = true
			mu.Unlock()
		}
		b.report(r, state, n.Name, []NodeReport{{Node: n.Name, OK: err == nil, Error: errText(err), Duration: time.Since(start)}})
		return err
	})
	for _, n := range list {
		if !ok[n.Name] {
			failed = append(failed, n.Name)
		}
	}
	return failed, err
}

// tolerate ends a batch of list whose failed nodes failed it (err): over the failure budget
// the batch fails; within it the failed nodes are left behind at the source, switched back
// where they can be reached, and the run goes on (a toleratedError); 'cutover sync' catches
// them up later. A node that cannot be switched back is in a state cutover could not confirm
// (cut off after its switch or its start, it may run the target on the source's config): it
// is reported as such, never as left at the source, and journaled for 'cutover status'.
func (b batch) tolerate(ctx context.Context, r *Run, list []nodes.Node, failed []string, err error) error {
	for _, n := range failed {
		if _, lerr := r.Learn(ctx, factFailedPrefix+n, b.Name()); lerr != nil {
			return errors.Join(err, lerr)
		}
	}
	total, budget := factNodes(r.factsCopy(), factFailedPrefix), r.Config.Strategy.MaxFailed
	if len(total) > budget {
		return fmt.Errorf("%s failed: %s failed in this run (%s), more than strategy.max_failed = %d: %w", joinNames(failed), plural(len(total), "node"), joinNames(total), budget, err)
	}
	r.Warn("%s failed (%d of strategy.max_failed = %d): left behind, the run goes on", joinNames(failed), len(total), budget)
	var back []nodes.Node
	for _, n := range list {
		if slices.Contains(failed, n.Name) {
			back = append(back, n)
		}
	}
	var mu sync.Mutex
	var unknown []string
	_ = r.OnNodes(ctx, back, false, func(ctx context.Context, c Conn, n nodes.Node) error {
		err := r.rollNode(ctx, c, n.Name, r.From, false)
		if err != nil {
			mu.Lock()
			unknown = append(unknown, n.Name)
			mu.Unlock()
			r.Warn("%s could not be switched back to %s (%v): its state is unknown; once it is back, 'cutover status' shows where it is and 'cutover sync %s' brings it and its config in line", n.Name, r.From, err, n.Name)
		}
		return err
	})
	slices.Sort(unknown)
	for _, n := range unknown {
		if _, lerr := r.Learn(ctx, factUnknownPrefix+n, b.Name()); lerr != nil {
			return errors.Join(err, lerr)
		}
	}
	if _, lerr := r.Learn(ctx, factToleratedPrefix+b.Name(), strings.Join(failed, ",")); lerr != nil {
		return errors.Join(err, lerr)
	}
	return &toleratedError{nodes: failed, err: err}
}

// Undo switches the batch's nodes back to the version the run started from, each drained,
// stopped, switched, started and undrained again; before the point of no return only (in a
// downgrade, only the canaries come before it).
func (b batch) Undo(ctx context.Context, r *Run) error {
	list, err := b.list(r)
	if err != nil {
		return err
	}
	b.report(r, "undo", fmt.Sprintf("switching %s back to %s", strings.Join(b.nodes, ", "), r.From), nil)
	var never []nodes.Node // nodes no execution switched, which cannot be reached now
	var reach []nodes.Node
	for _, n := range list {
		if _, switched := r.Fact(factSwitchedPrefix + n.Name); !switched {
			if _, err := r.Conn(ctx, n.Name); err != nil {
				never = append(never, n)
				continue
			}
		}
		reach = append(reach, n)
	}
	for _, n := range never {
		r.Warn("%s cannot be reached and was never switched: left as it is; once it is back, 'cutover sync %s' brings it to the cluster's version if it needs it", n.Name, n.Name)
	}
	return r.OnNodes(ctx, reach, false, func(ctx context.Context, c Conn, n nodes.Node) error {
		return r.rollNode(ctx, c, n.Name, r.From, false)
	})
}

// undoStep prefixes the name of a node's step in a batch that switches the node back.
const undoStep = "undo-"

// factUnknownPrefix prefixes the fact that a node failed in a batch (the value) within the
// failure budget and could not be switched back: its state is unknown.
const factUnknownPrefix = "rolling-unknown-"

// factSwitchedPrefix prefixes the fact that a rolling run switched a node to its target.
const factSwitchedPrefix = "rolling-switched-"

// label is how the output names the batch: "batch 1 (canary)" or "batch 3".
func (b batch) label() string {
	if b.canary {
		return fmt.Sprintf("batch %d (canary)", b.n)
	}
	return fmt.Sprintf("batch %d", b.n)
}

// list is the batch's nodes as the inventory knows them.
func (b batch) list(r *Run) ([]nodes.Node, error) {
	var out []nodes.Node
	for _, name := range b.nodes {
		n, ok := r.Inventory.Lookup(name)
		if !ok {
			return nil, fmt.Errorf("%s: %s is no longer a node of the cluster", b.Name(), name)
		}
		if slices.ContainsFunc(r.Offline, func(o nodes.Node) bool { return o.Name == name }) {
			// Declared gone for this run (--skip-node): the batch goes on without it.
			continue
		}
		out = append(out, n)
	}
	return out, nil
}

// rollNode takes one node through a rolling switch to version: node_drain, stop, switch,
// ensure-dirs, start, node_undrain, and when verify is set node_verify, retried for a while
// as a node that just started may need a moment. The node_* commands run on the master.
func (r *Run) rollNode(ctx context.Context, c Conn, node, version string, verify bool) error {
	onMaster := func(op, command string) error {
		if command == "" {
			return nil
		}
		m, err := r.Conn(ctx, r.Inventory.Master)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", node, op, err)
		}
		if _, err := m.RunShell(ctx, r.expand(command, node)); err != nil {
			return fmt.Errorf("%s: %s (on %s): %w", node, op, r.Inventory.Master, err)
		}
		return nil
	}
	cmds := r.Config.Commands
	if err := onMaster("node_drain", cmds.NodeDrain); err != nil {
		return err
	}
	// The stop, the switch, the start and the verify are timed as the node's steps: the
	// timeline of a rolling run draws them (journalview_timeline.go). Switching a node back
	// (no verify) times them as the undo's: "undo-stop", ...
	step := func(name string) string {
		if !verify {
			return undoStep + name
		}
		return name
	}
	began := r.now()
	err := r.daemonsOn(ctx, c, node, false)
	r.stage.timeStep(node, step("stop"), began, r.now())
	if err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	began = r.now()
	err = r.switchNode(ctx, c, node, version)
	r.stage.timeStep(node, step("switch"), began, r.now())
	if err != nil {
		return fmt.Errorf("%s: switch to %s: %w", node, version, err)
	}
	if version == r.To {
		// Journaled at once: an undo in any later execution must know this node needs
		// switching back, even when it cannot be reached then.
		if _, err := r.Learn(ctx, factSwitchedPrefix+node, version); err != nil {
			return fmt.Errorf("%s: %w", node, err)
		}
	}
	if cmds.EnsureDirs != "" {
		if _, err := c.RunShell(ctx, r.expand(cmds.EnsureDirs, node)); err != nil {
			return fmt.Errorf("ensure-dirs: %w", err)
		}
	}
	began = r.now()
	err = r.daemonsOn(ctx, c, node, true)
	r.stage.timeStep(node, step("start"), began, r.now())
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	if err := onMaster("node_undrain", cmds.NodeUndrain); err != nil {
		return err
	}
	if !verify || cmds.NodeVerify == "" {
		return nil
	}
	deadline := time.Now().Add(min(nodeVerifyWait, r.Config.Strategy.BatchTimeout.Duration/2))
	began = r.now()
	defer func() { r.stage.timeStep(node, "verify", began, r.now()) }()
	for {
		err := onMaster("node_verify", cmds.NodeVerify)
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
}

// toleratedError is a batch failure within the failure budget: the runner records it, goes
// on, and ends the run with exit 3 naming the nodes.
type toleratedError struct {
	nodes []string
	err   error
}

func (e *toleratedError) Error() string { return e.err.Error() }

func (e *toleratedError) Unwrap() error { return e.err }

// toleratedErr is the error of a run that is done with nodes left behind within its failure
// budget (exit 3 naming them and the sync that catches them up), or nil.
func (r *Run) toleratedErr() error {
	behind := r.perNode.tolerated(r.factsCopy(), r.Config.Strategy.MaxFailed)
	if len(behind) == 0 {
		return nil
	}
	var at, unknown []string
	for _, n := range behind {
		if _, ok := r.Fact(factUnknownPrefix + n); ok {
			unknown = append(unknown, n)
		} else {
			at = append(at, n)
		}
	}
	var where []string
	if len(at) > 0 {
		where = append(where, fmt.Sprintf("%s left at %s", joinNames(at), r.From))
	}
	if len(unknown) > 0 {
		where = append(where, fmt.Sprintf("%s in a state cutover could not confirm (cut off after its switch or start, it may run %s on %s's config)", joinNames(unknown), r.To, r.From))
	}
	it := "it is"
	if len(behind) > 1 {
		it = "they are"
	}
	return pastPONR(fmt.Errorf("the run is done, but %s failed within strategy.max_failed: %s; once %s back and healthy, run 'cutover sync %s'",
		joinNames(behind), strings.Join(where, "; "), it, strings.Join(behind, " ")))
}

// report reports the batch's progress in run r: started, a node done or failed, done, failed,
// timed out, or undone.
func (b batch) report(r *Run, state, msg string, nodes []NodeReport) {
	r.log.Printf("%s %s: %s", b.Name(), state, msg)
	r.report.Report(Event{Time: time.Now(), Type: "batch", Run: r.ID, Stage: b.Name(), Batch: b.n, Batches: b.of,
		Canary: b.canary, State: state, Message: msg, Nodes: nodes})
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
