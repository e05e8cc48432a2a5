package staging

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cutover/cutover/nodes"
)

// Conn runs commands on one node; *nodes.Conn satisfies it.
type Conn interface {
	Node() string
	Run(ctx context.Context, argv ...string) (nodes.Result, error)
	RunInput(ctx context.Context, input io.Reader, argv ...string) (nodes.Result, error)
	// RunOutput runs argv and streams its standard output to out, for output of any length.
	RunOutput(ctx context.Context, out io.Writer, argv ...string) (nodes.Result, error)
}

// TempDir is the hidden directory beside final that a tree is staged into: a rerun finds
// what an interrupted one left there.
func TempDir(final string) string {
	return path.Join(path.Dir(final), "."+path.Base(final)+".cutover-stage")
}

// inventoryScript lists the directory $1, creating it (0700) when missing and $2 is
// "create", with its missing parents 0755 as the package manager makes them, whatever the
// umask of the login: the login's uid and gid as "UID GID" NUL, the directory's own mode and
// owner as "MODE UID GID" NUL, then every entry as "TYPE MODE SIZE MTIME UID GID ./NAME" NUL
// "LINKTARGET" NUL. A missing directory that is not to be created prints "absent" NUL.
const inventoryScript = `set -e
umask 022
if [ -L "$1" ] || { [ -e "$1" ] && [ ! -d "$1" ]; }; then echo "$1 is not a directory" >&2; exit 1; fi
if [ ! -e "$1" ] && [ "$2" != create ]; then printf 'absent\0'; exit 0; fi
if [ ! -e "$1" ]; then
	mkdir -p -- "$(dirname -- "$1")"
	umask 077
	mkdir -p -- "$1"
fi
cd -- "$1"
printf '%s %s\0' "$(id -u)" "$(id -g)"
find . -maxdepth 0 -printf '%#m %U %G\0'
find . -mindepth 1 -printf '%y %#m %s %T@ %U %G %p\0%l\0'`

// nodeEntry is what a node holds at a name of a directory.
type nodeEntry struct {
	kind     byte
	mode     fs.FileMode
	size     int64
	mtime    int64
	uid, gid uint32
	target   string
}

// listing is what a node's directory holds.
type listing struct {
	entries  map[string]nodeEntry
	root     nodeEntry // the directory itself: its mode and owner
	uid, gid uint32    // the login's: what tar on the node makes the entries it creates owned by
}

// inventory reads what the node's directory dir holds; create makes a missing dir, otherwise
// a missing dir gives a nil listing. The listing streams from the node (Conn.RunOutput), so a
// tree of any number of entries is read whole, never cut at a read limit.
func inventory(ctx context.Context, c Conn, dir string, create bool) (*listing, error) {
	how := ""
	if create {
		how = "create"
	}
	l := &listing{entries: map[string]nodeEntry{}}
	absent := false
	n := 0
	var header string
	bad := func(what []byte) error {
		return fmt.Errorf("unexpected listing of %s: %q", dir, what)
	}
	rec := &records{seps: "\x00", fn: func(f []byte) error {
		defer func() { n++ }()
		switch {
		case n == 0 && string(f) == "absent":
			absent = true
		case absent:
			return bad(f)
		case n == 0:
			ids := strings.Fields(string(f))
			uid, err1 := parseID(ids, 0)
			gid, err2 := parseID(ids, 1)
			if len(ids) != 2 || err1 != nil || err2 != nil {
				return bad(f)
			}
			l.uid, l.gid = uid, gid
		case n == 1:
			parts := strings.Fields(string(f))
			m, err := strconv.ParseUint(firstOr(parts), 8, 32)
			uid, err1 := parseID(parts, 1)
			gid, err2 := parseID(parts, 2)
			if len(parts) != 3 || err != nil || err1 != nil || err2 != nil {
				return bad(f)
			}
			l.root = nodeEntry{kind: 'd', mode: unixPerm(uint32(m)), uid: uid, gid: gid}
		case n%2 == 0:
			header = string(f)
		default:
			parts := strings.SplitN(header, " ", 7)
			if len(parts) != 7 || len(parts[0]) != 1 || !strings.HasPrefix(parts[6], "./") {
				return bad([]byte(header))
			}
			m, err1 := strconv.ParseUint(parts[1], 8, 32)
			size, err2 := strconv.ParseInt(parts[2], 10, 64)
			mtime, err3 := parseFindTime(parts[3])
			uid, err4 := parseID(parts, 4)
			gid, err5 := parseID(parts, 5)
			if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
				return bad([]byte(header))
			}
			l.entries[parts[6][2:]] = nodeEntry{kind: parts[0][0], mode: unixPerm(uint32(m)), size: size, mtime: mtime,
				uid: uid, gid: gid, target: string(f)}
		}
		return nil
	}}
	if _, err := c.RunOutput(ctx, rec, "sh", "-c", inventoryScript, "cutover-stage", dir, how); err != nil {
		return nil, err
	}
	if err := rec.end(); err != nil {
		return nil, fmt.Errorf("%s: %w", c.Node(), err)
	}
	switch {
	case absent:
		return nil, nil
	case n < 2 || n%2 != 0:
		return nil, fmt.Errorf("%s: the listing of %s ended early", c.Node(), dir)
	}
	return l, nil
}

