package staging

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"

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
		if err := parseSum(c.Node(), dir, rec, out); err != nil {
			return err
		}
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

// Sent is what Send sent to a node and what it found there once the node's temporary
// directory held the tree.
type Sent struct {
	// Bytes counts the bytes of file contents sent.
	Bytes int64
	// listing is the temporary directory as checked: listed, then every file checksummed.
	listing *listing
	// digest is the SHA-256 of the listing as the node printed it: Place refuses a directory
	// that no longer lists so.
	digest string
}

// Send brings the node's temporary directory for final to hold exactly t: it removes what
// does not belong there, sends what the node lacks as one tar stream extracted by tar on the
// node, and checks every entry against the manifest, listing and checksumming what arrived in
// one command. Nothing outside the temporary directory changes, so Send may be interrupted
// and run again at any time: a rerun sends only what is still missing. The Sent it returns,
// with an error too, counts the bytes of file contents sent; without an error, Place puts
// what Send checked in place.
//
// A node without the temporary directory, as every node is at a first stage, gets the whole
// tree at once, from the command that makes the directory: one command sends, one checks.
// That stream is the one Encode wrote, when it did, or is written for the node as it goes.
// Where the directory is there already (what an interrupted run left), that command reads
// nothing and Send lists it and sends only what is missing, as above; progress may then have
// been told of some bytes of the first stream that the node did not take, which Sent.Bytes
// does not count.
func Send(ctx context.Context, c Conn, t *Tree, final string, progress Progress) (*Sent, error) {
	out := &Sent{}
	tmp := TempDir(final)
	send := t.Entries
	fresh := []string{"sh", "-c", freshScript, "cutover-stage", tmp}
	var n int64
	var err error
	if t.enc != nil {
		n, err = streamEncoded(ctx, c, t.enc, progress, fresh...)
	} else {
		n, err = streamTar(ctx, c, t, send, progress, fresh...)
	}
	out.Bytes = n
	if code, ok := nodes.ExitCode(err); ok && code == exitNotFresh {
		out.Bytes = 0
		send, err = sendMissing(ctx, c, t, tmp, progress, out)
		if err != nil {
			return out, err
		}
	} else if err != nil {
		return out, fmt.Errorf("%s: send %s: %w", c.Node(), tmp, err)
	}
	// Every file sent is checked against its checksum; the rest were checked before.
	got, digest, have, err := checkSent(ctx, c, tmp)
	if err == nil {
		for _, e := range send {
			if e.Kind == 'f' && have[e.Name] != e.Sum {
				err = fmt.Errorf("%s arrived with other contents (checksum)", e.Name)
				break
			}
		}
	}
	if err == nil {
		err = verify(t, got)
	}
	if err != nil {
		return out, fmt.Errorf("%s: %s does not match the manifest: %w", c.Node(), tmp, err)
	}
	out.listing, out.digest = got, digest
	return out, nil
}

// freshScript makes the temporary directory $1 (0700, its missing parents 0755 as the package
// manager makes them, whatever the umask of the login) and extracts the tar stream of its
// standard input into it, in records of 128 KiB (-b 256) rather than tar's 10 KiB: a twelfth
// of the reads and writes (GNU tar reads standard input record by record whatever its
// length). Where $1 is there already, what an interrupted run left, it exits exitNotFresh
// without reading anything.
const freshScript = `set -e
if [ -e "$1" ] || [ -L "$1" ]; then exit 3; fi
umask 022
mkdir -p -- "$(dirname -- "$1")"
(umask 077 && mkdir -- "$1")
exec tar -x -p --no-same-owner -b 256 -f - -C "$1"`

// exitNotFresh is freshScript's exit status for a temporary directory that is there already.
const exitNotFresh = 3

// sendMissing brings the node's temporary directory tmp, which an interrupted run left, to
// hold t: it lists it, removes what does not belong there, checksums the files that pass the
// quick check and sends what is missing or differs as one tar stream. It returns the entries
// it sent, and adds their bytes to out.
func sendMissing(ctx context.Context, c Conn, t *Tree, tmp string, progress Progress, out *Sent) ([]Entry, error) {
	got, err := inventory(ctx, c, tmp, true)
	if err != nil {
		return nil, fmt.Errorf("%s: read %s: %w", c.Node(), tmp, err)
	}
	remove, send := plan(t, got.entries)
	if send, err = checkKept(ctx, c, t, tmp, send); err != nil {
		return nil, fmt.Errorf("%s: check %s: %w", c.Node(), tmp, err)
	}
	if len(remove) > 0 {
		argv := []string{"sh", "-c", `cd -- "$1" && shift && rm -rf -- "$@"`, "cutover-stage", tmp}
		for _, name := range remove {
			argv = append(argv, "./"+name)
		}
		if _, err := c.Run(ctx, argv...); err != nil {
			return nil, fmt.Errorf("%s: clean %s: %w", c.Node(), tmp, err)
		}
	}
	if len(send) == 0 {
		return nil, nil
	}
	n, err := streamTar(ctx, c, t, send, progress, "tar", "-x", "-p", "--no-same-owner", "-b", "256", "-f", "-", "-C", tmp)
	out.Bytes += n
	if err != nil {
		return nil, fmt.Errorf("%s: send %s: %w", c.Node(), tmp, err)
	}
	return send, nil
}

