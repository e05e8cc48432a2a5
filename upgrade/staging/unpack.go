package staging

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Unpack extracts the trees of a .tar.gz archive into dir, an empty directory the caller made
// and nobody else writes in. trees are the archive names of the trees to extract (clean
// slash-separated paths such as "usr/lib/app/1.2.0"); entries elsewhere in the archive are
// not written, only counted against the policy's bounds.
//
// The archive is read twice. The first reading checks every entry and adds up what the
// archive needs (its members by their declared sizes, so a sparse or highly compressed member
// counts by its real size) and refuses an archive past the policy's bounds or larger than
// the free space of dir's file system, before anything is written. The second reading checks
// everything again, and writes beneath dir only, by descriptors, one name at a time, never
// following a link: a name given twice, a name beneath a link or a file, "..", an absolute
// name, a hard link to anything but a file of the same tree, and any entry the policy does not
// allow are refused, naming the entry. Modes are set explicitly from the archive's permission
// bits as the policy allows them; owners are the caller's (root's), never the archive's.
//
// The Archive returned has the archive's stamp and SHA-256 when both readings read the same
// bytes: what SaveStamps keeps, so that the next stage of an unchanged archive need not read it.
func Unpack(archive, dir string, trees []string, p Policy) (*Archive, error) {
	f, err := os.OpenFile(archive, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", archive, fi.Mode().Type())
	}
	reading, err := newArchiveReading(f)
	if err != nil {
		return nil, err
	}
	first := newExtractor(trees, p, -1)
	if err := first.readAll(reading); err != nil {
		return nil, err
	}
	if err := checkFree(dir, first.b.bytes, first.b.files); err != nil {
		return nil, err
	}
	dirfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dirfd)
	second := newExtractor(trees, p, dirfd)
	// The archive may change between the readings: the second never writes more than the
	// first counted.
	second.b.p.MaxBytes, second.b.p.MaxFiles = max(first.b.bytes, 1), max(first.b.files, 1)
	defer second.dirs.close()
	if err := second.readAll(reading); err != nil {
		return nil, err
	}
	if err := second.setDirModes(); err != nil {
		return nil, err
	}
	a := reading.archive()
	a.made = second.made
	return a, nil
}

// readAll reads the whole archive once more, from its start.
func (x *extractor) readAll(r *archiveReading) error {
	in, err := r.reader()
	if err != nil {
		return err
	}
	if err := x.read(in); err != nil {
		return err
	}
	return r.finish()
}

// extractor reads an archive once: it checks every entry and, when it has a directory to
// write in, extracts it.
type extractor struct {
	trees    []string
	p        Policy
	b        budget
	dirfd    int                    // where the archive is extracted; -1 checks only
	dirs     dirCache               // the parent directories of the entries, beneath dirfd
	kinds    map[string]byte        // what the archive put at each name (see below)
	files    map[string]fileFacts   // the regular files extracted, for hard links to them
	dirModes map[string]fs.FileMode // the directories' modes, set last
	made     *Stamps                // the files written, with their stamps and checksums
	out      *treeStreams           // where UnpackTrees writes the trees' streams instead
}

// The kinds an extractor records besides an Entry's: 'A' is a directory above a tree's root,
// 'D' a directory the extractor made because the archive put something in it before naming
// it.
const (
	kindAbove    = 'A'
	kindImplicit = 'D'
)

// fileFacts are what a hard link to a file copies.
type fileFacts struct {
	tree string
	mode fs.FileMode
	size int64
}

func newExtractor(trees []string, p Policy, dirfd int) *extractor {
	return &extractor{trees: trees, p: p, b: budget{p: p}, dirfd: dirfd, dirs: dirCache{root: dirfd},
		kinds: map[string]byte{}, files: map[string]fileFacts{}, dirModes: map[string]fs.FileMode{}, made: &Stamps{files: map[stampKey]stampRec{}}}
}

// read checks, and extracts when it may write, every entry of the .tar.gz r.
func (x *extractor) read(r io.Reader) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			if err := x.b.entry("."); err != nil {
				return fmt.Errorf("entry %q: %w", h.Name, err)
			}
			continue
		}
		if err := x.entry(h, tr); err != nil {
			return fmt.Errorf("entry %q: %w", h.Name, err)
		}
	}
}

// entryName returns the clean relative name of an archive entry, "." for the archive's root.
func entryName(raw string, dir bool) (string, error) {
	name := raw
	if strings.HasPrefix(name, "/") {
		return "", errors.New("an absolute name: an archive's names are relative to its root")
	}
	for strings.HasPrefix(name, "./") {
		name = name[2:]
	}
	if dir {
		name = strings.TrimSuffix(name, "/")
	}
	if name == "" || name == "." {
		return ".", nil
	}
	if strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", errors.New("a control character in the name")
	}
	for _, el := range strings.Split(name, "/") {
		if el == ".." {
			return "", errors.New(`a name with "..": an archive may not reach above its root`)
		}
	}
	if !fs.ValidPath(name) {
		return "", errors.New("not a clean relative name")
	}
	return name, nil
}