// parseID parses the i-th of fields as a uid or gid.
func parseID(fields []string, i int) (uint32, error) {
	if i >= len(fields) {
		return 0, errors.New("missing")
	}
	v, err := strconv.ParseUint(fields[i], 10, 32)
	return uint32(v), err
}

func firstOr(fields []string) string {
	if len(fields) == 0 {
		return ""
	}
	return fields[0]
}

// parseFindTime converts a time as find's %T@ prints it ("1732300000.1234567890") to Unix
// nanoseconds, so a file rewritten within the same second as the source still differs.
func parseFindTime(s string) (int64, error) {
	sec, frac, _ := strings.Cut(s, ".")
	secs, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return 0, err
	}
	frac = (frac + "000000000")[:9]
	ns, err := strconv.ParseInt(frac, 10, 64)
	if err != nil || ns < 0 {
		return 0, fmt.Errorf("bad time %q", s)
	}
	return secs*1e9 + ns, nil
}

// sumsScript prints the SHA-256 of the files of the directory $1 named on standard input
// (NUL-separated): with OpenSSL where the node has a working one ("SUM *NAME" lines), which
// hashes several times faster than coreutils where the CPU has SHA instructions, otherwise
// with sha256sum ("SUM  NAME" NUL records); $2 = "coreutils" asks for sha256sum. A tree's
// names hold no control characters, so a newline ends a record as well as a NUL does.
const sumsScript = `cd -- "$1" || exit 1
if [ "$2" != coreutils ] && openssl dgst -sha256 -r </dev/null >/dev/null 2>&1; then
	xargs -0 -r openssl dgst -sha256 -r
else
	xargs -0 -r sha256sum -z --
fi`

// hasher is the sums script's $2: "" lets the node pick, "coreutils" is for the tests of the
// fallback.
var hasher = ""

// sumsBatch bounds what one run of the sums script prints, far below a command's read
// limit: the names are sent in batches, so a tree of any number of files is checksummed
// whole.
const sumsBatch = 1 << 20

// sumsLine is what the sums script prints for a name besides the name: the sum, the
// separators and "./".
const sumsLine = 64 + 2 + 2 + 1

// sums returns the SHA-256 of the named files of the node's directory dir; the names go to
// the node on standard input, in batches (sumsBatch), so there may be any number of them.
func sums(ctx context.Context, c Conn, dir string, names []string) (map[string]string, error) {
	out := map[string]string{}
	for len(names) > 0 {
		n, size := 0, 0
		for n < len(names) && (n == 0 || size+len(names[n])+sumsLine <= sumsBatch) {
			size += len(names[n]) + sumsLine
			n++
		}
		if err := sumsOf(ctx, c, dir, names[:n], out); err != nil {
			return nil, err
		}
		names = names[n:]
	}
	return out, nil
}

