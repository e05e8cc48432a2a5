package upgrade

import (
	"context"

	"fmt"
	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/upgrade/config"
	"time"
)

// AbortOptions are what `cutover upgrade --abort` needs besides the config.
type AbortOptions struct {
	Reporter Reporter
	// Hostname is the local host's name; "" asks the system.
	Hostname string
	// SkipNodes are nodes declared gone for the rest of the run (--skip-node): the undo
	// leaves them as they are.
	SkipNodes []string
}

// Abort undoes the pending run the intent file names, in reverse stage order, every stage any
// execution of it started, if it has not crossed its point of no return; a run past it is
// refused (IsPastPONR: the run stays pending and can only go forward). Without a pending run
// it does nothing (Result.Nothing).
func Abort(ctx context.Context, cfg *config.Config, opts AbortOptions) (*Result, error) {
	start := time.Now()
	s, err := openSession(ctx, cfg, modePending, sessionOptions{Reporter: opts.Reporter, Hostname: opts.Hostname, HostCheck: true})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if s.intent == nil {
		if len(opts.SkipNodes) > 0 {
			return nil, badInput(fmt.Errorf("--skip-node: no run is pending; nothing was touched"))
		}
		return &Result{App: cfg.App, Nothing: true}, nil
	}
	r, jr := s.r, s.jr
	res := r.summary()
	if done, err := leftIntent(ctx, r, jr); done {
		return res, err
	}
	stages, _ := s.pendingStages() // an abort undoes what it can without the archive of a restore
	if r.pastPONR && jr.Travel == journal.Forward && r.watch.Window > 0 && r.history.doneBefore((finish{}).Name()) {
		err := endWatchEarly(ctx, r, stages)
		res.Duration, res.WatchEnded = time.Since(start), err == nil
		return res, err
	}
	if r.pastPONR && jr.Travel == journal.Forward {
		ponr := PONRStage(stages, r.Direction)
		ev, _ := jr.LastEvent(ponr)
		return res, pastPONR(fmt.Errorf("run %d is past its point of no return (%s started %s): it cannot be undone, only finished with 'cutover upgrade --resume'; it stays pending",
			r.ID, ponr, ev.At.UTC().Format(time.RFC3339)))
	}
	if err := s.skipNodes(ctx, opts.SkipNodes); err != nil {
		return res, err
	}
	r.log.Printf("run %d: abort requested", r.ID)
	r.report.Report(Event{Time: time.Now(), Type: "run", Run: r.ID, Message: fmt.Sprintf("aborting run %d: %s %s -> %s", r.ID, cfg.App, r.From, r.To)})
	rn := &Runner{Stages: stages}
	err = rn.Abort(ctx, r, journal.Aborting)
	res.Duration = time.Since(start)
	return res, err
}
