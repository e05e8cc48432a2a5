package backup

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cutover/cutover/journal"
	"golang.org/x/sys/unix"
)

// ErrChanged is wrapped by the error of a backup that found a file changed between listing
// and reading it: swapped for a link or another file, shrunk or grown.
var ErrChanged = errors.New("changed while it was archived")

// maxDepth bounds how deep a backup walks; deeper directories are skipped and listed.
const maxDepth = 256

// testHookListed, when set by a test, is called with each path a backup has listed, before
// it opens it: where an attacker's swap is made deterministic.
var testHookListed func(p string)

// Write archives the roots of sc into a new archive in dir described by m (its kind, app,
// run, versions and creation time; the rest is filled in), mode 0600, and returns its path
// and the complete manifest. A missing root is skipped. It writes temporary files, syncs the
// archive and renames it into place, so an archive that exists is complete; it never
// replaces an archive of the same name.
//
// Every directory is opened relative to its parent, never through a link, and every regular
// file is opened without following a link, checked against the device and inode it was
// listed with, and read and checksummed from that one descriptor; a file swapped for a link
// or another file in between fails the backup (ErrChanged), naming it. Sockets, fifos,
// devices and links that CheckLink refuses are not archived: the manifest lists them as
// Skipped.
func Write(ctx context.Context, dir string, sc Scope, m Manifest) (string, Manifest, error) {
	if err := sc.check(); err != nil {
		return "", Manifest{}, err
	}
	if m.Kind == "" {
		m.Kind = KindSwitch
	}
	m.Format, m.Roots, m.Links, m.Entries, m.Skipped = Format, slices.Clone(sc.Roots), map[string]string{}, []Entry{}, []Skipped{}
	if err := privateDir(dir); err != nil {
		return "", Manifest{}, fmt.Errorf("backup: %w", err)
	}
	// Names are to the second: a second backup of the same kind within one takes the next
	// free second rather than failing the run (an archive is never replaced).
	name := m.ID() + ".tar.gz"
	for i := 0; i < maxNameTries; i++ {
		if _, err := os.Lstat(filepath.Join(dir, name)); errors.Is(err, fs.ErrNotExist) {
			break
		}
		m.Created = m.Created.Add(time.Second)
		name = m.ID() + ".tar.gz"
	}
	final := filepath.Join(dir, name)

	// The entries first, into a gzip member of their own, checksummed as they are read.
	body, err := os.CreateTemp(dir, "."+name+".*.entries")
	if err != nil {
		return "", Manifest{}, fmt.Errorf("backup: %w", err)
	}
	defer os.Remove(body.Name())
	defer body.Close()
	gz := gzip.NewWriter(body)
	w := &walker{ctx: ctx, sc: sc, tw: tar.NewWriter(gz), m: &m}
	for _, root := range sc.Roots {
		if err := w.root(root); err != nil {
			return "", Manifest{}, fmt.Errorf("backup: %w", err)
		}
	}
	if err := w.tw.Close(); err != nil {
		return "", Manifest{}, fmt.Errorf("backup: %w", err)
	}
	if err := gz.Close(); err != nil {
		return "", Manifest{}, fmt.Errorf("backup: %w", err)
	}

	// Then the archive: the manifest in the first gzip member, the entries after it.
	out, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return "", Manifest{}, fmt.Errorf("backup: %w", err)
	}
	defer os.Remove(out.Name())
	err = func() error {
		data, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			return err
		}
		gz := gzip.NewWriter(out)
		tw := tar.NewWriter(gz)
		if err := tw.WriteHeader(&tar.Header{Name: ManifestName, Mode: 0o600, Size: int64(len(data)), ModTime: m.Created, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
		// No Close: the end of the tar stream is in the entries' member.
		if err := tw.Flush(); err != nil {
			return err
		}
		if err := gz.Close(); err != nil {
			return err
		}
		if _, err := body.Seek(0, io.SeekStart); err != nil {
			return err
		}
		if _, err := io.Copy(out, body); err != nil {
			return err
		}
		return out.Sync()
	}()
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = renameNoReplace(out.Name(), final)
	}
	if err == nil {
		err = syncPath(dir)
	}
	if err != nil {
		return "", Manifest{}, fmt.Errorf("backup: write %s: %w", final, err)
	}
	return final, m, nil
}