// streamTar sends the entries of t as a tar stream to the standard input of argv on the node,
// and returns the bytes of file contents written to the stream.
func streamTar(ctx context.Context, c Conn, t *Tree, entries []Entry, progress Progress, argv ...string) (int64, error) {
	pr, pw := io.Pipe()
	type result struct {
		n   int64
		err error
	}
	written := make(chan result, 1)
	go func() {
		// Buffered, so that the channel gets full SSH packets: tar writes 512-byte headers
		// and paddings that would otherwise each travel as a packet of their own.
		bw := bufio.NewWriterSize(pw, tarBuffer)
		n, err := writeTar(bw, t, entries, progress)
		if err == nil {
			err = bw.Flush()
		}
		pw.CloseWithError(err)
		written <- result{n, err}
	}()
	_, err := c.RunInput(ctx, pr, argv...)
	// A node that stopped reading leaves the writer blocked on the pipe; closing it ends the
	// writer, whose count is read only once it has ended.
	pr.CloseWithError(io.ErrClosedPipe)
	w := <-written
	if w.err != nil && !errors.Is(w.err, io.ErrClosedPipe) {
		// The stream itself failed (a source file changed since it was read): that, not
		// what the node's tar made of a cut stream, is the cause.
		return w.n, w.err
	}
	return w.n, err
}

// checkScript lists the directory $1 (list) and follows the listing with markerSums and the
// SHA-256 of every file in it, as the sums script prints them, each record ended by a NUL; $2
// is the sums script's. The listing comes first: a file changed after it has another stamp.
// It first starts writing the directory's file system to disk (a syncfs, in the background),
// so that the flush placeScript needs before its renames overlaps the reading of the files
// instead of following it: the one is the disk's work, the other the CPU's.
const checkScript = listFunction + `set -e
sync -f -- "$1" </dev/null >/dev/null 2>&1 &
flush=$!
list "$1"
printf '%s\0' ` + markerSums + `
cd -- "$1"
if [ "$2" != coreutils ] && openssl dgst -sha256 -r </dev/null >/dev/null 2>&1; then
	find . -type f -print0 | xargs -0 -r openssl dgst -sha256 -r | tr '\n' '\0'
else
	find . -type f -print0 | xargs -0 -r sha256sum -z --
fi
wait "$flush" || :`

// checkSent lists the node's directory tmp and checksums every file in it, in one command, in a
// session of its own where c can (runOutputOwnSession); it returns the listing, the SHA-256 of
// the listing as the node printed it and the checksums.
func checkSent(ctx context.Context, c Conn, tmp string) (*listing, string, map[string]string, error) {
	p := newListingReader(tmp)
	p.digest = sha256.New()
	have := map[string]string{}
	p.marker = func(mark string) (func([]byte) error, error) {
		if mark != markerSums {
			return nil, fmt.Errorf("unexpected listing of %s: %q", tmp, mark)
		}
		return func(rec []byte) error { return parseSum(c.Node(), tmp, rec, have) }, nil
	}
	rec := &records{seps: "\x00", fn: p.record}
	if _, err := runOutputOwnSession(ctx, c, rec, "sh", "-c", checkScript, "cutover-stage", tmp, hasher); err != nil {
		return nil, "", nil, err
	}
	if err := rec.end(); err != nil {
		return nil, "", nil, fmt.Errorf("%s: %w", c.Node(), err)
	}
	if p.after == nil {
		return nil, "", nil, fmt.Errorf("%s: the listing of %s ended early", c.Node(), tmp)
	}
	l, err := p.result(c.Node())
	if err == nil && l == nil {
		err = fmt.Errorf("%s is missing", tmp)
	}
	return l, hex.EncodeToString(p.digest.Sum(nil)), have, err
}

// placeScript receives the tree's manifest, $6 bytes on standard input, beside its place $4
// (receive), and puts the temporary directory $1 in place as $2, which must not exist, with
// that manifest. The directory must still list (list) as it did when it was checked: the
// SHA-256 of its listing must be $5. It gives the directory the mode $3. Every file and
// directory of the tree, and the manifest, are on disk before the renames (a syncfs of the
// tree's file system, or a sync of all where sync cannot name one); the manifest's rename is
// on disk before the tree's (an fsync of the parent directory), and the tree's before the
// script ends: a power cut leaves either no tree at $2 or the whole tree with its manifest,
// never a tree whose files are empty.
const placeScript = receiveManifest + listFunction + `set -e
receive "$4" "$6"
if [ -e "$2" ] || [ -L "$2" ]; then rm -f -- "$mt"; echo "$2 exists" >&2; exit 1; fi
d=$(list "$1" | sha256sum)
if [ "${d%% *}" != "$5" ]; then rm -f -- "$mt"; echo "$1 changed since it was checked" >&2; exit 1; fi
chmod "$3" -- "$1"
sync -f -- "$1" 2>/dev/null || sync
mv -f -T -- "$mt" "$4"
sync -- "${4%/*}" 2>/dev/null || sync
mv -T -- "$1" "$2"
sync -- "${2%/*}" 2>/dev/null || sync`

// Place puts the node's temporary directory for final, as Send left it (sent), in place, in
// one command: it sends the tree's manifest, with the stamps of the files Send checked, then
// gives the directory the tree's mode and renames it and the manifest into place, refusing a
// directory that changed since Send checked it. Its contents, the manifest and the renames are durable
// on the node's disk when Place returns.
func Place(ctx context.Context, c Conn, t *Tree, final string, sent *Sent) error {
	if sent == nil || sent.listing == nil {
		return fmt.Errorf("%s: put %s in place: the tree was not sent and checked", c.Node(), final)
	}
	tmp := TempDir(final)
	data, err := recordOf(c, t, sent.listing, tmp, false)
	if err != nil {
		return err
	}
	_, err = c.RunInput(ctx, bytes.NewReader(data), "sh", "-c", placeScript, "cutover-stage", tmp, final,
		fmt.Sprintf("%04o", tarMode(t.Mode)), ManifestPath(final), sent.digest, strconv.Itoa(len(data)))
	if err != nil {
		return fmt.Errorf("%s: put %s in place: %w", c.Node(), final, err)
	}
	return nil
}
