package upgrade

import "context"

// configDowngrade migrates the application's config down with the NEWER (live) version's
// migrations, before the links are switched: the older version cannot know how. It is the
// point of no return of a downgrade.
type configDowngrade struct{}

func (configDowngrade) Name() string { return "config-downgrade" }

func (configDowngrade) Where() Where { return OnMaster }

func (configDowngrade) Skip(r *Run) bool { return r.Direction != Down }

func (configDowngrade) PONR(d Direction) bool { return d == Down }

// RestartAt makes a downgrade resumed past its point of no return start here: the config
// migration checks whether it is already done.
func (configDowngrade) RestartAt(d Direction, past bool) bool { return past && d == Down }

func (configDowngrade) Run(ctx context.Context, r *Run) error {
	return migrateConfig(ctx, r, r.Config.Config.DowngradeCommand)
}
