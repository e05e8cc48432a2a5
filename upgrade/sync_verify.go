package upgrade

import (
	"context"
	"fmt"
)

// syncVerify runs the configured verify on the master once the synced nodes are up: the
// cluster, those nodes included, must be healthy at the live version.
type syncVerify struct{}

func (syncVerify) Name() string { return "verify" }

func (syncVerify) Where() Where { return OnMaster }

func (syncVerify) Skip(r *Run) bool { return r.Config.Commands.Verify == "" }

func (syncVerify) Run(ctx context.Context, r *Run) error {
	if _, err := r.OnMaster(ctx, r.Config.Commands.Verify); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	return nil
}