// privateDir makes dir, 0700, durably (with its missing parents, each synced with the
// directory holding it), or tightens it to 0700 when it exists looser.
func privateDir(dir string) error {
	if err := journal.MkdirAllDurable(dir, 0o700); err != nil {
		return err
	}
	info, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if info.Mode().Perm()&0o077 != 0 {
		return os.Chmod(dir, 0o700)
	}
	return nil
}

// renameNoReplace renames oldpath to newpath unless newpath exists.
func renameNoReplace(oldpath, newpath string) error {
	err := unix.Renameat2(unix.AT_FDCWD, oldpath, unix.AT_FDCWD, newpath, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		// A file system without RENAME_NOREPLACE.
		if _, lerr := os.Lstat(newpath); lerr == nil {
			return fmt.Errorf("%s exists", newpath)
		}
		return os.Rename(oldpath, newpath)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	return nil
}

// syncPath fsyncs the directory dir, making a rename, a removal or a new entry in it
// durable.
func syncPath(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	defer d.Close()
	return syncDir(dir, d)
}

// syncDir fsyncs the open directory d, known as name (a path of the scope, or of the disk);
// its error names the directory.
func syncDir(name string, d *os.File) error {
	if err := fsyncDir(name, d); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("sync directory %s: %w", name, err)
	}
	return nil
}

// fsyncDir fsyncs the open directory d, known as name. It is a variable so that tests can
// see which directories are synced, and make a sync fail.
var fsyncDir = func(name string, d *os.File) error { return d.Sync() }

// walker archives the roots of a scope.
type walker struct {
	ctx context.Context
	sc  Scope
	tw  *tar.Writer
	m   *Manifest
}

// root archives one top-level directory: opened by its path, following a link on purpose.
func (w *walker) root(root string) error {
	d, _, err := openFollow(w.sc.abs(root))
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", root, err)
	}
	defer d.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd(d), &st); err != nil {
		return fmt.Errorf("inspect %s: %w", root, err)
	}
	if err := w.add(entryOf(root, TypeDir, &st)); err != nil {
		return err
	}
	return w.dir(d, root, 1)
}

