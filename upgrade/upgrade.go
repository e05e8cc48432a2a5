package upgrade

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/upgrade/config"
)

// Options are what the operator asked of `cutover upgrade`.
type Options struct {
	// To is the version to move the cluster to.
	To string
	// Force names the skippable checks to override, such as "unhealthy".
	Force []string
	// DryRun runs the read-only stages and reports what the run would do.
	DryRun bool
	// Confirm, when set, is asked after the checks and before the first change.
	Confirm func(ctx context.Context, r *Run) error
	// Reporter receives the run's events; nil reports nothing.
	Reporter Reporter
	// Hostname is the local host's name; "" asks the system.
	Hostname string
	// Watch, when set, is the watch window of the run ([policy] watch otherwise); zero
	// turns the watch off.
	Watch *time.Duration
}

// Forceable are the checks --force may override; nothing else can be forced.
var Forceable = []string{"unhealthy"}

// Result describes a finished run, successful or not.
type Result struct {
	Run       uint64
	App       string
	From, To  string
	Direction Direction
	Nodes     int
	Offline   []string
	Backup    string
	Log       string
	Duration  time.Duration
	// Nothing is true when the cluster already was at the target.
	Nothing bool
	// Downtime is how long the application's daemons were down: the cluster's, the time some
	// node's were (for an all-at-once run from the first stop to the last start), and each
	// node's; never the time they served between two executions of the run.
	Downtime Downtime
	// Batches are the batches of a rolling run; nil for an all-at-once run.
	Batches []Batch
	// WatchEnded is true when `upgrade --abort` ended the run's watch early: the run is done
	// at To.
	WatchEnded bool
	// Watched is true when the run watched the cluster after its finish.
	Watched bool
	// Rollback is the run that took the cluster back to From after this one failed past
	// its point of no return ([policy] on_failure = "rollback"); nil when none ran.
	Rollback *Result
}

// Upgrade moves the cluster described by cfg to opts.To through the whole stage machine. It
// refuses before writing anything when the input is bad (IsBadInput), when this host is not
// the master (IsNotMaster) or when another run holds the lock (journal.IsLocked).
func Upgrade(ctx context.Context, cfg *config.Config, opts Options) (*Result, error) {
	start := time.Now()
	to, force, err := checkTarget(opts.To, opts.Force)
	if err != nil {
		return nil, err
	}
	s, err := openSession(ctx, cfg, modeExclusive, sessionOptions{Reporter: opts.Reporter, Hostname: opts.Hostname, HostCheck: true})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if in := s.intent; in != nil {
		if in.To != opts.To || opts.DryRun || kindOf(in.Kind) != KindUpgrade {
			return nil, fmt.Errorf("%s is pending: %s before switching to %s", pendingName(*in), waysOut(cfg, *in), opts.To)
		}
		// The pending run to the same target is continued under the lock this call holds.
		if err := s.loadPending(ctx); err != nil {
			return nil, err
		}
		return resume(ctx, s, opts.Hostname, DefaultMasterWait)
	}
	r := s.r
	r.Force = force
	from, err := liveVersion(ctx, r)
	if err != nil {
		return nil, err
	}
	if r.Target, err = targetTo(r.Layout, from, to); err != nil {
		return nil, badInput(err)
	}
	res := &Result{App: cfg.App, From: r.From, To: r.To, Direction: r.Direction, Nodes: len(r.Online)}
	for _, n := range r.Offline {
		res.Offline = append(res.Offline, n.Name)
	}
	if r.From == r.To {
		res.Nothing = true
		return res, nil
	}
	if err := r.planRolling(); err != nil {
		return nil, err
	}
	facts := map[string]string{}
	if r.Batches != nil {
		// Every execution of the run works on these batches, whatever the config says later.
		facts[factBatches] = encodeBatches(r.Batches)
	}
	if r.watch = planWatch(cfg.Policy, opts.Watch); r.watch.Window > 0 {
		// And watches as it began, whatever the config says later.
		facts[factWatch] = r.watch.String()
	}
	err = execute(ctx, r, recipe{
		kind: KindUpgrade, stages: r.stages(), facts: facts, dryRun: opts.DryRun, confirm: opts.Confirm,
		what:  fmt.Sprintf("%s %s %s -> %s", r.Direction, cfg.App, r.From, r.To),
		where: fmt.Sprintf("on %s (master %s, offline: %s)", plural(len(r.Online), "node"), r.Inventory.Master, listOrNone(res.Offline)),
	})
	res.Run, res.Log = r.ID, r.log.Path()
	res.Backup = r.Backup
	res.Duration = time.Since(start)
	res.Downtime = r.perNode.downtime(r.factsCopy())
	res.Batches = r.Batches
	res.Watched = r.watch.Window > 0
	if rollbackApplies(r, err) {
		res.Rollback, err = rollBackFailed(ctx, r, err)
	}
	return res, err
}

// checkTarget parses the target version and validates the names of the checks to force, as
// `upgrade --to` and `plan --to` take them, and returns the target and the forced checks as a
// set. It is the one place --to is parsed.
func checkTarget(to string, forced []string) (layout.Version, map[string]bool, error) {
	v, err := layout.ParseVersion(to)
	if err != nil {
		return v, nil, badInput(fmt.Errorf("--to: %w", err))
	}
	force := map[string]bool{}
	for _, f := range forced {
		if !slices.Contains(Forceable, f) {
			return v, nil, badInput(fmt.Errorf("--force=%q: not a check that can be forced (known: %s)", f, strings.Join(Forceable, ", ")))
		}
		force[f] = true
	}
	return v, force, nil
}

// JournalPath is where a cluster's journal lives.
func JournalPath(c *config.Config) string { return filepath.Join(c.Paths.StateDir, "journal.db") }

// LockPath is the run lock of a cluster.
func LockPath(c *config.Config) string { return filepath.Join(c.Paths.StateDir, "lock") }

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
