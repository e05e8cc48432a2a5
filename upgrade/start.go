package upgrade

import (
	"context"

	"github.com/cutover/cutover/upgrade/timeline"
)

// start starts the daemons of the now-live version on every online node and waits until the
// master's answer.
type start struct{}

func (start) Name() string { return "start" }

// Drawn makes the stage a bar of the timeline.
func (start) Drawn() timeline.Kind { return timeline.Start }

func (start) Where() Where { return OnAll }

func (start) Run(ctx context.Context, r *Run) error {
	if err := r.daemons(ctx, r.Online, true); err != nil {
		return err
	}
	return awaitDaemons(ctx, r)
}
