package upgrade

import (
	"fmt"
	"path/filepath"
	"strings"

	archive "github.com/cutover/cutover/upgrade/backup"
)

// pendingStages returns the stage list of the pending run s loaded, as its kind builds it:
// what a resume runs, what an abort undoes and where the point of no return lies.
func (s *session) pendingStages() ([]Stage, error) {
	return s.r.Kind.traits().pending.stages(s)
}

// upgradeStages is the stage list of a pending upgrade: the one it started with.
func upgradeStages(s *session) ([]Stage, error) { return s.r.stages(), nil }

// restoreStagesOf is the stage list of a pending restore, with the archive its journal record
// names; without the archive, the list an abort undoes with, and why it is missing.
func restoreStagesOf(s *session) ([]Stage, error) {
	st, err := s.openRestoring()
	if err != nil {
		return restoreStages(&restoring{rep: &RestoreReport{}}), err
	}
	return restoreStages(st), nil
}

// resumeRestore plans the resume of a pending restore: it starts again at its check, which
// verifies the archive once more; the state it kept aside stays. Past its point of no return
// the master may be half restored, and a reboot may have started its daemons on that: they
// stop first.
func resumeRestore(r *Run, rn *Runner) bool {
	if r.pastPONR {
		rn.Prelude = []Stage{stopMaster{}}
	}
	return true
}

// openRestoring prepares the restore of the pending restore run s loaded: the archive its
// journal record names, opened for the check to verify again, closed with the session.
func (s *session) openRestoring() (*restoring, error) {
	r := s.r
	path := r.factValue("archive")
	id := strings.TrimSuffix(filepath.Base(path), ".tar.gz")
	if err := archive.CheckID(id); err != nil || filepath.Dir(path) != BackupDir(r.Config) {
		return nil, fmt.Errorf("run %d: the journal names no archive of the backup directory %s to restore (%q)", r.ID, BackupDir(r.Config), path)
	}
	sc, err := backupScope(r.Config)
	if err != nil {
		return nil, err
	}
	f, err := archive.Open(path)
	if err != nil {
		return nil, fmt.Errorf("run %d: restore %s: %w", r.ID, id, err)
	}
	s.close = append(s.close, func() { f.Close() })
	rep := &RestoreReport{
		ID: id, Archive: path, Run: r.ID, Previous: r.From, Version: r.To, Kept: r.factValue("kept"), Links: map[string]string{},
		Files: []string{}, Dirs: []string{}, Symlinks: []string{}, Skipped: []archive.Skipped{}, Warnings: []string{},
	}
	st := &restoring{id: id, file: f, sc: sc, rep: rep}
	r.report = st.collectWarnings(r.report)
	return st, nil
}
