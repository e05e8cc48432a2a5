package staging

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"strconv"
	"strings"
)

// listFunction defines the shell function list, which lists the directory $1, creating it
// (0700) when missing and $2 is "create", with its missing parents 0755 as the package
// manager makes them, whatever the umask of the login: the login's uid and gid as "UID GID"
// NUL, the directory's own mode and owner as "MODE UID GID" NUL, then every entry as "TYPE
// MODE SIZE MTIME UID GID STAMP ./NAME" NUL "LINKTARGET" NUL, where STAMP is
// "DEVICE:INODE:CTIME". A missing directory that is not to be created prints "absent" NUL.
// It runs in a subshell, so the caller's directory and umask stay as they were, and it
// fails, saying why, for $1 that is not a directory. Call it as a command of its own in a
// script that sets -e, never in a condition (where sh would ignore its set -e). One find
// prints it all, the login's ids as the owner of the shell's /proc directory (its effective
// ids, what id prints): a listing is made several times a stage, on every node.
const listFunction = `list() (
	set -e
	umask 022
	if [ -L "$1" ] || { [ -e "$1" ] && [ ! -d "$1" ]; }; then echo "$1 is not a directory" >&2; exit 1; fi
	if [ ! -e "$1" ] && [ "$2" != create ]; then printf 'absent\0'; exit 0; fi
	if [ ! -e "$1" ]; then
		mkdir -p -- "$(dirname -- "$1")"
		umask 077
		mkdir -p -- "$1"
	fi
	cd -- "$1"
	find "/proc/$$" . \( -path "/proc/$$" -prune -printf '%U %G\0' \) -o \( -path . -printf '%#m %U %G\0' \) -o \
		-printf '%y %#m %s %T@ %U %G %D:%i:%C@ %p\0%l\0'
)
`

// inventoryScript lists the directory $1 (list, creating it when $2 is "create").
const inventoryScript = listFunction + `set -e
list "$1" "$2"`

// A script that prints more than a listing follows it with a marker record, "=" and a word,
// and what the marker announces: a listing's records never begin with "=" where a marker may
// stand (an entry's record begins with its type letter).
const (
	markerSums        = "=sums"        // then "SUM *./NAME" or "SUM  ./NAME" records
	markerManifest    = "=manifest"    // then the manifest's bytes, to the end of the output
	markerNoManifest  = "=nomanifest"  // there is no manifest
	markerBadManifest = "=badmanifest" // the manifest is not a regular file
)

// nodeEntry is what a node holds at a name of a directory.
type nodeEntry struct {
	kind     byte
	mode     fs.FileMode
	size     int64
	mtime    int64
	uid, gid uint32
	stamp    string // "DEVICE:INODE:CTIME": changes with any change of the file's contents
	target   string
}

// listing is what a node's directory holds.
type listing struct {
	entries  map[string]nodeEntry
	root     nodeEntry // the directory itself: its mode and owner
	uid, gid uint32    // the login's: what tar on the node makes the entries it creates owned by
}

// listingReader parses the records of a listing (listFunction) as they come, and hands the
// records that follow it, from the first marker on, to marker.
type listingReader struct {
	dir    string
	l      *listing
	absent bool
	n      int
	header string
	// marker is given the first marker and returns the function that takes every later
	// record; nil refuses markers.
	marker func(m string) (func(rec []byte) error, error)
	after  func(rec []byte) error
	// digest, when set, is given every byte of the listing, separators included.
	digest hash.Hash
}

func newListingReader(dir string) *listingReader {
	return &listingReader{dir: dir, l: &listing{entries: map[string]nodeEntry{}}}
}

// atEnd reports whether the listing may end before the next record.
func (p *listingReader) atEnd() bool {
	return (p.absent && p.n == 1) || (!p.absent && p.n >= 2 && p.n%2 == 0)
}

