package upgrade

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/nodes"
)

// ResumeOptions are what `cutover upgrade --resume` needs besides the config.
type ResumeOptions struct {
	Reporter Reporter
	// Hostname is the local host's name; "" asks the system.
	Hostname string
	// MasterWait bounds how long the master check retries while nodes come up after a boot.
	MasterWait time.Duration
}

// DefaultMasterWait is how long a resume waits for a majority of nodes to answer.
const DefaultMasterWait = 5 * time.Minute

// masterRetry is the pause between two rounds of the master check.
var masterRetry = 2 * time.Second

// Resume continues the run the intent file names. Without an intent it does nothing and
// returns a Result with Nothing set: it runs at every boot. It goes on only if more than half
// of all nodes name this host as master; if a majority names another host, the intent is
// archived in the journal and removed (IsNotMaster). Before the point of no return the run is
// redone from the drain; after it, the daemons are stopped everywhere first and the run goes
// on from the switch, every stage checking the real state.
func Resume(ctx context.Context, cfg *Config, opts ResumeOptions) (*Result, error) {
	start := time.Now()
	r, jr, cleanup, err := loadPending(ctx, cfg, opts.Reporter, opts.Hostname, false)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return &Result{App: cfg.App, Nothing: true}, nil
	}
	defer cleanup()
	res := r.summary()

	wait := opts.MasterWait
	if wait == 0 {
		wait = DefaultMasterWait
	}
	if err := confirmMaster(ctx, r, opts.Hostname, wait); err != nil {
		if IsNotMaster(err) {
			r.log.Printf("run %d: %v: archived", r.ID, err)
			if ferr := r.journal.Finish(ctx, r.ID, journal.Archived, time.Now()); ferr != nil {
				return res, errors.Join(err, ferr)
			}
			if rerr := journal.RemoveIntent(IntentPath(cfg)); rerr != nil {
				return res, errors.Join(err, rerr)
			}
			err = fmt.Errorf("%w; run %d was archived in the journal and its intent removed", err, r.ID)
		}
		return res, err
	}
	if jr.Outcome != journal.Running {
		// A run that failed past the point of no return is taken up again.
		if err := r.journal.Finish(ctx, r.ID, journal.Running, time.Time{}); err != nil {
			return res, fmt.Errorf("journal: %w", err)
		}
	}

	stages := Stages()
	rn := &Runner{Stages: stages}
	ponr := ponrStageName(r.Direction)
	r.log.Printf("run %d resumed: %s -> %s (%s), point of no return %s reached: %v", r.ID, r.From, r.To, r.Direction, ponr, jr.Reached(ponr))
	r.report.Report(Event{Time: time.Now(), Type: "run", Run: r.ID, Message: fmt.Sprintf("resuming run %d: %s %s -> %s", r.ID, cfg.App, r.From, r.To)})
	if jr.Reached(ponr) {
		rn.Past = true
		rn.Prelude = []Stage{stopAll{}}
		rn.Start = min(indexOf(stages, "switch"), indexOf(stages, ponr))
	} else {
		rn.Start = indexOf(stages, "drain")
		for _, st := range stages[:rn.Start] {
			if _, ok := r.prev[st.Name()]; ok {
				rn.Done = append(rn.Done, st)
			}
		}
	}
	err = rn.Execute(ctx, r)
	res.Backup = r.factValue("backup")
	res.Duration = time.Since(start)
	return res, err
}

