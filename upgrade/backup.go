package upgrade

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/cutover/cutover/journal"
	archive "github.com/cutover/cutover/upgrade/backup"
)

// backup archives the application's state and its /etc/<app> directory, the switch links
// included, on the master before anything changes: state_dir/backups/<app>-<from>-to-<to>-<UTC>.tar.gz,
// mode 0600, with a manifest of every entry's owner, mode and checksum, written to a
// temporary name and renamed. Sockets, fifos, devices and links that lead elsewhere are not
// archived: the stage names them. Old archives beyond backup_keep are removed, never the
// newest one of the live version.
type backup struct{}

func (backup) Name() string { return "backup" }

func (backup) Where() Where { return OnMaster }

func (backup) Run(ctx context.Context, r *Run) error {
	sc, err := backupScope(r.Config)
	if err != nil {
		return err
	}
	m := archive.Manifest{Kind: archive.KindSwitch, App: r.Config.App, Run: r.ID, From: r.From, To: r.To, Created: time.Now().UTC()}
	path, m, err := archive.Write(ctx, BackupDir(r.Config), sc, m)
	crashPoint(false, "backup written")
	if err != nil {
		return err
	}
	r.Backup = path
	if _, err := r.Learn(ctx, "backup", path); err != nil {
		return err
	}
	note := filepath.Base(path)
	excluded, unexpected := splitSkipped(m.Skipped)
	if len(excluded) > 0 {
		note += fmt.Sprintf("; %d excluded", len(excluded))
	}
	if len(unexpected) > 0 {
		note += fmt.Sprintf("; %d not archived", len(unexpected))
		r.Warn("backup: not archived (listed in the manifest): %s", skippedList(unexpected))
	}
	r.Note("%s", note)
	removed, err := archive.Prune(BackupDir(r.Config), r.Config.App, r.Config.Policy.BackupKeep, r.From, backupRuns(ctx, r, path))
	for _, p := range removed {
		r.log.Printf("backup: removed old archive %s", p)
	}
	if err != nil {
		r.Warn("backup retention: %v", err)
	}
	return nil
}

// backupRuns maps each archive a journaled run took (its "backup" fact) to the run's id, the
// one just written (path) to this run's: the order retention follows. A journal that cannot
// be read leaves the runs it holds unknown, which only makes retention keep more.
func backupRuns(ctx context.Context, r *Run, path string) map[string]uint64 {
	out := map[string]uint64{}
	if runs, err := journal.NewStore(JournalPath(r.Config)).Runs(ctx); err == nil {
		for _, jr := range runs {
			if p := jr.Facts["backup"]; p != "" {
				out[strings.TrimSuffix(filepath.Base(p), ".tar.gz")] = jr.ID
			}
		}
	} else {
		r.log.Printf("backup retention: the journal's runs: %v", err)
	}
	out[strings.TrimSuffix(filepath.Base(path), ".tar.gz")] = r.ID
	return out
}

// Once makes a resumed run skip the stage when an earlier execution completed it.
func (backup) Once() bool { return true }

// skippedList names what a backup did not archive, for messages.
// splitSkipped separates what backup_exclude left out on purpose from what a backup could not
// archive (sockets, fifos, devices, links that lead elsewhere), which deserves a warning.
func splitSkipped(list []archive.Skipped) (excluded, unexpected []archive.Skipped) {
	for _, s := range list {
		if s.Reason == archive.ReasonExcluded {
			excluded = append(excluded, s)
		} else {
			unexpected = append(unexpected, s)
		}
	}
	return excluded, unexpected
}

func skippedList(list []archive.Skipped) string {
	names := make([]string, len(list))
	for i, s := range list {
		names[i] = s.String()
	}
	return strings.Join(names, ", ")
}
