// Package staging puts a version's trees on the nodes ahead of a switch (cutover stage): it
// reads a tree from a directory or a .tar.gz, describes it by a manifest of every entry with
// the SHA-256 of every file, and copies it to a node into a hidden temporary directory beside
// its final place, sending only the files the node does not already hold, checking every
// entry on the node against the manifest and only then renaming the directory into place.
//
// A source is hostile until checked (Policy): an archive is unpacked beneath a directory the
// caller made, and a tree is read and sent, by descriptors opened one name at a time without
// following links (beneath.go), so nothing is ever written, chmodded or read through a link.
//
// The copy is a tar stream over one plain command per node (tar on the node extracts it), so
// it works whether or not the node's sshd has an SFTP subsystem, and costs one session per
// node whatever the number of files. What a node holds is listed by a stream and checksummed
// in batches, so a tree of any size is read whole, never cut at a command's read limit; a
// listing and what a check needs with it (the checksums of what arrived, the manifest) come
// in one command, since every command is a session of its own.
//
// A placed tree keeps its manifest beside it (manifest.go: ManifestPath): [Verify] judges a
// node's tree against its manifest by the SHA-256 of every file computed on the node, never
// by sizes and times; [Compare] judges it against the source the same way, except that a
// file that keeps the stamp (device, inode, ctime) its manifest recorded when its checksum
// was checked is not read again. The package does not import upgrade.
package staging

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Entry is one entry of a tree: a directory, a regular file, a symbolic link, or, where the
// policy allows them, a fifo or a device.
type Entry struct {
	Name   string      // slash-separated path relative to the tree's root, never "." or with ".."
	Kind   byte        // 'd' directory, 'f' regular file, 'l' symbolic link, 'p' fifo, 'c' or 'b' device
	Mode   fs.FileMode // permission bits, setuid, setgid and sticky included (not for links)
	Size   int64       // a file's size
	MTime  int64       // a file's modification time, Unix nanoseconds; the copy on a node keeps it
	Sum    string      // a file's SHA-256, hex
	Target string      // a link's target, as stored
	Dev    uint64      // a device's number
}

// Tree is a local directory tree to stage and its manifest, sorted by name, so that a
// directory comes before what it holds. Its files are read again, to be sent, from beneath
// the same root, by descriptors opened without following links, and each must still be the
// file that was listed and checksummed.
type Tree struct {
	Dir     string
	Mode    fs.FileMode // the root directory's mode
	Entries []Entry
	Bytes   int64 // the sum of the files' sizes

	base, name string            // Dir is name beneath base
	rootID     fileID            // the root directory as it was read
	ids        map[string]fileID // every file as it was read
	readAt     time.Time         // when the reading began: stamps younger than that are racy
	enc        *encoded          // the whole tree's tar stream, once Encode (or UnpackTrees) wrote it
	offsets    map[string]int64  // where each file's contents lie in enc, for a tree UnpackTrees wrote
}

// modeBits are the mode bits a tree's entries keep.
const modeBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// ReadTree describes the tree at dir, which must be a directory (a link to one is followed
// once), with a policy that bounds nothing and allows no special entry.
func ReadTree(dir string) (*Tree, error) {
	return ReadTreeAt(dir, ".", Policy{})
}

// ReadTreeAt describes the tree name (a clean slash-separated path, "." for base itself)
// beneath the directory base. base is followed once if it is a link; every name beneath it,
// name included, is opened without following links, and a link where a directory is
// expected is refused. Every file is checksummed from the descriptor it was opened with, and
// refused if it changed while it was read. Entries the policy does not allow, past its
// bounds, or whose names a shell line or the manifest cannot carry (control characters) are
// refused; errors name the entry as name/entry.
func ReadTreeAt(base, name string, p Policy) (*Tree, error) {
	return readTree(base, name, p, &budget{p: p}, nil)
}