// dir archives what directory d, at p, holds, in name order.
func (w *walker) dir(d *os.File, p string, depth int) error {
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("read directory %s: %w", p, err)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		child := path.Join(p, name)
		var st unix.Stat_t
		err := unix.Fstatat(fd(d), name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if errors.Is(err, unix.ENOENT) {
			continue // removed since the listing
		}
		if err != nil {
			return fmt.Errorf("inspect %s: %w", child, err)
		}
		if testHookListed != nil {
			testHookListed(child)
		}
		typ := st.Mode & unix.S_IFMT
		switch {
		case slices.Contains(w.sc.Exclude, child):
			w.skip(child, typeName(st.Mode), ReasonExcluded)
		case len(child) > maxPath || (typ == unix.S_IFDIR && depth >= maxDepth):
			w.skip(child, typeName(st.Mode), fmt.Sprintf("deeper than %d directories or longer than %d bytes", maxDepth, maxPath))
		case typ == unix.S_IFDIR:
			err = w.subdir(d, name, child, &st, depth)
		case typ == unix.S_IFREG:
			err = w.file(d, name, child, &st)
		case typ == unix.S_IFLNK:
			err = w.symlink(d, name, child, &st)
		default:
			w.skip(child, typeName(st.Mode), "")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (w *walker) skip(p, typ, reason string) {
	w.m.Skipped = append(w.m.Skipped, Skipped{Path: p, Type: typ, Reason: reason})
}

func (w *walker) subdir(d *os.File, name, p string, listed *unix.Stat_t, depth int) error {
	sub, id, err := openDirAt(d, name, p)
	if swapped(err) {
		return fmt.Errorf("%s %w (listed as a directory, then a link or a file was there): refused, nothing is read through a link", p, ErrChanged)
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", p, err)
	}
	defer sub.Close()
	if id != idOf(listed) {
		return fmt.Errorf("%s %w (another directory was put there after it was listed): refused", p, ErrChanged)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd(sub), &st); err != nil {
		return fmt.Errorf("inspect %s: %w", p, err)
	}
	if err := w.add(entryOf(p, TypeDir, &st)); err != nil {
		return err
	}
	return w.dir(sub, p, depth+1)
}

// file archives a regular file from one descriptor: opened without following a link,
// checked to be the file listed, read and checksummed from there.
func (w *walker) file(d *os.File, name, p string, listed *unix.Stat_t) error {
	n, err := unix.Openat(fd(d), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if swapped(err) {
		return fmt.Errorf("%s %w (listed as a regular file, then a link was there): refused, nothing is read through a link", p, ErrChanged)
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", p, err)
	}
	f := os.NewFile(uintptr(n), p)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(n, &st); err != nil {
		return fmt.Errorf("inspect %s: %w", p, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || idOf(&st) != idOf(listed) {
		return fmt.Errorf("%s %w (listed as one regular file, opened as another %s): refused", p, ErrChanged, typeName(st.Mode))
	}
	if err := unix.SetNonblock(n, false); err != nil {
		return fmt.Errorf("open %s: %w", p, err)
	}
	e := entryOf(p, TypeFile, &st)
	e.Size = st.Size
	if err := w.tw.WriteHeader(header(e)); err != nil {
		return fmt.Errorf("archive %s: %w", p, err)
	}
	h := sha256.New()
	copied, err := io.Copy(io.MultiWriter(w.tw, h), io.LimitReader(f, e.Size))
	if err != nil {
		return fmt.Errorf("read %s: %w", p, err)
	}
	if copied != e.Size {
		return fmt.Errorf("%s %w (it shrank while it was read)", p, ErrChanged)
	}
	var more [1]byte
	if k, _ := f.Read(more[:]); k > 0 {
		return fmt.Errorf("%s %w (it grew while it was read)", p, ErrChanged)
	}
	e.SHA256 = hex.EncodeToString(h.Sum(nil))
	w.m.Entries = append(w.m.Entries, e)
	return nil
}

// symlink archives a link as it is, never following it, when CheckLink allows its target;
// otherwise it lists it as skipped.
func (w *walker) symlink(d *os.File, name, p string, listed *unix.Stat_t) error {
	target, err := readlinkAt(d, name)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("%s %w (listed as a link, then something else was there): refused", p, ErrChanged)
	}
	if err != nil {
		return fmt.Errorf("read link %s: %w", p, err)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(fd(d), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFLNK || idOf(&st) != idOf(listed) {
		return fmt.Errorf("%s %w (another link was put there while it was read): refused", p, ErrChanged)
	}
	if err := w.sc.CheckLink(p, target); err != nil {
		w.skip(p, "symlink", strings.TrimPrefix(err.Error(), p+" "))
		return nil
	}
	e := entryOf(p, TypeSymlink, &st)
	e.Link = target
	if _, ok := w.sc.Links[p]; ok {
		w.m.Links[p] = target
	}
	return w.add(e)
}

// add writes the header of a directory or symlink and records it in the manifest.
func (w *walker) add(e Entry) error {
	if err := w.tw.WriteHeader(header(e)); err != nil {
		return fmt.Errorf("archive %s: %w", e.Path, err)
	}
	w.m.Entries = append(w.m.Entries, e)
	return nil
}

// entryOf is the entry of p as fstat described it.
func entryOf(p, typ string, st *unix.Stat_t) Entry {
	return Entry{Path: p, Type: typ, Mode: Mode(st.Mode & 0o7777), UID: st.Uid, GID: st.Gid, ModTime: st.Mtim.Sec}
}

// header is the tar header of e.
func header(e Entry) *tar.Header {
	h := &tar.Header{
		Name: strings.TrimPrefix(e.Path, "/"), Mode: int64(e.Mode), Uid: int(e.UID), Gid: int(e.GID),
		ModTime: time.Unix(e.ModTime, 0),
	}
	switch e.Type {
	case TypeDir:
		h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
	case TypeFile:
		h.Typeflag, h.Size = tar.TypeReg, e.Size
	case TypeSymlink:
		h.Typeflag, h.Linkname = tar.TypeSymlink, e.Link
	}
	return h
}

// maxNameTries bounds the search for a free archive name.
const maxNameTries = 60

// ReasonExcluded is the reason of a Skipped entry the scope excluded on purpose.
const ReasonExcluded = "excluded by the configuration (backup_exclude)"
