package layout

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// tempMarker is part of every temporary link's name: <dir>/.<link>.cutover-<random>.
const tempMarker = ".cutover-"

// Switch points both links of the node at the trees of version v:
//
//  1. Check that both trees of version exist; otherwise refuse (IsNotInstalled), changing
//     nothing.
//  2. Refuse (IsNotSideBySide) if a link path exists and is not a symlink, changing nothing.
//     A missing link is fine: it is created below (a fresh installation). A symlink is
//     replaced wherever it points; callers that must not repair a foreign target check Live
//     first.
//  3. Remove the temporary links an interrupted earlier Switch may have left next to the
//     links.
//  4. For each link, lib then share: if it already points to its tree, leave it (so Switch is
//     idempotent). Otherwise create a symlink to the tree under a unique temporary name in the
//     link's own directory (.lib.cutover-RANDOM), rename it over the link (an atomic replace:
//     the link names the old tree or the new one, never nothing), then read the link back and
//     fail unless it names the tree. On any error the temporary link is removed.
//  5. If a link fails, put back the links this call already replaced, including the failed
//     one if it was renamed before its rename or read-back reported the failure: to the old
//     target the same way, or removed if it was missing. So the node is not left with its
//     links on two versions.
//
// Every change is durable when Switch returns: it syncs the links' directory once, after its
// last change and before it returns, so a caller that records the switch after Switch returned
// never records one that a power cut can undo. An FS that is a NoSyncFS makes the changes
// without syncing each (SymlinkNoSync, RenameNoSync, RemoveNoSync), so that one sync serves
// them all; any other FS syncs the directory as part of each change. The directory is synced
// even when both links were already in place, since an earlier Switch may have renamed them
// there and been killed before its sync. When that sync fails, the links this call replaced
// are put back, as for any other failure.
//
// Targets are written as root-less absolute paths (/usr/lib/<app>/<VERSIONDIR>). ctx is
// checked until step 4 begins; from then on Switch finishes (or puts back) both links, so a
// cancellation never leaves a node half-switched.
func (l *Layout) Switch(ctx context.Context, fsys FS, v Version) error {
	if err := l.doSwitch(ctx, fsys, v); err != nil {
		return fmt.Errorf("switch %s to %s: %w", l.app, v, err)
	}
	return nil
}

// doSwitch is Switch without the operation prefix on its errors.
func (l *Layout) doSwitch(ctx context.Context, fsys FS, v Version) error {
	lib, share := l.Trees(v)
	if err := l.CheckInstalled(ctx, fsys, v); err != nil {
		return err
	}
	links := l.links()
	targets := []string{lib, share}
	old := make([]string, len(links)) // current targets; "" when the link is missing
	var errs []error
	for i, lk := range links {
		if err := ctxErr(ctx, "inspect "+lk.path); err != nil {
			return err
		}
		target, err := l.currentTarget(fsys, lk.path)
		old[i] = target
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	dir := path.Dir(l.LibLink())
	d := newLinkDir(fsys, l.at(dir))
	if err := l.removeStaleTemps(d); err != nil {
		return errors.Join(err, d.sync(false))
	}
	replaced := false
	for i, lk := range links {
		if old[i] == targets[i] {
			continue
		}
		renamed, err := l.replaceLink(d, lk.path, targets[i])
		if err == nil {
			replaced = true
			continue
		}
		errs := []error{err}
		for j := range i {
			if old[j] != targets[j] {
				errs = append(errs, l.restore(d, links[j].path, old[j]))
			}
		}
		if renamed {
			errs = append(errs, l.restore(d, lk.path, old[i]))
		}
		return errors.Join(append(errs, d.sync(false))...)
	}
	if err := d.sync(!replaced); err != nil {
		// The new links may not be on disk: put back what this call replaced.
		errs := []error{fmt.Errorf("sync %s: %w", dir, err)}
		for i, lk := range links {
			if old[i] != targets[i] {
				errs = append(errs, l.restore(d, lk.path, old[i]))
			}
		}
		return errors.Join(append(errs, d.sync(false))...)
	}
	return nil
}

// currentTarget returns the target of the link at p, "" if there is no link, and a
// not-side-by-side error if p is something else.
func (l *Layout) currentTarget(fsys FS, p string) (string, error) {
	fi, err := fsys.Lstat(l.at(p))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("inspect %s: %w", p, err)
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		return "", newError(kindNotSideBySide, "%s is %s, not a symlink: not a side-by-side installation",
			p, describe(fi))
	}
	target, err := fsys.Readlink(l.at(p))
	if err != nil {
		return "", fmt.Errorf("read link %s: %w", p, err)
	}
	return target, nil
}