// record parses one record of the output.
func (p *listingReader) record(f []byte) error {
	if p.after != nil {
		return p.after(f)
	}
	if p.marker != nil && p.atEnd() && len(f) > 0 && f[0] == '=' {
		after, err := p.marker(string(f))
		p.after = after
		return err
	}
	if p.digest != nil {
		p.digest.Write(f)
		p.digest.Write([]byte{0})
	}
	defer func() { p.n++ }()
	l := p.l
	bad := func(what []byte) error {
		return fmt.Errorf("unexpected listing of %s: %q", p.dir, what)
	}
	switch {
	case p.n == 0 && string(f) == "absent":
		p.absent = true
	case p.absent:
		return bad(f)
	case p.n == 0:
		ids := strings.Fields(string(f))
		uid, err1 := parseID(ids, 0)
		gid, err2 := parseID(ids, 1)
		if len(ids) != 2 || err1 != nil || err2 != nil {
			return bad(f)
		}
		l.uid, l.gid = uid, gid
	case p.n == 1:
		parts := strings.Fields(string(f))
		m, err := strconv.ParseUint(firstOr(parts), 8, 32)
		uid, err1 := parseID(parts, 1)
		gid, err2 := parseID(parts, 2)
		if len(parts) != 3 || err != nil || err1 != nil || err2 != nil {
			return bad(f)
		}
		l.root = nodeEntry{kind: 'd', mode: unixPerm(uint32(m)), uid: uid, gid: gid}
	case p.n%2 == 0:
		p.header = string(f)
	default:
		parts := strings.SplitN(p.header, " ", 8)
		if len(parts) != 8 || len(parts[0]) != 1 || !strings.HasPrefix(parts[7], "./") || !validStamp(parts[6]) {
			return bad([]byte(p.header))
		}
		m, err1 := strconv.ParseUint(parts[1], 8, 32)
		size, err2 := strconv.ParseInt(parts[2], 10, 64)
		mtime, err3 := parseFindTime(parts[3])
		uid, err4 := parseID(parts, 4)
		gid, err5 := parseID(parts, 5)
		if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
			return bad([]byte(p.header))
		}
		l.entries[parts[7][2:]] = nodeEntry{kind: parts[0][0], mode: unixPerm(uint32(m)), size: size, mtime: mtime,
			uid: uid, gid: gid, stamp: parts[6], target: string(f)}
	}
	return nil
}

// result returns the listing once the output has ended: nil when the directory is absent.
func (p *listingReader) result(node string) (*listing, error) {
	switch {
	case p.absent:
		return nil, nil
	case p.n < 2 || p.n%2 != 0:
		return nil, fmt.Errorf("%s: the listing of %s ended early", node, p.dir)
	}
	return p.l, nil
}

// validStamp reports whether s is a stamp as find prints it: digits, colons and a dot.
func validStamp(s string) bool {
	return len(s) > 0 && len(s) <= 80 && strings.Trim(s, "0123456789:.") == ""
}

// inventory reads what the node's directory dir holds; create makes a missing dir, otherwise
// a missing dir gives a nil listing. The listing streams from the node (Conn.RunOutput), so a
// tree of any number of entries is read whole, never cut at a read limit.
func inventory(ctx context.Context, c Conn, dir string, create bool) (*listing, error) {
	how := ""
	if create {
		how = "create"
	}
	p := newListingReader(dir)
	rec := &records{seps: "\x00", fn: p.record}
	if _, err := c.RunOutput(ctx, rec, "sh", "-c", inventoryScript, "cutover-stage", dir, how); err != nil {
		return nil, err
	}
	if err := rec.end(); err != nil {
		return nil, fmt.Errorf("%s: %w", c.Node(), err)
	}
	return p.result(c.Node())
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

// parseSum parses one record of the sums script's output, "SUM *./NAME" (OpenSSL) or "SUM
// ./NAME" (coreutils), into out.
func parseSum(node, dir string, rec []byte, out map[string]string) error {
	sum, name, ok := strings.Cut(string(rec), " ")
	if ok && len(name) > 0 && (name[0] == '*' || name[0] == ' ') {
		name = name[1:]
	} else {
		ok = false
	}
	name, dot := strings.CutPrefix(name, "./")
	if !ok || !dot || len(sum) != 64 {
		return fmt.Errorf("%s: unexpected checksum line in %s: %q", node, dir, rec)
	}
	out[name] = sum
	return nil
}
