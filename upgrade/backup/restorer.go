package backup

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Options are how a restore reports its writes.
type Options struct {
	// AfterWrite, when set, is called after every change the restore makes on disk, naming
	// it: cutover's crash points.
	AfterWrite func(what string)
}

// staged is a file or symlink written to a temporary name in dir, to be renamed to name.
type staged struct {
	dir, tmp, name string
	id             fileID
}

// Restore reads the archive in r, which must be the one the plan was made of, and writes
// exactly what it verified: the missing directories (0700 until the end), every file and
// symlink to a temporary name in its directory with its owner (as root), mode and time, each
// file checked against the manifest once more; then, only when the whole archive checked out
// again, renames them into place, and last sets the directories' owners, modes and times. Every
// write goes through a descriptor of a directory reached from its root without a link and
// found to be the one the plan saw; anything else stops the restore.
//
// Until the first rename, a failure removes what the restore wrote, and written is false:
// nothing changed. After it, a failure does not stop the other renames (the more of the
// archive is in place, the better), and the error joins every failure.
func (p *Plan) Restore(ctx context.Context, r io.Reader, opts Options) (written bool, err error) {
	rs := p.newRestorer(opts)
	defer rs.o.close()
	defer func() {
		if err != nil {
			if cerr := p.cleanup(rs.o, rs.temps, rs.created, !written); cerr != nil {
				err = fmt.Errorf("%w; cleaning up: %w", err, cerr)
			}
		}
	}()
	if _, err = scan(ctx, r, p.sc, p.a, rs.stage); err != nil {
		return false, err
	}
	// Everything is written and checked: rename it into place, then the directories' owners
	// and modes, then make it all durable.
	errs := rs.renameAll()
	errs = append(errs, rs.setDirs()...)
	errs = append(errs, rs.syncAll()...)
	return rs.written, errors.Join(errs...)
}

// restorer is one Restore at work: the directories it opened, what it created and staged,
// and whether it changed anything yet.
type restorer struct {
	p       *Plan
	o       *opener
	after   func(what string)
	chown   bool            // set the owners (as root)
	cleaned map[string]bool // directories whose stale temporary files are removed
	created []string        // directories the restore created, in order
	temps   []staged        // files and symlinks written to a temporary name
	touched map[string]bool // directories an entry was renamed into
	written bool            // something is renamed into place or set: the restore changed the disk
}

// newRestorer prepares a Restore of p reporting its writes to opts.
func (p *Plan) newRestorer(opts Options) *restorer {
	after := opts.AfterWrite
	if after == nil {
		after = func(string) {}
	}
	ids := make(map[string]fileID, len(p.ids))
	for k, v := range p.ids {
		ids[k] = v
	}
	return &restorer{p: p, o: &opener{sc: p.sc, ids: ids}, after: after, chown: os.Geteuid() == 0,
		cleaned: map[string]bool{}, touched: map[string]bool{}}
}

// stage writes one entry of the archive as scan checks it: a missing directory is created, a
// file or symlink is written to a temporary name in its directory.
func (rs *restorer) stage(e Entry, content io.Reader) error {
	if e.Type == TypeDir {
		return rs.stageDir(e)
	}
	dir := dirOf(e.Path)
	d, err := rs.o.open(dir)
	if err != nil {
		return err
	}
	if !rs.cleaned[dir] {
		// A restore killed before its renames left its temporary files here.
		rs.cleaned[dir] = true
		if err := removeStale(d, dir); err != nil {
			return err
		}
	}
	tmp := tempPrefix + rand.Text()
	if e.Type == TypeSymlink {
		return rs.stageSymlink(d, dir, tmp, e)
	}
	return rs.stageFile(d, dir, tmp, e, content)
}

// stageDir creates directory e when the plan found it missing, and opens it.
func (rs *restorer) stageDir(e Entry) error {
	if !rs.p.exists[e.Path] {
		if err := rs.p.mkdir(rs.o, e.Path); err != nil {
			return err
		}
		rs.created = append(rs.created, e.Path)
		rs.after("mkdir " + e.Path)
	}
	_, err := rs.o.open(e.Path)
	return err
}