// ReadTrees describes the trees names beneath base as ReadTreeAt does, with the policy's
// bounds counting them together. A file whose stamp known holds, trusted (see Stamps), is
// not opened: its checksum is the one known recorded with the stamp. known may be nil.
func ReadTrees(base string, names []string, p Policy, known *Stamps) ([]*Tree, error) {
	b := &budget{p: p}
	var out []*Tree
	for _, name := range names {
		t, err := readTree(base, name, p, b, known)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func readTree(base, name string, p Policy, b *budget, known *Stamps) (*Tree, error) {
	readAt := stampNow()
	basefd, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", base, err)
	}
	rootfd, err := openDirBeneath(basefd, name)
	unix.Close(basefd)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	root := os.NewFile(uintptr(rootfd), name)
	defer root.Close()
	var st unix.Stat_t
	if err := unix.Fstat(rootfd, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	t := &Tree{Dir: filepath.Join(base, filepath.FromSlash(name)), Mode: fileMode(st.Mode), base: base, name: name,
		rootID: idOf(&st), ids: map[string]fileID{}, readAt: readAt}
	if err := p.checkEntry(".", 'd', t.Mode); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	w := walker{t: t, p: p, b: b, known: known}
	if err := w.dir(root, ""); err != nil {
		return nil, err
	}
	sort.Slice(t.Entries, func(i, j int) bool { return t.Entries[i].Name < t.Entries[j].Name })
	return t, nil
}

// walker reads the entries of a tree into it.
type walker struct {
	t     *Tree
	p     Policy
	b     *budget
	known *Stamps
}

// dirBatch is how many names of a directory are listed at a time, so that the bounds are
// checked before a huge directory is listed whole.
const dirBatch = 1024

// dir reads the entries of the open directory d, whose name in the tree is rel ("" for the
// root).
func (w *walker) dir(d *os.File, rel string) error {
	for {
		names, err := d.Readdirnames(dirBatch)
		for _, n := range names {
			if err := w.entry(d, path.Join(rel, n), n); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && len(names) == 0) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", w.show(rel), err)
		}
	}
}

// show is how errors name the entry rel.
func (w *walker) show(rel string) string {
	return path.Join(w.t.name, rel)
}

// entry reads the entry called n in the directory d, whose name in the tree is rel.
func (w *walker) entry(d *os.File, rel, n string) error {
	fail := func(err error) error { return fmt.Errorf("%s: %w", w.show(rel), err) }
	if strings.ContainsFunc(rel, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return fail(errors.New("a control character in the name"))
	}
	if err := w.b.entry(rel); err != nil {
		return fail(err)
	}
	dfd := int(d.Fd())
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fail(err)
	}
	if testHookListed != nil {
		testHookListed(w.show(rel))
	}
	e := Entry{Name: rel, Mode: fileMode(st.Mode)}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		e.Kind = 'd'
	case unix.S_IFREG:
		e.Kind = 'f'
	case unix.S_IFLNK:
		e.Kind, e.Mode = 'l', 0o777
	case unix.S_IFIFO:
		e.Kind = 'p'
	case unix.S_IFCHR:
		e.Kind, e.Dev = 'c', st.Rdev
	case unix.S_IFBLK:
		e.Kind, e.Dev = 'b', st.Rdev
	default:
		return fail(errors.New("a socket: a version tree holds directories, files and links"))
	}
	if err := w.p.checkEntry(rel, e.Kind, e.Mode); err != nil {
		return fail(err)
	}
	switch e.Kind {
	case 'd':
		fd, err := openAt(dfd, n, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return fail(err)
		}
		sub := os.NewFile(uintptr(fd), rel)
		defer sub.Close()
		var now unix.Stat_t
		if err := unix.Fstat(fd, &now); err != nil {
			return fail(err)
		}
		if now.Dev != st.Dev || now.Ino != st.Ino {
			return fail(errors.New("replaced while it was read"))
		}
		e.Mode = fileMode(now.Mode)
		w.t.Entries = append(w.t.Entries, e)
		return w.dir(sub, rel)
	case 'f':
		if st.Nlink > 1 {
			if err := w.p.checkHardlink(rel); err != nil {
				return fail(err)
			}
		}
		if err := w.b.size(st.Size); err != nil {
			return fail(err)
		}
		if sum, ok := w.known.sum(w.t.name, rel, &st); ok {
			// The file keeps the stamp it had when it was read last: its checksum is known,
			// and the file is not opened. Send reads it again, and refuses it unless it has
			// that checksum still.
			e.Mode, e.Size, e.MTime, e.Sum = fileMode(st.Mode), st.Size, st.Mtim.Nano(), sum
			w.t.ids[rel] = idOf(&st)
		} else if err := w.file(dfd, n, &st, &e); err != nil {
			return fail(err)
		}
		w.t.Bytes += e.Size
	case 'l':
		target, err := readlinkAt(dfd, n)
		if err != nil {
			return fail(err)
		}
		e.Target = target
	}
	w.t.Entries = append(w.t.Entries, e)
	return nil
}

// file checksums the regular file n of the directory dfd, listed as st, into e, from one
// descriptor opened without following links, and refuses it if it is not the file that was
// listed or if it changed while it was read.
func (w *walker) file(dfd int, n string, st *unix.Stat_t, e *Entry) error {
	fd, err := openAt(dfd, n, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), e.Name)
	defer f.Close()
	var before unix.Stat_t
	if err := unix.Fstat(fd, &before); err != nil {
		return err
	}
	if before.Mode&unix.S_IFMT != unix.S_IFREG || idOf(&before) != idOf(st) {
		return errors.New("replaced while it was read")
	}
	if testHookOpened != nil {
		testHookOpened(w.show(e.Name))
	}
	sum, err := sumExactly(f, before.Size)
	if err != nil {
		return err
	}
	var after unix.Stat_t
	if err := unix.Fstat(fd, &after); err != nil {
		return err
	}
	if idOf(&after) != idOf(&before) {
		return errors.New("changed while it was read")
	}
	e.Mode, e.Size, e.MTime, e.Sum = fileMode(before.Mode), before.Size, before.Mtim.Nano(), sum
	w.t.ids[e.Name] = idOf(&before)
	return nil
}

// sumExactly returns the SHA-256 of r, which must hold exactly size bytes: a file that grew
// or shrank while it was read is an error.
func sumExactly(r io.Reader, size int64) (string, error) {
	h := sha256.New()
	if err := copyExactly(h, r, size); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// copyExactly copies exactly size bytes of r to w, and refuses an r that holds more or less.
func copyExactly(w io.Writer, r io.Reader, size int64) error {
	n, err := io.Copy(w, io.LimitReader(r, size))
	if err != nil {
		return err
	}
	var one [1]byte
	if m, _ := r.Read(one[:]); n != size || m != 0 {
		return errors.New("changed while it was read (its size)")
	}
	return nil
}

// testHookListed and testHookOpened, when set by a test, are called with an entry's name once
// it is listed and once a file is opened, to change the source at those moments.
var testHookListed, testHookOpened func(name string)

// Equal reports whether two trees have the same entries.
func (t *Tree) Equal(o *Tree) bool {
	if len(t.Entries) != len(o.Entries) {
		return false
	}
	if t.Mode != o.Mode {
		return false
	}
	for i := range t.Entries {
		if t.Entries[i] != o.Entries[i] {
			return false
		}
	}
	return true
}