// sumsOf adds the SHA-256 of the named files of dir to out, in one run of the sums script.
func sumsOf(ctx context.Context, c Conn, dir string, names []string, out map[string]string) error {
	var in bytes.Buffer
	for _, n := range names {
		in.WriteString("./" + n + "\x00")
	}
	res, err := c.RunInput(ctx, &in, "sh", "-c", sumsScript, "cutover-stage", dir, hasher)
	if err != nil {
		return err
	}
	for _, rec := range bytes.FieldsFunc(res.Stdout, func(r rune) bool { return r == 0 || r == '\n' }) {
		// "SUM *./NAME" (OpenSSL) or "SUM  ./NAME" (coreutils).
		sum, name, ok := strings.Cut(string(rec), " ")
		if ok && len(name) > 0 && (name[0] == '*' || name[0] == ' ') {
			name = name[1:]
		} else {
			ok = false
		}
		name, dot := strings.CutPrefix(name, "./")
		if !ok || !dot || len(sum) != 64 {
			return fmt.Errorf("%s: unexpected checksum line in %s: %q", c.Node(), dir, rec)
		}
		out[name] = sum
	}
	return nil
}

// unixPerm converts the permission and special bits of a mode as find prints it.
func unixPerm(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	if m&0o4000 != 0 {
		mode |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		mode |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// tarMode converts a mode to the bits tar headers carry.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

// plan compares what the node holds with the tree: the names to remove first (not in the
// tree, or of another kind) and the entries to send: every entry but a file, files whose
// size, modification time or mode differ (what a copy cut off halfway, or a changed file,
// has), as rsync's quick check does. The files that pass the quick check are kept only once
// their checksums on the node match the manifest (Send): what an interrupted run left is
// never trusted by its looks.
func plan(t *Tree, got map[string]nodeEntry) (remove []string, send []Entry) {
	want := make(map[string]Entry, len(t.Entries))
	for _, e := range t.Entries {
		want[e.Name] = e
	}
	for name, g := range got {
		e, ok := want[name]
		if !ok || kindOf(g.kind) != e.Kind {
			remove = append(remove, name)
		}
	}
	for _, e := range t.Entries {
		if g, ok := got[e.Name]; e.Kind == 'f' && ok && same(e, g) {
			continue
		}
		send = append(send, e)
	}
	return remove, send
}

// same reports whether the node's file passes the quick check against e.
func same(e Entry, g nodeEntry) bool {
	return kindOf(g.kind) == 'f' && g.size == e.Size && g.mtime == e.MTime && g.mode == e.Mode
}

// kindOf maps find's %y letter to an Entry kind ('?' for what a tree never holds).
func kindOf(y byte) byte {
	switch y {
	case 'd', 'f', 'l', 'p', 'c', 'b':
		return y
	}
	return '?'
}

// verify reports how the node's temporary directory differs from the tree, nil when it
// holds exactly the tree: every entry of the kind, mode and link target of the manifest,
// owned by the login (what tar on the node makes), files of the manifest's sizes; their
// contents are checked by checksum apart.
func verify(t *Tree, l *listing) error {
	return diffError(differences(manifestOf(t, l.uid, l.gid), l, false))
}

// checkKept checksums on the node the files of its temporary directory tmp that passed the
// quick check (those of t that are not in send) and returns send with the files whose
// checksums differ from the manifest added, in the tree's order.
func checkKept(ctx context.Context, c Conn, t *Tree, tmp string, send []Entry) ([]Entry, error) {
	sending := make(map[string]bool, len(send))
	for _, e := range send {
		sending[e.Name] = true
	}
	var kept []string
	for _, e := range t.Entries {
		if e.Kind == 'f' && !sending[e.Name] {
			kept = append(kept, e.Name)
		}
	}
	if len(kept) == 0 {
		return send, nil
	}
	have, err := sums(ctx, c, tmp, kept)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, e := range t.Entries {
		if sending[e.Name] || (e.Kind == 'f' && have[e.Name] != e.Sum) {
			out = append(out, e)
		}
	}
	return out, nil
}

// tarBuffer is how much of a tar stream is gathered before it goes to a node.
const tarBuffer = 256 << 10

// Progress is told how many bytes of file contents went to a node.
type Progress func(bytes int64)

// Send brings the node's temporary directory for final to hold exactly t: it removes what
// does not belong there, sends what the node lacks as one tar stream extracted by tar on the
// node, and checks every entry against the manifest. It returns the bytes of file contents
// sent. Nothing outside the temporary directory changes, so Send may be interrupted and run
// again at any time: a rerun sends only what is still missing.
func Send(ctx context.Context, c Conn, t *Tree, final string, progress Progress) (int64, error) {
	tmp := TempDir(final)
	got, err := inventory(ctx, c, tmp, true)
	if err != nil {
		return 0, fmt.Errorf("%s: read %s: %w", c.Node(), tmp, err)
	}
	remove, send := plan(t, got.entries)
	if send, err = checkKept(ctx, c, t, tmp, send); err != nil {
		return 0, fmt.Errorf("%s: check %s: %w", c.Node(), tmp, err)
	}
	if len(remove) > 0 {
		argv := []string{"sh", "-c", `cd -- "$1" && shift && rm -rf -- "$@"`, "cutover-stage", tmp}
		for _, name := range remove {
			argv = append(argv, "./"+name)
		}
		if _, err := c.Run(ctx, argv...); err != nil {
			return 0, fmt.Errorf("%s: clean %s: %w", c.Node(), tmp, err)
		}
	}
	var sent int64
	if len(send) > 0 {
		pr, pw := io.Pipe()
		written := make(chan int64, 1)
		go func() {
			// Buffered, so that the channel gets full SSH packets: tar writes 512-byte
			// headers and paddings that would otherwise each travel as a packet of their own.
			bw := bufio.NewWriterSize(pw, tarBuffer)
			n, err := writeTar(bw, t, send, progress)
			if err == nil {
				err = bw.Flush()
			}
			pw.CloseWithError(err)
			written <- n
		}()
		// Records of 128 KiB (-b 256) rather than tar's 10 KiB: a twelfth of the reads and
		// writes; GNU tar reads standard input record by record whatever its length.
		_, err := c.RunInput(ctx, pr, "tar", "-x", "-p", "--no-same-owner", "-b", "256", "-f", "-", "-C", tmp)
		// A node that stopped reading leaves the writer blocked on the pipe; closing it ends
		// the writer, whose count is read only once it has ended.
		pr.CloseWithError(io.ErrClosedPipe)
		sent = <-written
		if err != nil {
			return sent, fmt.Errorf("%s: send %s: %w", c.Node(), tmp, err)
		}
	}
	// Every file sent is checked against its checksum; the rest were checked before.
	var names []string
	for _, e := range send {
		if e.Kind == 'f' {
			names = append(names, e.Name)
		}
	}
	got, err = inventory(ctx, c, tmp, true)
	if err == nil && len(names) > 0 {
		var have map[string]string
		if have, err = sums(ctx, c, tmp, names); err == nil {
			for _, e := range send {
				if e.Kind == 'f' && have[e.Name] != e.Sum {
					err = fmt.Errorf("%s arrived with other contents (checksum)", e.Name)
					break
				}
			}
		}
	}
	if err == nil {
		err = verify(t, got)
	}
	if err != nil {
		return sent, fmt.Errorf("%s: %s does not match the manifest: %w", c.Node(), tmp, err)
	}
	return sent, nil
}

// writeTar writes entries of the tree t as a tar stream and returns the bytes of file
// contents it wrote. Files are read beneath the tree's root without following links, and each
// must be the file that was listed, with the checksum it had then: a file replaced, changed
// or swapped for a link since ReadTree ends the stream with an error.
func writeTar(w io.Writer, t *Tree, entries []Entry, progress Progress) (int64, error) {
	var sent int64
	var files *treeFiles
	tw := tar.NewWriter(w)
	now := time.Now().Truncate(time.Second)
	for _, e := range entries {
		h := &tar.Header{Name: "./" + e.Name, Mode: tarMode(e.Mode), Format: tar.FormatPAX, ModTime: now}
		switch e.Kind {
		case 'd':
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		case 'l':
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.Target
		case 'f':
			h.Typeflag, h.Size, h.ModTime = tar.TypeReg, e.Size, time.Unix(0, e.MTime)
		case 'p':
			h.Typeflag = tar.TypeFifo
		case 'c', 'b':
			h.Typeflag, h.Devmajor, h.Devminor = tar.TypeChar, int64(unix.Major(e.Dev)), int64(unix.Minor(e.Dev))
			if e.Kind == 'b' {
				h.Typeflag = tar.TypeBlock
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			return sent, err
		}
		if e.Kind != 'f' {
			continue
		}
		if files == nil {
			var err error
			if files, err = t.openFiles(); err != nil {
				return sent, err
			}
			defer files.close()
		}
		if err := files.copy(tw, e); err != nil {
			return sent, fmt.Errorf("%s: %w", path.Join(t.name, e.Name), err)
		}
		sent += e.Size
		if progress != nil {
			progress(e.Size)
		}
	}
	return sent, tw.Close()
}

// treeFiles reads the files of a tree again, beneath its root.
type treeFiles struct {
	t    *Tree
	root int
	dirs dirCache
}

// openFiles opens the tree's root again and refuses a root that is no longer the directory
// that was read.
func (t *Tree) openFiles() (*treeFiles, error) {
	basefd, err := unix.Open(t.base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.base, err)
	}
	root, err := openDirBeneath(basefd, t.name)
	unix.Close(basefd)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(root, &st); err != nil || st.Dev != t.rootID.dev || st.Ino != t.rootID.ino {
		unix.Close(root)
		return nil, fmt.Errorf("%s: replaced since it was read", t.name)
	}
	return &treeFiles{t: t, root: root, dirs: dirCache{root: root}}, nil
}

func (f *treeFiles) close() {
	f.dirs.close()
	unix.Close(f.root)
}

// copy copies the file e to w from one descriptor, checksumming what it copies: the file must
// be the one ReadTree listed, unchanged, and its bytes must have the manifest's checksum.
func (f *treeFiles) copy(w io.Writer, e Entry) error {
	dfd, err := f.dirs.open(path.Dir(e.Name))
	if err != nil {
		return err
	}
	fd, err := openAt(dfd, path.Base(e.Name), unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	file := os.NewFile(uintptr(fd), e.Name)
	defer file.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if id, ok := f.t.ids[e.Name]; !ok || idOf(&st) != id || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return errors.New("changed since it was read and checksummed: it is not staged")
	}
	h := sha256.New()
	if err := copyExactly(io.MultiWriter(w, h), file, e.Size); err != nil {
		return err
	}
	if hex.EncodeToString(h.Sum(nil)) != e.Sum {
		return errors.New("changed since it was read and checksummed: it is not staged")
	}
	return nil
}

// placeScript gives the temporary directory $1 the mode $3 and renames it to $2, which must
// not exist. Every file and directory of the tree is on disk before the rename (a syncfs of
// the tree's file system, or a sync of all where sync cannot name one), and the rename is on
// disk before the script ends (an fsync of the parent directory): a power cut leaves either
// no tree at $2 or the whole tree, never a tree whose files are empty.
const placeScript = `set -e
if [ -e "$2" ] || [ -L "$2" ]; then echo "$2 exists" >&2; exit 1; fi
chmod "$3" -- "$1"
sync -f -- "$1" 2>/dev/null || sync
mv -T -- "$1" "$2"
sync -- "$(dirname -- "$2")" 2>/dev/null || sync`

// Place records the tree's manifest beside final (Record) and renames the node's verified
// temporary directory for final into place with the tree's mode, its contents, manifest and
// the rename durable on the node's disk when Place returns.
func Place(ctx context.Context, c Conn, t *Tree, final string) error {
	if err := Record(ctx, c, t, TempDir(final), final); err != nil {
		return err
	}
	_, err := c.Run(ctx, "sh", "-c", placeScript, "cutover-stage", TempDir(final), final, fmt.Sprintf("%04o", tarMode(t.Mode)))
	if err != nil {
		return fmt.Errorf("%s: put %s in place: %w", c.Node(), final, err)
	}
	return nil
}
