package upgrade

import (
	"context"
	"fmt"
	"time"

	"github.com/cutover/cutover/journal"
)

// Facts of the automatic rollback ([policy] on_failure = "rollback").
const (
	// factRollback is learned by a failed run before its rollback begins: at most one
	// rollback is ever tried for a run, whatever happens to it.
	factRollback = "rollback"
	// factRollbackRun names, on the failed run, the run that took the cluster back.
	factRollbackRun = "rollback-run"
	// factRollbackOf names, on a rollback run, the run it takes back; a rollback run is
	// never rolled back in turn.
	factRollbackOf = "rollback-of"
)

// rollbackApplies reports whether run r, which ended with err, is to be taken back to its
// source: [policy] on_failure = "rollback", an upgrade run with stages that failed past its
// point of no return (its final verify, or its resume at boot), not itself a rollback, and
// no rollback tried for it before.
func rollbackApplies(r *Run, err error) bool {
	if err == nil || !IsPastPONR(err) || r.Config.Policy.OnFailure != "rollback" || r.Kind != KindUpgrade || r.ID == 0 {
		return false
	}
	if len(r.Failed()) == 0 || r.UndoFailed() {
		return false
	}
	_, tried := r.Fact(factRollback)
	_, isRollback := r.Fact(factRollbackOf)
	return !tried && !isRollback
}

// rollBackFailed takes the cluster from the target of failed run n back to its source by a
// new downgrade (or switch) run through the one path, linked to n in the journal both ways.
// It runs all at once, forcing the health gate (the cluster failed its verify), and only where
// everything a run checks allows it: the path policy, the migrations, every node on n's
// target. cause is n's error. It returns the rollback's Result and the command's error: an
// automatic-rollback error (IsRolledBack) when the cluster is back at the source, otherwise
// one that says why not, with n or the rollback left pending.
func rollBackFailed(ctx context.Context, n *Run, cause error) (*Result, error) {
	start := time.Now()
	if _, err := n.Learn(ctx, factRollback, "tried"); err != nil {
		return nil, fmt.Errorf("%w; the automatic rollback was not tried: %w", cause, err)
	}
	r := &Run{Config: n.Config, Layout: n.Layout, Inventory: n.Inventory, Force: map[string]bool{"unhealthy": true},
		Online: n.Online, Offline: n.Offline, dial: n.dial, report: n.report}
	t, err := newTarget(n.Layout, n.To, n.From)
	if err != nil {
		return nil, fmt.Errorf("%w; the automatic rollback cannot go from %s to %s: %w", cause, n.To, n.From, err)
	}
	r.Target = t
	n.log.Printf("run %d: failed past its point of no return; [policy] on_failure = \"rollback\": a %s run takes %s back to %s", n.ID, t.Direction, n.Config.App, n.From)
	n.report.Report(Event{Time: time.Now(), Type: "rollback", Run: n.ID, Message: fmt.Sprintf(
		"run %d failed past its point of no return; [policy] on_failure = \"rollback\": taking %s back to %s", n.ID, n.Config.App, n.From)})
	res := &Result{App: r.Config.App, From: r.From, To: r.To, Direction: r.Direction, Nodes: len(r.Online)}
	err = execute(ctx, r, recipe{
		kind: KindUpgrade, stages: Stages(), facts: map[string]string{factRollbackOf: fmt.Sprint(n.ID)},
		what:  fmt.Sprintf("rollback of run %d: %s %s %s -> %s", n.ID, r.Direction, r.Config.App, r.From, r.To),
		where: fmt.Sprintf("on %s (master %s)", plural(len(r.Online), "node"), r.Inventory.Master),
		begun: func(ctx context.Context, r *Run) error {
			_, err := n.Learn(ctx, factRollbackRun, fmt.Sprint(r.ID))
			return err
		},
	})
	res.Run, res.Log, res.Backup = r.ID, r.log.Path(), r.Backup
	res.Duration, res.Downtime = time.Since(start), r.perNode.downtime(r.factsCopy())
	switch {
	case err == nil:
		// The failed run is settled: the rollback ended it.
		if ferr := n.journal.Finish(context.WithoutCancel(ctx), n.ID, journal.RolledBack, time.Now()); ferr != nil {
			r.Warn("journal: mark run %d rolled back: %v", n.ID, ferr)
		}
		return res, rolledBack(fmt.Errorf("run %d failed past its point of no return (%s failed); [policy] on_failure = \"rollback\": run %d took %s back to %s, where it runs now; see the logs for the cause",
			n.ID, joinNames(n.Failed()), r.ID, r.Config.App, r.To))
	case IsPastPONR(err):
		return res, pastPONR(fmt.Errorf("%w; the automatic rollback, run %d, failed too: %w", cause, r.ID, err))
	}
	// The rollback stopped before its point of no return and undid what it did, its intent
	// included: the failed run is the pending one again.
	if r.ID != 0 {
		if werr := writeIntent(n); werr != nil {
			return res, pastPONR(fmt.Errorf("%w; the automatic rollback, run %d, did not go through (%w), and the intent of run %d could not be written again: %w; run 'cutover upgrade --resume'", cause, r.ID, err, n.ID, werr))
		}
	}
	return res, pastPONR(fmt.Errorf("%w; the automatic rollback did not go through, nothing of it was kept: %w", cause, err))
}
