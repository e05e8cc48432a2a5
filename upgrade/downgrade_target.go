package upgrade

import (
	"context"
	"errors"
	"fmt"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/upgrade/config"
)

// DowngradeTarget is the version `cutover upgrade --downgrade` goes back to: the one the
// cluster ran before its last done upgrade, read from the journal. An upgrade that skipped a
// minor version (allow_minor_jump) came from further back than a downgrade may go with
// downgrade = "previous-minor": it then goes back to the newest version of the minor before
// the live one that the master has installed, the one prune keeps as the way back, where
// there is one. It is refused (IsBadInput) when the journal holds no such run, or when the
// last done run that switched the cluster was not an upgrade (a downgrade, a restore): going
// back is only ever back from an upgrade. The path policy and everything else are checked by
// the run itself, as for --to.
func DowngradeTarget(ctx context.Context, cfg *config.Config) (string, error) {
	runs, err := journal.NewStore(JournalPath(cfg)).Runs(ctx)
	if err != nil && !journal.IsNotFound(err) {
		return "", fmt.Errorf("--downgrade: the journal: %w", err)
	}
	for i := len(runs) - 1; i >= 0; i-- {
		jr := runs[i]
		kind := kindOf(jr.Kind)
		if jr.Outcome != journal.Succeeded || !kind.traits().switches {
			continue
		}
		if kind != KindUpgrade || Direction(jr.Direction) != Up {
			return "", badInput(fmt.Errorf("--downgrade: the last run that switched the cluster, run %d, was a %s (%s -> %s), not an upgrade: name the version with --to", jr.ID, jr.Direction, jr.From, jr.To))
		}
		if cfg.Policy.Downgrade == "previous-minor" {
			if back := wayBack(ctx, cfg, jr.From, jr.To); back != "" {
				return back, nil
			}
		}
		return jr.From, nil
	}
	return "", badInput(errors.New("--downgrade: the journal holds no done upgrade to go back from: name the version with --to"))
}

// wayBack returns, when from lies more than one minor version below to, the newest version of
// the minor before to that the master has installed; "" otherwise, or when it has none.
func wayBack(ctx context.Context, cfg *config.Config, from, to string) string {
	f, err1 := layout.ParseVersion(from)
	t, err2 := layout.ParseVersion(to)
	if err1 != nil || err2 != nil || f.Major() != t.Major() || f.Minor()+1 >= t.Minor() {
		return ""
	}
	lay, err := Layout(cfg)
	if err != nil {
		return ""
	}
	installed, err := lay.Installed(ctx, layout.OSFS{})
	if err != nil {
		return ""
	}
	best, found := layout.Version{}, false
	for _, name := range installed {
		v, err := layout.ParseVersion(name)
		if err != nil || v.Major() != t.Major() || v.Minor() != t.Minor()-1 {
			continue
		}
		if !found || v.Compare(best) > 0 {
			best, found = v, true
		}
	}
	if !found {
		return ""
	}
	return best.String()
}
