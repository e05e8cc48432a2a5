package upgrade

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/upgrade/config"
	"github.com/cutover/cutover/upgrade/staging"
)

// StampsPath is where the stamps of the last source staged are kept (staging.Stamps): what
// lets a restage of an unchanged source read nothing but its metadata.
func StampsPath(cfg *config.Config) string {
	return filepath.Join(cfg.Paths.StateDir, "source-stamps.json")
}

// stagingSource is the SOURCE of a stage: a directory, or a .tar.gz unpacked into a private
// directory of the state directory. Its files are judged by the stamps the last stage kept
// (staging.Stamps): a file that keeps its stamp is not read, and an archive that keeps its
// stamp is not unpacked until a node needs its trees sent (readAgain).
type stagingSource struct {
	path, stateDir string
	stamps         string // where the stamps are kept (StampsPath)
	names          []string
	policy         staging.Policy
	dryRun         bool // a dry run keeps no stamps

	mu      sync.Mutex
	known   *staging.Stamps
	unread  []*staging.Tree // the trees of an archive judged by its stamp, until readAgain
	cleanup []func()
	notes   []string // for the run's log: stamps ignored or not kept
}

// read returns the source's trees, lib then share. A bad source is bad input.
func (s *stagingSource) read() ([]*staging.Tree, error) {
	fi, err := os.Stat(s.path)
	if err != nil {
		return nil, badInput(fmt.Errorf("stage: %w", err))
	}
	known, err := staging.LoadStamps(s.stamps)
	if err != nil {
		s.note("%v: every file is read and checksummed", err)
	}
	s.known = known
	if fi.IsDir() {
		trees, err := s.readDir(s.path, known)
		if err == nil {
			s.keep(trees, nil)
		}
		return trees, err
	}
	if !strings.HasSuffix(s.path, ".tar.gz") && !strings.HasSuffix(s.path, ".tgz") {
		return nil, badInput(fmt.Errorf("stage: %s is neither a directory nor a .tar.gz", s.path))
	}
	if trees, again, ok := known.ArchiveTrees(s.path, s.names, s.policy); ok {
		if again != nil {
			s.keep(nil, again)
		}
		s.unread = trees
		return trees, nil
	}
	return s.unpack()
}

// readAgain returns the trees read from the source when read took them from the stamps of an
// unchanged archive, which a node now needs sent: it unpacks the archive, and refuses trees
// that are no longer those the stamps described. It returns nil, nil otherwise.
func (s *stagingSource) readAgain() ([]*staging.Tree, error) {
	s.mu.Lock()
	unread := s.unread
	s.mu.Unlock()
	if unread == nil {
		return nil, nil
	}
	trees, err := s.unpack()
	if err != nil {
		return nil, err
	}
	for i, t := range trees {
		if !t.Equal(unread[i]) {
			return nil, fmt.Errorf("stage: %s changed while it was staged: run the same 'cutover stage' again", s.path)
		}
	}
	s.mu.Lock()
	s.unread = nil
	s.mu.Unlock()
	return trees, nil
}

// unpack reads the archive's trees into streams of the state directory (staging.UnpackTrees)
// or, where they do not fit, unpacks them into a private directory and reads them there.
func (s *stagingSource) unpack() ([]*staging.Tree, error) {
	if err := journal.MkdirAllDurable(s.stateDir, 0o700); err != nil {
		return nil, err
	}
	trees, archive, err := staging.UnpackTrees(s.path, s.stateDir, s.names, s.policy)
	switch {
	case err == nil:
		s.cleanup = append(s.cleanup, func() {
			for _, t := range trees {
				t.Close()
			}
		})
		archive.Keep(trees, s.names, s.policy)
		s.keep(trees, archive)
		return trees, nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, badInput(fmt.Errorf("stage: %s must hold %s and %s: %w", s.path, s.names[0], s.names[1], err))
	case !staging.IsNoRoom(err):
		return nil, badInput(fmt.Errorf("stage: %s: %w", s.path, err))
	}
	dir, archive, err := s.unpackArchive()
	if err != nil {
		return nil, badInput(fmt.Errorf("stage: %w", err))
	}
	if trees, err = s.readDir(dir, archive.Written()); err != nil {
		return nil, err
	}
	archive.Keep(trees, s.names, s.policy)
	s.keep(trees, archive)
	return trees, nil
}

// readDir reads the trees beneath dir, judging its files by the stamps known.
func (s *stagingSource) readDir(dir string, known *staging.Stamps) ([]*staging.Tree, error) {
	trees, err := staging.ReadTrees(dir, s.names, s.policy, known)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, badInput(fmt.Errorf("stage: %s must hold %s and %s: %w", s.path, s.names[0], s.names[1], err))
	case err != nil:
		return nil, badInput(fmt.Errorf("stage: %s: %w", s.path, err))
	}
	return trees, nil
}

// keep saves the stamps of what was read for the next stage: a dry run keeps none, and a
// failure to save them costs the next stage a reading of every file, not this one.
func (s *stagingSource) keep(trees []*staging.Tree, archive *staging.Archive) {
	if s.dryRun {
		return
	}
	if err := staging.SaveStamps(s.stamps, trees, archive); err != nil {
		s.note("the stamps of %s are not kept for the next stage: %v", s.path, err)
	}
}

func (s *stagingSource) note(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notes = append(s.notes, fmt.Sprintf(format, args...))
}

// logNotes writes the notes to the run's log, and those of later readings as they come.
func (s *stagingSource) logNotes(r *Run) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.notes {
		r.log.Printf("staging: %s", n)
	}
	s.notes = nil
}

// close removes the private directories the archive was unpacked into.
func (s *stagingSource) close() {
	for _, f := range s.cleanup {
		f()
	}
}

// sourcePrefix begins the names of the private directories a .tar.gz source is unpacked into.
const sourcePrefix = "stage-source-"

// unpackArchive unpacks the trees (names, relative to the archive's root) of the .tar.gz
// source, under the policy, into a private directory it makes under the state directory
// (removed by close), and returns it with what Unpack read of the archive. What an earlier
// stage that was killed left there is removed first, never reused.
func (s *stagingSource) unpackArchive() (string, *staging.Archive, error) {
	if err := journal.MkdirAllDurable(s.stateDir, 0o700); err != nil {
		return "", nil, err
	}
	if err := removeOldSources(s.stateDir); err != nil {
		return "", nil, err
	}
	tmp, err := os.MkdirTemp(s.stateDir, sourcePrefix)
	if err != nil {
		return "", nil, err
	}
	s.cleanup = append(s.cleanup, func() { removeOldSources(s.stateDir) })
	archive, err := staging.Unpack(s.path, tmp, s.names, s.policy)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", s.path, err)
	}
	return tmp, archive, nil
}

// removeOldSources removes the private directories .tar.gz sources were unpacked into from
// stateDir, without following a link out of it. A stage holds the state directory's lock,
// so none of them belongs to a stage that still runs.
func removeOldSources(stateDir string) error {
	root, err := os.OpenRoot(stateDir)
	if err != nil {
		return err
	}
	defer root.Close()
	entries, err := os.ReadDir(stateDir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), sourcePrefix) {
			if err := root.RemoveAll(e.Name()); err != nil {
				return fmt.Errorf("remove what an earlier stage left: %w", err)
			}
		}
	}
	return nil
}
