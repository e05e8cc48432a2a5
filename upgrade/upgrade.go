package upgrade

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cutover/cutover/journal"
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
	// Downtime is how long the application's daemons were down: the cluster's window from
	// the first stop to the last start, and each node's.
	Downtime Downtime
	// Batches are the batches of a rolling run; nil for an all-at-once run.
	Batches []Batch
}

// Upgrade moves the cluster described by cfg to opts.To through the whole stage machine. It
// refuses before writing anything when the input is bad (IsBadInput), when this host is not
// the master (IsNotMaster) or when another run holds the lock (journal.IsLocked).
func Upgrade(ctx context.Context, cfg *config.Config, opts Options) (*Result, error) {
	start := time.Now()
	force, err := checkTarget(opts.To, opts.Force)
	if err != nil {
		return nil, err
	}
	s, err := openSession(ctx, cfg, modeExclusive, sessionOptions{Reporter: opts.Reporter, Hostname: opts.Hostname, HostCheck: true})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if in := s.intent; in != nil {
		if in.To != opts.To || opts.DryRun {
			return nil, fmt.Errorf("run %d (%s -> %s) is pending: continue it with 'cutover upgrade --resume' or undo it with 'cutover upgrade --abort' before switching to %s", in.RunID, in.From, in.To, opts.To)
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
	if r.Target, err = newTarget(r.Layout, from, opts.To); err != nil {
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
	stages := r.stages()
	if opts.DryRun {
		rn := &Runner{Stages: stages[:readOnlyHead(stages)]}
		err := rn.Execute(ctx, r)
		res.Duration = time.Since(start)
		return res, err
	}

	r.report.Report(Event{Time: time.Now(), Type: "run", Message: fmt.Sprintf("%s %s %s -> %s on %s (master %s, offline: %s)",
		r.Direction, cfg.App, r.From, r.To, plural(len(r.Online), "node"), r.Inventory.Master, listOrNone(res.Offline))})
	// The run enters the journal once its checks passed and the operator said yes: a refusal
	// or a declined prompt leaves no run behind.
	begin := func(ctx context.Context, r *Run) error {
		if opts.Confirm != nil {
			if err := opts.Confirm(ctx, r); err != nil {
				return err
			}
		}
		if err := beginUpgrade(ctx, r, res); err != nil {
			return err
		}
		return nil
	}
	defer func() { r.log.Close() }()

	rn := &Runner{Stages: stages, Confirm: begin}
	err = rn.Execute(ctx, r)
	res.Backup = r.Backup
	res.Duration = time.Since(start)
	res.Downtime = r.downtime()
	res.Batches = r.Batches
	return res, err
}

// beginUpgrade records a new upgrade run in the journal, with its batches, tags its
// commands and opens its log.
func beginUpgrade(ctx context.Context, r *Run, res *Result) error {
	cfg := r.Config
	store := journal.NewStore(JournalPath(cfg))
	closeOrphans(ctx, store, r)
	host, _ := os.Hostname()
	j := crashJournal{store}
	jr, err := j.CreateRun(ctx, journal.Run{Kind: "upgrade", From: r.From, To: r.To, Direction: string(r.Direction), Host: host, PID: os.Getpid(), Offline: res.Offline})
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	r.ID, r.journal = jr.ID, j
	res.Run = jr.ID
	if r.Batches != nil {
		// Every execution of the run works on these batches, whatever the config says later.
		if _, err := r.Learn(ctx, factBatches, encodeBatches(r.Batches)); err != nil {
			return err
		}
	}
	if err := r.tagCommands(); err != nil {
		return err
	}
	if r.log, err = openRunLog(cfg.Paths.StateDir, r.ID); err != nil {
		return err
	}
	res.Log = r.log.Path()
	r.log.Printf("run %d: %s %s -> %s (%s) on %d nodes, offline: %v", r.ID, cfg.App, r.From, r.To, r.Direction, len(r.Online), res.Offline)
	r.report.Report(Event{Time: time.Now(), Type: "run", Run: r.ID, Message: fmt.Sprintf("run %d: %s %s %s -> %s",
		r.ID, r.Direction, cfg.App, r.From, r.To)})
	return nil
}

// checkTarget validates the target version and the names of the checks to force, as
// `upgrade --to` and `plan --to` take them, and returns the forced checks as a set.
func checkTarget(to string, forced []string) (map[string]bool, error) {
	if err := layout.ValidVersion(to); err != nil {
		return nil, badInput(fmt.Errorf("--to: %w", err))
	}
	force := map[string]bool{}
	for _, f := range forced {
		if !slices.Contains(Forceable, f) {
			return nil, badInput(fmt.Errorf("--force=%q: not a check that can be forced (known: %s)", f, strings.Join(Forceable, ", ")))
		}
		force[f] = true
	}
	return force, nil
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

// closeOrphans ends the journal's runs that are still marked running although no intent names
// them (the caller holds the lock and found no intent): an upgrade killed before it wrote its
// intent, which changed nothing, or an interrupted sync, which is finished by running it again.
func closeOrphans(ctx context.Context, store *journal.Store, r *Run) {
	runs, err := store.Runs(ctx)
	if err != nil {
		return
	}
	for _, old := range runs {
		if old.Outcome != journal.Running {
			continue
		}
		if err := (crashJournal{store}).Finish(ctx, old.ID, journal.Aborted, time.Now()); err != nil {
			continue
		}
		switch old.Kind {
		case "sync":
			r.Warn("sync run %d was interrupted; it is marked aborted in the journal: run the same sync again to finish it", old.ID)
		case "restore":
			r.Warn("restore run %d (%s) was interrupted and may have restored part of the archive; it is marked aborted in the journal: run the same 'cutover backup restore' again to finish it", old.ID, old.Facts["archive"])
		default:
			r.Warn("run %d was interrupted before it changed anything; it is marked aborted in the journal", old.ID)
		}
	}
}
