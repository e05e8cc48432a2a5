package upgrade

import (
	"context"
	"fmt"
	"time"
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
	r, jr, cleanup, err := loadPending(ctx, cfg, opts.Reporter, opts.Hostname, true)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return &Result{App: cfg.App, Nothing: true}, nil
	}
	defer cleanup()
	res := r.summary()
	if ponr := ponrStageName(r.Direction); jr.Reached(ponr) {
		ev, _ := jr.LastEvent(ponr)
		return res, fmt.Errorf("run %d is past its point of no return (%s started %s): it cannot be undone, only finished with 'cutover upgrade --resume'",
			r.ID, ponr, ev.At.UTC().Format(time.RFC3339))
	}
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