// where places the archive name among the trees: the tree and the name relative to its root
// ("." for the root), or above whether name is a directory above a tree's root.
func (x *extractor) where(name string) (tree, rel string, above bool) {
	for _, t := range x.trees {
		switch {
		case name == t:
			return t, ".", false
		case strings.HasPrefix(name, t+"/"):
			return t, name[len(t)+1:], false
		case strings.HasPrefix(t, name+"/"):
			above = true
		}
	}
	return "", "", above
}

// kindOfHeader maps a tar type to an Entry kind; 'h' is a hard link, 0 a type no tree holds.
func kindOfHeader(t byte) byte {
	switch t {
	case tar.TypeDir:
		return 'd'
	case tar.TypeReg, tar.TypeGNUSparse:
		return 'f'
	case tar.TypeSymlink:
		return 'l'
	case tar.TypeLink:
		return 'h'
	case tar.TypeFifo:
		return 'p'
	case tar.TypeChar:
		return 'c'
	case tar.TypeBlock:
		return 'b'
	}
	return 0
}

// entry checks, and extracts when it may write, one entry of the archive; data is its
// contents.
func (x *extractor) entry(h *tar.Header, data io.Reader) error {
	kind := kindOfHeader(h.Typeflag)
	if kind == 0 {
		return fmt.Errorf("type %q: a version tree holds directories, files and links (and fifos and devices where [stage] allows them)", h.Typeflag)
	}
	if kind != 'f' && h.Size != 0 {
		return fmt.Errorf("declares %d bytes of contents for an entry that has none", h.Size)
	}
	name, err := entryName(h.Name, kind == 'd')
	if err != nil {
		return err
	}
	tree, rel, above := x.where(name)
	budgetName := rel
	if tree == "" {
		budgetName = "."
	}
	if err := x.b.entry(budgetName); err != nil {
		return err
	}
	if kind == 'f' {
		if err := x.b.size(h.Size); err != nil {
			return err
		}
	}
	switch {
	case name == ".":
		return nil
	case above:
		if kind != 'd' {
			return fmt.Errorf("a %s where the directory above %s must be", kindWord(kind), strings.Join(x.trees, " and "))
		}
		if k, ok := x.kinds[name]; ok && k != kindImplicit {
			return errors.New("named twice in the archive")
		}
		x.kinds[name] = kindAbove
		return nil
	case tree == "":
		return nil // not part of the trees: not written
	}
	if rel == "." && kind != 'd' {
		return fmt.Errorf("a %s where the root directory of a tree must be", kindWord(kind))
	}
	if err := x.checkPlace(name, kind); err != nil {
		return err
	}
	mode := unixPerm(uint32(h.Mode) & 0o7777)
	if kind == 'l' {
		mode = 0o777
	}
	if kind == 'h' {
		return x.hardlink(name, tree, rel, h.Linkname)
	}
	if err := x.p.checkEntry(rel, kind, mode); err != nil {
		return err
	}
	if kind == 'l' && strings.ContainsFunc(h.Linkname, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return errors.New("a control character in the link's target")
	}
	x.kinds[name] = kind
	if kind == 'f' {
		x.files[name] = fileFacts{tree: tree, mode: mode, size: h.Size}
	}
	if kind == 'd' {
		x.dirModes[name] = mode
	}
	if x.out != nil {
		return x.out.entry(x, name, tree, rel, kind, mode, h, data)
	}
	if x.dirfd < 0 {
		return nil
	}
	return x.write(name, kind, mode, h, data)
}

// kindWord names a kind for people.
func kindWord(kind byte) string {
	switch kind {
	case 'f':
		return "file"
	case 'l':
		return "symbolic link"
	case 'h':
		return "hard link"
	case 'p':
		return "fifo"
	case 'c', 'b':
		return "device"
	}
	return "directory"
}

// checkPlace refuses an entry at name whose name the archive gave already (a directory the
// extractor made for earlier entries excepted) or that lies beneath anything but a directory:
// an entry never replaces another and is never written through a link.
func (x *extractor) checkPlace(name string, kind byte) error {
	if k, ok := x.kinds[name]; ok && !(k == kindImplicit && kind == 'd') {
		return fmt.Errorf("named twice in the archive (first as a %s): an entry never replaces another", kindWord(k))
	}
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		k, ok := x.kinds[dir]
		if !ok {
			continue
		}
		if k != 'd' && k != kindImplicit && k != kindAbove {
			return fmt.Errorf("lies beneath %s, which the archive made a %s: an archive never writes through it", dir, kindWord(k))
		}
		break // its own parents were checked when it was recorded
	}
	// Directories the archive did not name are made for it.
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		if _, ok := x.kinds[dir]; ok {
			break
		}
		x.kinds[dir] = kindImplicit
		if _, rel, _ := x.where(dir); rel != "" {
			x.dirModes[dir] = 0o755
		}
	}
	return nil
}

// parent returns a descriptor of the directory that holds name, making the directories
// above it that do not exist yet (0700; a tree's directories get their modes at the end).
func (x *extractor) parent(name string) (int, error) {
	dir := path.Dir(name)
	fd, err := x.dirs.open(dir)
	if err == nil || !errors.Is(err, unix.ENOENT) {
		return fd, err
	}
	up, err := x.parent(dir)
	if err != nil {
		return -1, err
	}
	if err := unix.Mkdirat(up, path.Base(dir), 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, err
	}
	return x.dirs.open(dir)
}

