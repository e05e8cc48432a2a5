package upgrade

import (
	"context"
	"fmt"
	"io"

	archive "github.com/cutover/cutover/upgrade/backup"
)

// restoreFiles writes the archive the check verified, and exactly that: files and symlinks
// to temporary names, checked once more, then renamed into place; directories' owners and
// modes last; every write through a directory descriptor the check saw, never through a
// link. It is the restore's point of no return: once it runs, signals no longer stop it.
// Every write is a crash point.
type restoreFiles struct{ st *restoring }

func (restoreFiles) Name() string { return "restore" }

func (restoreFiles) Where() Where { return OnMaster }

// PONR: the first rename changes the application's state.
func (restoreFiles) PONR(Direction) bool { return true }

func (s restoreFiles) Run(ctx context.Context, r *Run) error {
	st := s.st
	if _, err := st.file.Seek(0, io.SeekStart); err != nil {
		return notCrossed(fmt.Errorf("read %s: %w", st.rep.Archive, err))
	}
	written, err := st.plan.Restore(ctx, st.file, archive.Options{
		AfterWrite: func(what string) { crashPoint(false, "restore: %s", what) },
	})
	if err != nil {
		st.err = err
		if !written {
			return notCrossed(fmt.Errorf("%s, nothing was restored: %w", st.id, err))
		}
		return err
	}
	rep := st.rep
	for _, e := range st.plan.Archive().Manifest().Entries {
		switch e.Type {
		case archive.TypeDir:
			rep.Dirs = append(rep.Dirs, e.Path)
		case archive.TypeFile:
			rep.Files = append(rep.Files, e.Path)
		case archive.TypeSymlink:
			rep.Symlinks = append(rep.Symlinks, e.Path)
		}
	}
	r.Note("%s, %s, %s", plural(len(rep.Files), "file"), plural(len(rep.Dirs), "directory"), plural(len(rep.Symlinks), "symlink"))
	return nil
}