// stageSymlink writes symlink e as tmp in directory d (dir), with its owner and time.
func (rs *restorer) stageSymlink(d *os.File, dir, tmp string, e Entry) error {
	if err := unix.Symlinkat(e.Link, fd(d), tmp); err != nil {
		return fmt.Errorf("create %s: %w", path.Join(dir, tmp), err)
	}
	var st unix.Stat_t
	err := unix.Fstatat(fd(d), tmp, &st, unix.AT_SYMLINK_NOFOLLOW)
	rs.temps = append(rs.temps, staged{dir, tmp, path.Base(e.Path), idOf(&st)})
	rs.after("symlink " + path.Join(dir, tmp))
	if err == nil && rs.chown {
		err = unix.Fchownat(fd(d), tmp, int(e.UID), int(e.GID), unix.AT_SYMLINK_NOFOLLOW)
	}
	if err == nil {
		t := unix.Timespec{Sec: e.ModTime}
		err = unix.UtimesNanoAt(fd(d), tmp, []unix.Timespec{t, t}, unix.AT_SYMLINK_NOFOLLOW)
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", path.Join(dir, tmp), err)
	}
	return nil
}

// stageFile writes file e, its content checked by writeFile, as tmp in directory d (dir).
func (rs *restorer) stageFile(d *os.File, dir, tmp string, e Entry, content io.Reader) error {
	n, err := unix.Openat(fd(d), tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", path.Join(dir, tmp), err)
	}
	f := os.NewFile(uintptr(n), path.Join(dir, tmp))
	var st unix.Stat_t
	err = unix.Fstat(n, &st)
	rs.temps = append(rs.temps, staged{dir, tmp, path.Base(e.Path), idOf(&st)})
	if err == nil {
		err = writeFile(f, e, content, rs.chown)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	rs.after("wrote " + path.Join(dir, tmp))
	if err != nil {
		return fmt.Errorf("write %s: %w", path.Join(dir, tmp), err)
	}
	return nil
}

// renameAll renames every staged file and symlink into place, each only while its temporary
// file is still the one the restore wrote; a failure does not stop the others.
func (rs *restorer) renameAll() []error {
	var errs []error
	for i, s := range rs.temps {
		d, err := rs.o.open(s.dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd(d), s.tmp, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || idOf(&st) != s.id {
			errs = append(errs, fmt.Errorf("%s: its temporary file %s was removed or replaced: not renamed into place", path.Join(s.dir, s.name), s.tmp))
			rs.temps[i].tmp = ""
			continue
		}
		if err := unix.Renameat(fd(d), s.tmp, fd(d), s.name); err != nil {
			errs = append(errs, fmt.Errorf("rename %s to %s: %w", path.Join(s.dir, s.tmp), s.name, err))
			continue
		}
		rs.temps[i].tmp = "" // renamed: nothing to clean up
		rs.written = true
		rs.touched[s.dir] = true
		rs.after("renamed " + path.Join(s.dir, s.name))
	}
	return errs
}

// setDirs sets the archive's directories' owners, modes and times, deepest first.
func (rs *restorer) setDirs() []error {
	var errs []error
	entries := rs.p.a.m.Entries
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if e.Type != TypeDir {
			continue
		}
		d, err := rs.o.open(e.Path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if rs.chown {
			if err := unix.Fchown(fd(d), int(e.UID), int(e.GID)); err != nil {
				errs = append(errs, fmt.Errorf("chown %s: %w", e.Path, err))
			}
		}
		if err := unix.Fchmod(fd(d), uint32(e.Mode)); err != nil {
			errs = append(errs, fmt.Errorf("chmod %s: %w", e.Path, err))
		}
		t := unix.Timeval{Sec: e.ModTime}
		if err := unix.Futimes(fd(d), []unix.Timeval{t, t}); err != nil {
			errs = append(errs, fmt.Errorf("set the time of %s: %w", e.Path, err))
		}
		rs.written = true
		rs.after("chmod " + e.Path)
	}
	return errs
}

// syncAll makes the restore durable before it is done: every directory of the archive (its
// entries renamed or created, its owner, mode and time set), each once, deepest first; then
// the parent of a root the restore created, which lies outside the scope.
func (rs *restorer) syncAll() []error {
	var errs []error
	for _, e := range rs.p.a.m.Entries {
		if e.Type == TypeDir {
			rs.touched[e.Path] = true
		}
	}
	dirs := make([]string, 0, len(rs.touched))
	for d := range rs.touched {
		dirs = append(dirs, d)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, dir := range dirs {
		d, err := rs.o.open(dir)
		if err == nil {
			err = syncDir(dir, d)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, c := range rs.created {
		if rs.p.sc.isRoot(c) {
			errs = append(errs, rs.p.syncOutside(path.Dir(c)))
		}
	}
	return errs
}

// syncOutside fsyncs the directory dir, outside the scope (the parent of a root): it is
// opened by its path, since syncing it reads and writes nothing through it.
func (p *Plan) syncOutside(dir string) error {
	d, err := os.Open(p.sc.abs(dir))
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	defer d.Close()
	return syncDir(dir, d)
}

// tempPrefix starts the names of a restore's temporary files.
const tempPrefix = ".cutover-restore-"

// removeStale removes, from the directory d (dir), the temporary files and links a killed
// restore left: regular files and links named with tempPrefix, never a directory.
func removeStale(d *os.File, dir string) error {
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	for _, n := range names {
		if !strings.HasPrefix(n, tempPrefix) {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd(d), n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue
		}
		if t := st.Mode & unix.S_IFMT; t != unix.S_IFREG && t != unix.S_IFLNK {
			continue
		}
		if err := unix.Unlinkat(fd(d), n, 0); err != nil {
			return fmt.Errorf("remove %s left by a killed restore: %w", path.Join(dir, n), err)
		}
	}
	return nil
}

// mkdir creates the directory p of the archive, 0700, in its parent reached without a link,
// and records it as the directory the restore may write into.
func (p *Plan) mkdir(o *opener, dir string) error {
	var f *os.File
	var id fileID
	var err error
	if p.sc.isRoot(dir) {
		err = unix.Mkdir(p.sc.abs(dir), 0o700)
		if err == nil {
			f, id, err = openFollow(p.sc.abs(dir))
		}
	} else {
		var parent *os.File
		if parent, err = o.open(dirOf(dir)); err != nil {
			return err
		}
		err = unix.Mkdirat(fd(parent), path.Base(dir), 0o700)
		if err == nil {
			f, id, err = openDirAt(parent, path.Base(dir), dir)
		}
	}
	if errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("%s appeared since the check: refused", dir)
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	defer f.Close()
	// The directory just made is this process's: someone else's put there in between is not.
	var st unix.Stat_t
	if err := unix.Fstat(fd(f), &st); err != nil || st.Uid != uint32(os.Geteuid()) {
		return fmt.Errorf("%s was replaced since it was created: refused", dir)
	}
	o.ids[dir] = id
	return nil
}

// writeFile writes one file of the archive through its descriptor: content, owner (as
// root), mode with setuid, setgid and sticky (after the owner, which clears them), time,
// synced.
func writeFile(f *os.File, e Entry, content io.Reader, chown bool) error {
	n, err := io.Copy(f, content)
	if err != nil {
		return err
	}
	if n != e.Size {
		return fmt.Errorf("%d bytes in the archive, %d in the manifest", n, e.Size)
	}
	if chown {
		if err := unix.Fchown(fd(f), int(e.UID), int(e.GID)); err != nil {
			return err
		}
	}
	if err := unix.Fchmod(fd(f), uint32(e.Mode)); err != nil {
		return err
	}
	t := unix.Timeval{Sec: e.ModTime}
	if err := unix.Futimes(fd(f), []unix.Timeval{t, t}); err != nil {
		return err
	}
	return f.Sync()
}

// cleanup removes the temporary files a failed restore left and, when dirs is set, the
// directories it created, through the same checked descriptors.
func (p *Plan) cleanup(o *opener, temps []staged, created []string, dirs bool) error {
	var errs []error
	for _, s := range temps {
		if s.tmp == "" {
			continue
		}
		d, err := o.open(s.dir)
		if err == nil {
			err = unix.Unlinkat(fd(d), s.tmp, 0)
		}
		if err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("remove %s: %w", path.Join(s.dir, s.tmp), err))
		}
	}
	if !dirs {
		return errors.Join(errs...)
	}
	o.close()
	for i := len(created) - 1; i >= 0; i-- {
		c := created[i]
		var err error
		if p.sc.isRoot(c) {
			err = unix.Rmdir(p.sc.abs(c))
		} else {
			var d *os.File
			if d, err = o.open(dirOf(c)); err == nil {
				err = unix.Unlinkat(fd(d), path.Base(c), unix.AT_REMOVEDIR)
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", c, err))
		}
	}
	return errors.Join(errs...)
}