// write creates the entry name beneath dirfd.
func (x *extractor) write(name string, kind byte, mode fs.FileMode, h *tar.Header, data io.Reader) error {
	pfd, err := x.parent(name)
	if err != nil {
		return err
	}
	base := path.Base(name)
	switch kind {
	case 'd':
		if err := unix.Mkdirat(pfd, base, 0o700); err != nil && !(errors.Is(err, unix.EEXIST) && x.existsAsDir(pfd, base)) {
			return err
		}
		return nil
	case 'f':
		return x.create(pfd, name, mode, h.ModTime.UnixNano(), data, h.Size)
	case 'l':
		return unix.Symlinkat(h.Linkname, pfd, base)
	}
	// A fifo or a device, which is never opened: the name was made just now by mknod (which
	// fails on any name that exists) in a directory nobody else writes in, so chmod by name
	// reaches it.
	typ := map[byte]uint32{'p': unix.S_IFIFO, 'c': unix.S_IFCHR, 'b': unix.S_IFBLK}[kind]
	dev := int(unix.Mkdev(uint32(h.Devmajor), uint32(h.Devminor)))
	if err := unix.Mknodat(pfd, base, typ|0o600, dev); err != nil {
		return err
	}
	return unix.Fchmodat(pfd, base, uint32(tarMode(mode)), 0)
}

// existsAsDir reports whether name in dirfd is a directory, not a link to one.
func (x *extractor) existsAsDir(dirfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
}

// createFile creates the file name in the directory dirfd, which must not exist, writes it
// with fill and gives it the caller's owner, mode and the modification time mtime (Unix
// nanoseconds), all through the one descriptor, and stats it into st.
func createFile(dirfd int, name string, mode fs.FileMode, mtime int64, fill func(io.Writer) error, st *unix.Stat_t) error {
	fd, err := openAt(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	err = fill(f)
	if err == nil {
		// The owner first: a change of owner clears the setuid and setgid bits.
		err = unix.Fchown(fd, os.Geteuid(), os.Getegid())
	}
	if err == nil {
		err = unix.Fchmod(fd, uint32(tarMode(mode)))
	}
	if err == nil {
		ts := unix.NsecToTimespec(mtime)
		err = unix.UtimesNanoAt(int(f.Fd()), "", []unix.Timespec{ts, ts}, unix.AT_EMPTY_PATH)
	}
	if err == nil {
		err = unix.Fstat(fd, st)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// hardlink checks, and extracts when it may write, a hard link at name (rel in tree) to the
// archive name target: it must be a regular file of the same tree, extracted before, and the
// policy must allow a hard link at rel. It is extracted as a copy of the file.
func (x *extractor) hardlink(name, tree, rel, target string) error {
	if err := x.p.checkHardlink(rel); err != nil {
		return err
	}
	to, err := entryName(target, false)
	if err != nil {
		return fmt.Errorf("a hard link to %q: %w", target, err)
	}
	facts, ok := x.files[to]
	if !ok || facts.tree != tree {
		return fmt.Errorf("a hard link to %q, which is not a file of this tree the archive gave before it", target)
	}
	if err := x.p.checkEntry(rel, 'f', facts.mode); err != nil {
		return err
	}
	if err := x.b.size(facts.size); err != nil {
		return err
	}
	x.kinds[name] = 'f'
	x.files[name] = facts
	if x.out != nil {
		return x.out.hardlink(x, tree, rel, to)
	}
	if x.dirfd < 0 {
		return nil
	}
	srcDir, err := openDirBeneath(x.dirfd, path.Dir(to))
	if err != nil {
		return err
	}
	defer unix.Close(srcDir)
	sfd, err := openAt(srcDir, path.Base(to), unix.O_RDONLY, 0)
	if err != nil {
		return err
	}
	src := os.NewFile(uintptr(sfd), to)
	defer src.Close()
	var st unix.Stat_t
	if err := unix.Fstat(sfd, &st); err != nil {
		return err
	}
	pfd, err := x.parent(name)
	if err != nil {
		return err
	}
	return x.create(pfd, name, facts.mode, st.Mtim.Nano(), src, facts.size)
}

// setDirModes gives the trees' directories their modes, the deepest first, each through a
// descriptor opened without following links.
func (x *extractor) setDirModes() error {
	names := make([]string, 0, len(x.dirModes))
	for n := range x.dirModes {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return strings.Count(names[i], "/") > strings.Count(names[j], "/") })
	for _, n := range names {
		fd, err := openDirBeneath(x.dirfd, n)
		if err != nil {
			return fmt.Errorf("entry %q: %w", n, err)
		}
		if err := unix.Fchown(fd, os.Geteuid(), os.Getegid()); err == nil {
			err = unix.Fchmod(fd, uint32(tarMode(x.dirModes[n])))
		}
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("entry %q: %w", n, err)
		}
	}
	return nil
}
