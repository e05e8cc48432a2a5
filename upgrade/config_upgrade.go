package upgrade

import (
	"context"

	"github.com/cutover/cutover/upgrade/timeline"
)

// configUpgrade migrates the application's config up with the new version's migrations, after
// the switch. It is the point of no return of an upgrade.
type configUpgrade struct{}

func (configUpgrade) Name() string { return "config-upgrade" }

// Drawn makes the stage a bar of the timeline.
func (configUpgrade) Drawn() timeline.Kind { return timeline.Config }

func (configUpgrade) Where() Where { return OnMaster }

func (configUpgrade) Skip(r *Run) bool { return r.Direction != Up }

func (configUpgrade) PONR(d Direction) bool { return d == Up }

func (configUpgrade) Run(ctx context.Context, r *Run) error {
	return migrateConfig(ctx, r, r.Config.Config.UpgradeCommand)
}
