package upgrade

import (
	"context"

	"github.com/cutover/cutover/upgrade/timeline"
)

// stopAll stops the daemons on every online node. A run resumed past the point of no return
// runs it first: a reboot may have started daemons of either version, on a config they may
// not understand.
type stopAll struct{}

func (stopAll) Name() string { return "stop-all" }

// Drawn makes the stage a bar of the timeline.
func (stopAll) Drawn() timeline.Kind { return timeline.Stop }

func (stopAll) Where() Where { return OnAll }

func (stopAll) Run(ctx context.Context, r *Run) error {
	return r.daemons(ctx, r.Online, false)
}
