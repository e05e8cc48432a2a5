package backup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"

	"golang.org/x/sys/unix"
)

// Plan is a verified archive checked against the disk: what a restore of it will find, and
// may write through.
type Plan struct {
	sc Scope
	a  *Archive
	// ids are the directories of the archive that exist on disk, as the check saw them.
	ids map[string]fileID
	// exists are the entries of the archive that exist on disk.
	exists map[string]bool
}

// NewPlan checks, against the disk and before anything is written, that archive a can be
// restored in sc, and returns what the restore must find again: every directory of the
// archive that exists is a directory, reached from its root without a link; nothing that is
// a directory on disk is a file or a symlink in the archive (or the other way round); a root
// that does not exist has an existing parent; and the switch links point at version trees
// that are installed. It writes nothing. Every problem is reported, not just the first.
func NewPlan(ctx context.Context, a *Archive, sc Scope) (*Plan, error) {
	p := &Plan{sc: sc, a: a, ids: map[string]fileID{}, exists: map[string]bool{}}
	o := &opener{sc: sc, ids: p.ids, learn: true}
	defer o.close()
	absent := map[string]bool{} // entries missing on disk, or in error: their children are not looked for
	var errs []error
	bad := func(err error) {
		if len(errs) < maxErrors {
			errs = append(errs, err)
		}
	}
	for _, e := range a.m.Entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if sc.isRoot(e.Path) {
			var st unix.Stat_t
			err := unix.Stat(sc.abs(e.Path), &st)
			switch {
			case errors.Is(err, unix.ENOENT):
				absent[e.Path] = true
				if err := unix.Stat(sc.abs(path.Dir(e.Path)), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
					bad(fmt.Errorf("%s is missing, and so is its parent directory", e.Path))
				}
			case err != nil:
				absent[e.Path] = true
				bad(fmt.Errorf("inspect %s: %w", e.Path, err))
			default:
				if _, err := o.open(e.Path); err != nil {
					absent[e.Path] = true
					bad(err)
					continue
				}
				p.exists[e.Path] = true
			}
			continue
		}
		parent := dirOf(e.Path)
		if absent[parent] {
			absent[e.Path] = true
			continue
		}
		d, err := o.open(parent)
		if err != nil {
			absent[e.Path] = true
			bad(err)
			continue
		}
		var st unix.Stat_t
		err = unix.Fstatat(fd(d), path.Base(e.Path), &st, unix.AT_SYMLINK_NOFOLLOW)
		if errors.Is(err, unix.ENOENT) {
			absent[e.Path] = true
			continue
		}
		if err != nil {
			absent[e.Path] = true
			bad(fmt.Errorf("inspect %s: %w", e.Path, err))
			continue
		}
		isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
		switch {
		case e.Type == TypeDir && !isDir:
			absent[e.Path] = true
			bad(fmt.Errorf("%s is a directory in the archive but a %s here: refused, cutover never writes through a link, nor replaces a file by a directory", e.Path, typeName(st.Mode)))
			continue
		case e.Type != TypeDir && isDir:
			bad(fmt.Errorf("%s is a directory here but a %s in the archive", e.Path, e.Type))
		case e.Type == TypeDir:
			if _, err := o.open(e.Path); err != nil {
				absent[e.Path] = true
				bad(err)
				continue
			}
		}
		p.exists[e.Path] = true
	}
	links := make([]string, 0, len(a.m.Links))
	for l := range a.m.Links {
		links = append(links, l)
	}
	sort.Strings(links)
	for _, l := range links {
		target := a.m.Links[l]
		if !path.IsAbs(target) {
			target = path.Join(path.Dir(l), target)
		}
		if info, err := os.Stat(sc.abs(target)); err != nil || !info.IsDir() {
			bad(fmt.Errorf("link %s would point at %s, which is not installed on this host", l, target))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// Archive returns the archive the plan restores.
func (p *Plan) Archive() *Archive { return p.a }
