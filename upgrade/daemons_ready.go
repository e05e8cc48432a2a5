package upgrade

import (
	"context"
	"fmt"
	"time"
)

// defaultDaemonsReadyTimeout bounds the wait for the master's daemons when the config does
// not: Ganeti's wait about a minute for the nodes' votes after a reboot.
const defaultDaemonsReadyTimeout = 5 * time.Minute

// daemonsReadyPoll is how often the daemons_ready command is tried again.
var daemonsReadyPoll = 500 * time.Millisecond

// awaitDaemons waits until the daemons_ready command exits 0 on the master of run r, for the stages
// that talk to the master's daemons: after a start, and before the drain of a run that may
// follow a reboot. Without the command it returns at once.
func awaitDaemons(ctx context.Context, r *Run) error {
	cmd := r.Config.Commands.DaemonsReady
	if cmd == "" {
		return nil
	}
	limit := r.Config.Commands.DaemonsReadyTimeout.Duration
	if limit <= 0 {
		limit = defaultDaemonsReadyTimeout
	}
	start := time.Now()
	for {
		ok, err := probe(ctx, r, cmd)
		if err != nil {
			return fmt.Errorf("%s: daemons_ready: %w", r.Inventory.Master, err)
		}
		if ok {
			if waited := time.Since(start); waited > daemonsReadyPoll {
				r.Note("the master's daemons answered after %s", waited.Round(time.Second))
			}
			return nil
		}
		if time.Since(start) > limit {
			return fmt.Errorf("%s: the daemons do not answer (daemons_ready) after %s", r.Inventory.Master, limit)
		}
		r.Wait("waiting for the master's daemons to answer")
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(daemonsReadyPoll):
		}
	}
}
