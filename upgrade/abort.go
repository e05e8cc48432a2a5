package upgrade

import (
	"context"
	"fmt"
	"time"

	"github.com/cutover/cutover/journal"
)

// AbortOptions are what `cutover upgrade --abort` needs besides the config.
type AbortOptions struct {
	Reporter Reporter
	// Hostname is the local host's name; "" asks the system.
	Hostname string
}

// Abort undoes the pending run the intent file names, in reverse stage order, if it has not
// reached its point of no return; a run past it is refused: it can only go forward. Without
// a pending run it does nothing (Result.Nothing).
func Abort(ctx context.Context, cfg *Config, opts AbortOptions) (*Result, error) {
	start := time.Now()
	in, err := journal.ReadIntent(IntentPath(cfg))
	if journal.NoIntent(err) {
		return &Result{App: cfg.App, Nothing: true}, nil
	}
	if err != nil {
		return nil, err
	}
	r, cleanup, err := setup(ctx, cfg, opts.Reporter, opts.Hostname, true)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	store := journal.NewStore(JournalPath(cfg))
	jr, err := store.Run(ctx, in.RunID)
	if err != nil {
		return nil, fmt.Errorf("intent %s names run %d: %w", IntentPath(cfg), in.RunID, err)
	}
	r.ID, r.journal = jr.ID, store
	r.From, r.To, r.Direction, r.Resumed = in.From, in.To, Direction(in.Direction), true
	r.facts = jr.Facts
	res := &Result{Run: r.ID, App: cfg.App, From: r.From, To: r.To, Direction: r.Direction, Nodes: len(r.Online)}
	if ponr := ponrStageName(r.Direction); jr.Reached(ponr) {
		ev, _ := jr.LastEvent(ponr)
		return res, fmt.Errorf("run %d is past its point of no return (%s started %s): it cannot be undone, only finished with 'cutover upgrade --resume'",
			r.ID, ponr, ev.At.UTC().Format(time.RFC3339))
	}
	if r.log, err = openRunLog(cfg.Paths.StateDir, r.ID); err != nil {
		return nil, err
	}
	defer r.log.Close()
	res.Log = r.log.Path()
	r.log.Printf("run %d: abort requested", r.ID)
	r.report.Report(Event{Time: time.Now(), Type: "run", Run: r.ID, Message: fmt.Sprintf("aborting run %d: %s %s -> %s", r.ID, cfg.App, r.From, r.To)})

	// Every stage that started, in order, is undone in reverse: an interrupted stage may have
	// done part of its work.
	rn := &Runner{Stages: Stages()}
	for _, st := range rn.Stages {
		if jr.Reached(st.Name()) {
			rn.Done = append(rn.Done, st)
		}
	}
	err = rn.Abort(ctx, r)
	res.Duration = time.Since(start)
	return res, err
}