// loadPending prepares the pending run the intent names: setup (with the master check by host
// name when hostCheck is set), the run's journal record and facts, its log. Without an intent it
// returns a nil Run and no error.
func loadPending(ctx context.Context, cfg *Config, rep Reporter, hostname string, hostCheck bool) (*Run, journal.Run, func(), error) {
	in, err := journal.ReadIntent(IntentPath(cfg))
	if journal.NoIntent(err) {
		return nil, journal.Run{}, nil, nil
	}
	if err != nil {
		return nil, journal.Run{}, nil, err
	}
	r, cleanup, err := setup(ctx, cfg, rep, hostname, hostCheck)
	if err != nil {
		return nil, journal.Run{}, nil, err
	}
	store := journal.NewStore(JournalPath(cfg))
	jr, err := store.Run(ctx, in.RunID)
	if err == nil {
		r.log, err = openRunLog(cfg.Paths.StateDir, jr.ID)
	}
	if err != nil {
		cleanup()
		return nil, journal.Run{}, nil, fmt.Errorf("intent %s names run %d: %w", IntentPath(cfg), in.RunID, err)
	}
	r.ID, r.journal = jr.ID, store
	r.From, r.To, r.Direction, r.Resumed = in.From, in.To, Direction(in.Direction), true
	r.facts = jr.Facts
	r.prev = map[string]journal.State{}
	for _, e := range jr.Events {
		r.prev[e.Stage] = e.State
	}
	return r, jr, func() { r.log.Close(); cleanup() }, nil
}

// summary is the Result of a run so far.
func (r *Run) summary() *Result {
	res := &Result{Run: r.ID, App: r.Config.App, From: r.From, To: r.To, Direction: r.Direction,
		Nodes: len(r.Online), Log: r.log.Path(), Backup: r.factValue("backup")}
	for _, n := range r.Offline {
		res.Offline = append(res.Offline, n.Name)
	}
	return res
}

// factValue returns the fact learned under key, or "".
func (r *Run) factValue(key string) string {
	v, _ := r.Fact(key)
	return v
}

// ponrStageName names the stage that is the point of no return of a run in direction d.
func ponrStageName(d Direction) string {
	switch d {
	case Up:
		return "config-upgrade"
	case Down:
		return "config-downgrade"
	}
	return "switch"
}

func indexOf(stages []Stage, name string) int {
	for i, st := range stages {
		if st.Name() == name {
			return i
		}
	}
	return len(stages)
}

// confirmMaster asks every node, offline ones included, which host is the master, until more
// than half of them name this host or wait runs out. A majority naming another host is an
// IsNotMaster error; no majority either way keeps the run pending.
func confirmMaster(ctx context.Context, r *Run, hostname string, wait time.Duration) error {
	if hostname == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("host name: %w", err)
		}
		hostname = h
	}
	if r.Config.Cluster.MasterCommand == "" {
		return CheckMaster(r.Config, hostname)
	}
	all := r.Inventory.Nodes
	deadline := time.Now().Add(wait)
	for {
		votes := map[string]int{}
		var errs []error
		_, _ = nodes.Each(ctx, all, r.Config.SSH.Parallel, "", func(ctx context.Context, n nodes.Node) error {
			c, err := r.dial.Conn(ctx, n.Name)
			if err == nil {
				var res nodes.Result
				if res, err = c.RunShell(ctx, r.Config.Cluster.MasterCommand); err == nil {
					r.mu.Lock()
					votes[shortName(strings.TrimSpace(string(res.Stdout)))]++
					r.mu.Unlock()
					return nil
				}
			}
			r.mu.Lock()
			errs = append(errs, onNode(n.Name, err))
			r.mu.Unlock()
			return err
		})
		me := shortName(hostname)
		half := len(all) / 2
		if votes[me] > half {
			r.log.Printf("master check: %d of %d nodes name %s", votes[me], len(all), me)
			return nil
		}
		for host, n := range votes {
			if host != me && n > half {
				return notMaster(fmt.Errorf("%d of %d nodes name %s as the master, not this host %s", n, len(all), host, hostname))
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("no majority of the %d nodes confirms this host %s as the master (%d do, %d did not answer: %w); the run stays pending", len(all), hostname, votes[me], len(errs), errors.Join(errs...))
		}
		r.Wait("master check: %d of %d nodes name this host, waiting for more to answer", votes[me], len(all))
		select {
		case <-ctx.Done():
		case <-time.After(masterRetry):
		}
	}
}

func shortName(s string) string { return strings.SplitN(s, ".", 2)[0] }
