package upgrade

import (
	"context"

	"github.com/cutover/cutover/upgrade/timeline"
)

// configDowngrade migrates the application's config down with the NEWER (live) version's
// migrations, before the links are switched: the older version cannot know how. It is the
// point of no return of a downgrade.
//
// In a rolling run it is not: the canaries come after it and are always reversible, so a
// failed canary has the config migrated up again by Undo (the newer version's up
// migrations, or its upgrade_command), back at the source.
type configDowngrade struct{ rolling bool }

func (configDowngrade) Name() string { return "config-downgrade" }

// Drawn makes the stage a bar of the timeline.
func (configDowngrade) Drawn() timeline.Kind { return timeline.Config }

func (configDowngrade) Where() Where { return OnMaster }

func (configDowngrade) Skip(r *Run) bool { return r.Direction != Down }

func (s configDowngrade) PONR(d Direction) bool { return d == Down && !s.rolling }

// RestartAt makes a downgrade resumed past its point of no return start here: the config
// migration checks whether it is already done.
func (s configDowngrade) RestartAt(d Direction, past bool) bool {
	return past && d == Down && !s.rolling
}

func (configDowngrade) Run(ctx context.Context, r *Run) error {
	return migrateConfig(ctx, r, r.Config.Config.DowngradeCommand)
}

// Undo migrates the config of a rolling downgrade back up to the source, once its canaries
// are switched back. An all-at-once downgrade never undoes it: the stage is its point of no
// return.
func (s configDowngrade) Undo(ctx context.Context, r *Run) error {
	if !s.rolling || r.Direction != Down {
		return nil
	}
	return migrateConfigBack(ctx, r)
}
