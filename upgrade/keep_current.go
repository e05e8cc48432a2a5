package upgrade

import (
	"context"
	"fmt"
	"path/filepath"
)

// keepCurrent archives the state a restore is about to replace, next to the other backups,
// as <app>-<live>-before-restore-<UTC>.tar.gz: restoring it undoes the restore.
type keepCurrent struct{ st *restoring }

func (keepCurrent) Name() string { return "keep-current" }

func (keepCurrent) Where() Where { return OnMaster }

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
