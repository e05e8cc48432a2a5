package upgrade

import (
	"context"
	"fmt"

	"github.com/cutover/cutover/upgrade/timeline"
)

// syncVerify runs the configured verify on the master once the synced nodes are up: the
// cluster, those nodes included, must be healthy at the live version.
type syncVerify struct{}

func (syncVerify) Name() string { return "verify" }

// Drawn makes the stage a bar of the timeline.
func (syncVerify) Drawn() timeline.Kind { return timeline.Verify }

func (syncVerify) Where() Where { return OnMaster }

func (syncVerify) Skip(r *Run) bool {
	return r.Config.Commands.Verify == "" && r.Config.Commands.DaemonsStart == ""
}

func (syncVerify) Run(ctx context.Context, r *Run) error {
	if err := r.checkDaemons(ctx, r.Online); err != nil {
		return fmt.Errorf("daemons: %w", err)
	}
	if r.Config.Commands.Verify == "" {
		return nil
	}
	if _, err := r.OnMaster(ctx, r.Config.Commands.Verify); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	return nil
}
