package upgrade

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// backup archives the application's state, its /etc/<app> directory and the link targets on
// the master before anything changes: state_dir/backups/<app>-<from>-to-<to>-<UTC>.tar.gz,
// mode 0600, with a checksummed manifest, written to a temporary name and renamed. Old
// archives beyond backup_keep are removed, never the newest one of the live version.
type backup struct{}

func (backup) Name() string { return "backup" }

func (backup) Run(ctx context.Context, r *Run) error {
	links := map[string]string{}
	c, err := r.Conn(ctx, r.Inventory.Master)
	if err != nil {
		return err
	}
	for _, l := range []string{r.Layout.LibLink(), r.Layout.ShareLink()} {
		target, err := c.Readlink(l)
		if err != nil {
			return fmt.Errorf("backup: read link %s: %w", l, err)
		}
		links[l] = target
	}
	m := Manifest{App: r.Config.App, Run: r.ID, From: r.From, To: r.To, Created: time.Now().UTC(), Links: links}
	path, err := WriteBackup(ctx, BackupDir(r.Config), r.backupDirs(), m)
	if err != nil {
		return err
	}
	r.Backup = path
	if _, err := r.Learn(ctx, "backup", path); err != nil {
		return err
	}
	r.Note("%s", filepath.Base(path))
	removed, err := PruneBackups(BackupDir(r.Config), r.Config.App, r.Config.Policy.BackupKeep, r.From)
	for _, p := range removed {
		r.log.Printf("backup: removed old archive %s", p)
	}
	if err != nil {
		r.Warn("backup retention: %v", err)
	}
	return nil
}

// backupDirs are the directories a backup holds: the application's state and its /etc dir.
func (r *Run) backupDirs() []string {
	return []string{
		filepath.Join(r.Config.Paths.LocalstateDir, "lib", r.Config.App),
		filepath.Join(r.Config.Paths.SysconfDir, r.Config.App),
	}
}

// BackupDir is where a cluster's backups are kept.
func BackupDir(c *Config) string { return filepath.Join(c.Paths.StateDir, "backups") }

// Once makes a resumed run skip the stage when an earlier execution completed it.
func (backup) Once() bool { return true }
