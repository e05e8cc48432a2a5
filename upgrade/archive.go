package upgrade

import (
	"path"
	"path/filepath"

	archive "github.com/cutover/cutover/upgrade/backup"
	"github.com/cutover/cutover/upgrade/config"
)

// The archives, their format, writing, verifying and restoring them live in upgrade/backup,
// imported as archive (the stage that takes them is named backup); this file says what a
// backup of the configured application covers.

// BackupDir is where a cluster's backups are kept.
func BackupDir(c *config.Config) string { return filepath.Join(c.Paths.StateDir, "backups") }

// backupScope is what a backup of cfg's application covers: its state and its directory in
// sysconfdir, the two switch links in it, and the version trees links may point into.
func backupScope(cfg *config.Config) (archive.Scope, error) {
	lay, err := Layout(cfg)
	if err != nil {
		return archive.Scope{}, badInput(err)
	}
	lib, share := path.Join(cfg.Paths.LibDir, cfg.App), path.Join(cfg.Paths.DataDir, cfg.App)
	return archive.Scope{
		Roots:        cfg.BackupDirs(),
		Exclude:      cfg.Paths.BackupExclude,
		Links:        map[string]string{lay.LibLink(): lib, lay.ShareLink(): share},
		Trees:        []string{lib, share},
		IsVersionDir: lay.IsVersionDir,
	}, nil
}
