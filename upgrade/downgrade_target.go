package upgrade

import (
	"context"
	"errors"
	"fmt"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/upgrade/config"
)

// DowngradeTarget is the version `cutover upgrade --downgrade` goes back to: the one the
// cluster ran before its last done upgrade, read from the journal. It is refused (IsBadInput)
// when the journal holds no such run, or when the last done run that switched the cluster
// was not an upgrade (a downgrade, a restore): going back is only ever back from an upgrade.
// The path policy and everything else are checked by the run itself, as for --to.
func DowngradeTarget(ctx context.Context, cfg *config.Config) (string, error) {
	runs, err := journal.NewStore(JournalPath(cfg)).Runs(ctx)
	if err != nil && !journal.IsNotFound(err) {
		return "", fmt.Errorf("--downgrade: the journal: %w", err)
	}
	for i := len(runs) - 1; i >= 0; i-- {
		jr := runs[i]
		if jr.Outcome != journal.Succeeded || (jr.Kind != "upgrade" && jr.Kind != "restore") {
			continue
		}
		if jr.Kind == "restore" || Direction(jr.Direction) != Up {
			return "", badInput(fmt.Errorf("--downgrade: the last run that switched the cluster, run %d, was a %s (%s -> %s), not an upgrade: name the version with --to", jr.ID, jr.Direction, jr.From, jr.To))
		}
		return jr.From, nil
	}
	return "", badInput(errors.New("--downgrade: the journal holds no done upgrade to go back from: name the version with --to"))
}
