package upgrade

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cutover/cutover/journal"
)

// keepCurrent archives the state a restore is about to replace, next to the other backups,
// as <app>-<live>-before-restore-<UTC>.tar.gz: restoring it undoes the restore.
type keepCurrent struct{ st *restoring }

func (keepCurrent) Name() string { return "keep-current" }

func (keepCurrent) Where() Where { return OnMaster }

// Once: a resumed restore keeps the archive an earlier execution kept; nothing it holds has
// changed since, as the restore stage had not begun.
func (keepCurrent) Once() bool { return true }

// Undo removes the archive the stage kept: an undone restore changed nothing.
func (keepCurrent) Undo(ctx context.Context, r *Run) error {
	path, ok := r.Fact("kept")
	if !ok {
		return nil
	}
	if filepath.Dir(path) != BackupDir(r.Config) || !strings.Contains(filepath.Base(path), "-"+BackupBeforeRestore+"-") {
		// The journal names something else than an archive this stage keeps: leave it.
		return fmt.Errorf("the journal's kept archive %q is not one of %s: left alone", path, BackupDir(r.Config))
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return journal.SyncDir(filepath.Dir(path))
}

func (k keepCurrent) Run(ctx context.Context, r *Run) error {
	path, m, err := keepState(ctx, r.Config, k.st.sc, k.st.rep.Previous)
	crashPoint(false, "restore: kept the current state")
	if err != nil {
		return fmt.Errorf("keep the current state before restoring, nothing was restored: %w", err)
	}
	k.st.rep.Kept = path
	if _, err := r.Learn(ctx, "kept", path); err != nil {
		r.Warn("%v", err)
	}
	if _, unexpected := splitSkipped(m.Skipped); len(unexpected) > 0 {
		r.Warn("keep-current: not archived (listed in the manifest): %s", skippedList(unexpected))
	}
	r.Note("%s", filepath.Base(path))
	return nil
}