// replaceLink atomically makes the link at p point to target and reads it back. renamed
// reports whether the link itself was replaced, even if the rename then reported a failure
// (its directory could not be synced, or the answer was lost) or reading it back failed.
//
// A temporary link that vanished before the rename was taken for a leftover and removed by
// another switch of the same directory (a shared file system); the step is then retried with
// a new name.
func (l *Layout) replaceLink(d *linkDir, p, target string) (renamed bool, err error) {
	for attempt := 1; ; attempt++ {
		tmp := path.Join(path.Dir(p), "."+path.Base(p)+tempMarker+rand.Text())
		if err := d.symlink(target, l.at(tmp)); err != nil {
			return false, errors.Join(fmt.Errorf("create %s: %w", tmp, err), l.removeTemp(d, tmp))
		}
		err := d.rename(l.at(tmp), l.at(p))
		if err == nil {
			break
		}
		if errors.Is(err, fs.ErrNotExist) && attempt < 5 {
			if _, lerr := d.fsys.Lstat(l.at(tmp)); errors.Is(lerr, fs.ErrNotExist) {
				continue
			}
		}
		renamed, _ := l.pointsTo(d.fsys, p, target)
		return renamed, errors.Join(fmt.Errorf("rename %s to %s: %w", tmp, p, err), l.removeTemp(d, tmp))
	}
	if _, err := l.pointsTo(d.fsys, p, target); err != nil {
		return true, fmt.Errorf("read back %s: %w", p, err)
	}
	return true, nil
}

// pointsTo reports whether the link at p points to target; err says why not.
func (l *Layout) pointsTo(fsys FS, p, target string) (bool, error) {
	got, err := fsys.Readlink(l.at(p))
	if err != nil {
		return false, err
	}
	if got != target {
		return false, fmt.Errorf("points to %q, want %q", got, target)
	}
	return true, nil
}

// removeTemp removes the temporary link tmp if it exists.
func (l *Layout) removeTemp(d *linkDir, tmp string) error {
	if err := d.remove(l.at(tmp)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove temporary link %s: %w", tmp, err)
	}
	return nil
}

// restore puts the link at p back to target, or removes it if target is "" (it was missing).
func (l *Layout) restore(d *linkDir, p, target string) error {
	if target == "" {
		if err := d.remove(l.at(p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s, which was missing before: %w", p, err)
		}
		return nil
	}
	if _, err := l.replaceLink(d, p, target); err != nil {
		return fmt.Errorf("put %s back to %q: %w", p, target, err)
	}
	return nil
}

// removeStaleTemps removes temporary links left in the links' directory by a Switch that was
// killed between creating one and renaming it. A missing directory has none.
func (l *Layout) removeStaleTemps(d *linkDir) error {
	dir := path.Dir(l.LibLink())
	entries, err := d.fsys.ReadDir(l.at(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	var errs []error
	for _, e := range entries {
		if e.Mode()&fs.ModeSymlink != 0 && isTempName(e.Name()) {
			errs = append(errs, l.removeTemp(d, path.Join(dir, e.Name())))
		}
	}
	return errors.Join(errs...)
}

// isTempName reports whether name is a temporary link name of one of the links.
func isTempName(name string) bool {
	return strings.HasPrefix(name, ".lib"+tempMarker) || strings.HasPrefix(name, ".share"+tempMarker)
}

// linkDir changes the links' directory through an FS: with its NoSync operations when it
// has them, leaving the directory to one sync, or else with the operations that sync it as
// part of every change.
type linkDir struct {
	fsys    FS
	nosync  NoSyncFS // nil when fsys syncs every change itself
	dir     string   // the directory, as fsys names it
	changed bool     // changed without a sync since the last one
}

// newLinkDir returns the changes of dir through fsys.
func newLinkDir(fsys FS, dir string) *linkDir {
	d := &linkDir{fsys: fsys, dir: dir}
	d.nosync, _ = fsys.(NoSyncFS)
	return d
}

// symlink creates newname as a symlink to oldname.
func (d *linkDir) symlink(oldname, newname string) error {
	if d.nosync == nil {
		return d.fsys.Symlink(oldname, newname)
	}
	d.changed = true // even when it fails: the reply may be what was lost
	return d.nosync.SymlinkNoSync(oldname, newname)
}

// rename renames oldname to newname.
func (d *linkDir) rename(oldname, newname string) error {
	if d.nosync == nil {
		return d.fsys.Rename(oldname, newname)
	}
	d.changed = true
	return d.nosync.RenameNoSync(oldname, newname)
}

// remove removes name.
func (d *linkDir) remove(name string) error {
	if d.nosync == nil {
		return d.fsys.Remove(name)
	}
	d.changed = true
	return d.nosync.RemoveNoSync(name)
}

// sync syncs the directory when a change was made without a sync, or when always is set.
func (d *linkDir) sync(always bool) error {
	if !d.changed && !always {
		return nil
	}
	if err := d.fsys.SyncDir(d.dir); err != nil {
		return err
	}
	d.changed = false
	return nil
}
