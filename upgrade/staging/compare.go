package staging

import (
	"context"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/cutover/cutover/nodes"
)

// State is what a node holds at a tree's final place, compared with the tree to stage.
type State int

const (
	// Missing: nothing is there.
	Missing State = iota
	// Same: exactly the tree, contents included, with its manifest.
	Same
	// Unrecorded: exactly the tree, contents included, without its manifest (a tree the
	// package manager installed, or one whose manifest was lost), or with stamps that no
	// longer hold: Record writes it.
	Unrecorded
	// Differs: another tree, or the tree altered.
	Differs
)

// compareScript prints, first, for each of the $1 paths that follow it, what ReadFinals reads of a
// link: markerLink NUL and the link's target NUL for a symbolic link (never followed),
// markerNotLink NUL for anything else, markerNoLink NUL when nothing is there. Then, for each
// pair of arguments after them, what readFinals reads of a tree: the listing of the directory
// (list), then the manifest kept beside it: markerManifest and its bytes ended by a NUL,
// markerNoManifest when there is none, markerBadManifest when it is not a regular file (a link
// is never followed); then, where nothing is at the tree's place, as at a first stage,
// markerSpace and what df prints of the file system of its nearest existing parent, ended by
// a NUL, so that the check of the room for the tree costs no command of its own. A manifest is JSON, which holds no NUL: a NUL in the file is printed as a
// byte that JSON allows nowhere (\x01), so that the manifest cannot end early, and is refused
// when it is decoded. One command reads every tree of a version and the links beside them.
const compareScript = listFunction + `set -e
n=$1
shift
while [ "$n" -gt 0 ]; do
	if [ -L "$1" ]; then printf '%s\0' ` + markerLink + `; find "$1" -maxdepth 0 -printf '%l\0'
	elif [ -e "$1" ]; then printf '%s\0' ` + markerNotLink + `
	else printf '%s\0' ` + markerNoLink + `; fi
	n=$((n - 1))
	shift
done
while [ $# -ge 2 ]; do
	list "$1"
	if [ -L "$2" ] || { [ -e "$2" ] && [ ! -f "$2" ]; }; then printf '%s\0' ` + markerBadManifest + `
	elif [ ! -e "$2" ]; then printf '%s\0' ` + markerNoManifest + `
	else printf '%s\0' ` + markerManifest + `; tr '\0' '\1' <"$2"; printf '\0'; fi
	if [ ! -e "$1" ] && [ ! -L "$1" ]; then
		d=$1
		while [ ! -d "$d" ]; do d=${d%/*}; [ -n "$d" ] || d=/; done
		printf '%s\0' ` + markerSpace + `
		df -P -k -- "$d"
		printf '\0'
	fi
	shift 2
done`

// The records of a link that compareScript reads.
const (
	markerLink    = "=link"    // then the link's target
	markerNotLink = "=notlink" // something that is not a symbolic link
	markerNoLink  = "=nolink"  // nothing
	markerSpace   = "=space"   // then df -P -k's output for the tree's nearest existing parent
)

// Link is what ReadFinals found at a path it read as a link.
type Link struct {
	Exists bool   // something is there
	IsLink bool   // it is a symbolic link, to Target
	Target string // the link's target, exactly as stored
}

// finalRead is what readFinals read of one tree: its listing (nil when nothing is there) and
// its manifest (nil when none), or why the manifest is bad, and when nothing is there, the
// kilobytes available where it would go.
type finalRead struct {
	l       *listing
	m       *manifest
	bad     error
	free    int64
	hasFree bool
}

// finalsReader parses compareScript's output: the links, then one tree after another.
type finalsReader struct {
	node     string
	links    []string
	linksOut []Link
	target   bool // the next record is a link's target
	finals   []string
	out      []finalRead
	p        *listingReader // the listing of the tree being read
	manifest bool           // the next record is the tree's manifest
	space    bool           // the next record is df's output for the tree read last
	rec      *records
}

// free reads df's output b for the tree read last: the available kilobytes of its one file
// system, the fourth field of the line after the header.
func (f *finalsReader) free(b []byte) error {
	r := &f.out[len(f.out)-1]
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) == 2 {
		if fields := strings.Fields(lines[1]); len(fields) >= 4 {
			if kb, err := strconv.ParseInt(fields[3], 10, 64); err == nil && kb >= 0 {
				r.free, r.hasFree = kb, true
				return nil
			}
		}
	}
	return fmt.Errorf("free space for %s: unexpected df output %s", f.finals[len(f.out)-1], nodes.QuotedPrefix(b))
}

// link reads the record b of the next link.
func (f *finalsReader) link(b []byte) error {
	switch {
	case f.target:
		f.target = false
		f.linksOut = append(f.linksOut, Link{Exists: true, IsLink: true, Target: string(b)})
	case string(b) == markerLink:
		f.target = true
	case string(b) == markerNotLink:
		f.linksOut = append(f.linksOut, Link{Exists: true})
	case string(b) == markerNoLink:
		f.linksOut = append(f.linksOut, Link{})
	default:
		return fmt.Errorf("unexpected reading of %s: %q", f.links[len(f.linksOut)], b)
	}
	return nil
}

func (f *finalsReader) record(b []byte) error {
	if len(f.linksOut) < len(f.links) {
		return f.link(b)
	}
	switch {
	case f.space:
		f.space = false
		return f.free(b)
	case f.p == nil && len(f.out) > 0 && !f.out[len(f.out)-1].hasFree && string(b) == markerSpace:
		f.space = true
		return nil
	}
	i := len(f.out)
	if i >= len(f.finals) {
		return fmt.Errorf("unexpected output after the last tree: %q", b)
	}
	if f.p == nil {
		f.p = newListingReader(f.finals[i])
	}
	final := f.finals[i]
	switch {
	case f.manifest:
		f.manifest, f.rec.max = false, 0
		m, err := decodeManifest(b)
		if err != nil {
			err = fmt.Errorf("%s: %w", ManifestPath(final), err)
		}
		return f.done(m, err)
	case !f.p.atEnd() || len(b) == 0 || b[0] != '=':
		return f.p.record(b)
	case string(b) == markerManifest:
		// The manifest's bound: a longer one is an error, as any record past its bound.
		f.manifest, f.rec.max = true, maxManifest
		return nil
	case string(b) == markerNoManifest:
		return f.done(nil, nil)
	case string(b) == markerBadManifest:
		return f.done(nil, fmt.Errorf("%w: %s is not a regular file", errBadManifest, ManifestPath(final)))
	}
	return fmt.Errorf("unexpected listing of %s: %q", final, b)
}

// done ends the tree being read, with its manifest m or why it is bad.
func (f *finalsReader) done(m *manifest, bad error) error {
	l, err := f.p.result(f.node)
	if err != nil {
		return err
	}
	f.out = append(f.out, finalRead{l: l, m: m, bad: bad})
	f.p = nil
	return nil
}

// Finals is what ReadFinals read of a node in one command: the trees at their final places
// with the manifests kept beside them, and the links asked for.
type Finals struct {
	finals []string
	read   []finalRead
	// Links holds what is at each of the links asked for, in their order.
	Links []Link
}

// ReadFinals reads, in one command, what the node holds at each of finals and the manifest
// kept beside each, and what is at each of links (absolute paths, read as links and never
// followed): what Finals.Compare judges the trees by, and what a check of the version's
// links needs, for one round trip to the node. Where c can run the command in a session of
// its own (RunOutputOwnSession, as *nodes.Conn can), it does: a check reads a node once, and
// a session costs less than starting the connection's command shell. err means the node
// could not be read.
func ReadFinals(ctx context.Context, c Conn, finals, links []string) (*Finals, error) {
	for _, l := range links {
		if !path.IsAbs(l) {
			return nil, fmt.Errorf("%s: read %s: not an absolute path", c.Node(), l)
		}
	}
	f := &finalsReader{node: c.Node(), links: links, finals: finals}
	f.rec = &records{seps: "\x00", fn: f.record}
	argv := ReadFinalsArgv(finals, links)
	if _, err := runOutputOwnSession(ctx, c, f.rec, argv...); err != nil {
		return nil, fmt.Errorf("%s: read %s: %w", c.Node(), strings.Join(finals, " and "), err)
	}
	if err := f.rec.end(); err != nil {
		return nil, fmt.Errorf("%s: read %s: %w", c.Node(), strings.Join(finals, " and "), err)
	}
	switch {
	case len(f.linksOut) != len(links):
		return nil, fmt.Errorf("%s: the reading of %s ended early", c.Node(), links[len(f.linksOut)])
	case len(f.out) != len(finals):
		return nil, fmt.Errorf("%s: the listing of %s ended early", c.Node(), finals[len(f.out)])
	}
	return &Finals{finals: finals, read: f.out, Links: f.linksOut}, nil
}

// ReadFinalsArgv is the command ReadFinals runs on a node to read finals and links.
func ReadFinalsArgv(finals, links []string) []string {
	argv := []string{"sh", "-c", compareScript, "cutover-stage", strconv.Itoa(len(links))}
	argv = append(argv, links...)
	for _, final := range finals {
		argv = append(argv, final, ManifestPath(final))
	}
	return argv
}

// ownSessionConn is a Conn that can run a command in a session of its own rather than in its
// command shell (*nodes.Conn).
type ownSessionConn interface {
	RunOutputOwnSession(ctx context.Context, out io.Writer, argv ...string) (nodes.Result, error)
}

// runOutputOwnSession runs argv as c.RunOutput does, in a session of its own where c can. A
// stage runs few commands on a node, the ones that send and place a tree with input of their
// own (RunInput) besides: the check's reading, the check of what was sent. Starting the
// connection's command shell for them would cost more than it saves.
func runOutputOwnSession(ctx context.Context, c Conn, out io.Writer, argv ...string) (nodes.Result, error) {
	if own, ok := c.(ownSessionConn); ok {
		return own.RunOutputOwnSession(ctx, out, argv...)
	}
	return c.RunOutput(ctx, out, argv...)
}

// maxOwnSessionOutput bounds the standard output RunOwnSession keeps.
const maxOwnSessionOutput = 64 << 10

// RunOwnSession runs argv on the node as c.Run does, in a session of its own where c can
// (RunOutputOwnSession), for a check's command on a connection that runs no other: the
// Result keeps the first 64 KiB of standard output, and more is an error.
func RunOwnSession(ctx context.Context, c Conn, argv ...string) (nodes.Result, error) {
	own, ok := c.(ownSessionConn)
	if !ok {
		return c.Run(ctx, argv...)
	}
	out := &limitBuffer{max: maxOwnSessionOutput}
	res, err := own.RunOutputOwnSession(ctx, out, argv...)
	res.Stdout = out.b.Bytes()
	if err == nil && out.over {
		err = fmt.Errorf("%s: %s printed more than %d bytes", c.Node(), argv[0], maxOwnSessionOutput)
	}
	return res, err
}

// Free returns the kilobytes available to the file system where the i-th tree would go, as
// df reports them, read where nothing was at the tree's place; ok is false otherwise.
func (f *Finals) Free(i int) (kb int64, ok bool) {
	return f.read[i].free, f.read[i].hasFree
}

// Compare judges the trees read at their final places against trees, one each, as Compare
// does: the state of each, with the error that says how it differs (Differs) or why it could
// not be checked.
func (f *Finals) Compare(ctx context.Context, c Conn, trees []*Tree) (states []State, errs []error) {
	for i, r := range f.read {
		st, err := compareRead(ctx, c, trees[i], f.finals[i], r)
		states, errs = append(states, st), append(errs, err)
	}
	return states, errs
}

// Compare compares the node's final directory with t by kinds, modes, owners, link targets
// and contents, and reads the manifest kept beside it, all in one command. A tree whose
// manifest is the one t would have and whose files all keep the stamps the manifest records
// holds the contents that were checked when it was recorded: it is Same without being read
// again. Otherwise the SHA-256 of every file is computed on the node. A Differs state comes
// with an error saying how it differs; any other error means the node could not be read.
func Compare(ctx context.Context, c Conn, t *Tree, final string) (State, error) {
	states, errs, err := CompareAll(ctx, c, []*Tree{t}, []string{final})
	if err != nil {
		return Missing, err
	}
	return states[0], errs[0]
}

// CompareAll compares the node's directories finals with the trees, each as Compare does,
// reading them all in one command: the state of each, with the error that says how it
// differs (Differs) or why it could not be checked. err means the node could not be read.
func CompareAll(ctx context.Context, c Conn, trees []*Tree, finals []string) (states []State, errs []error, err error) {
	f, err := ReadFinals(ctx, c, finals, nil)
	if err != nil {
		return nil, nil, err
	}
	states, errs = f.Compare(ctx, c, trees)
	return states, errs, nil
}

// compareRead judges what readFinals read at final against t.
func compareRead(ctx context.Context, c Conn, t *Tree, final string, r finalRead) (State, error) {
	if r.l == nil {
		return Missing, nil
	}
	want := manifestOf(t, r.l.uid, r.l.gid)
	diffs := differences(want, r.l, true)
	recorded := r.bad == nil && r.m != nil && r.m.equal(want)
	if len(diffs) == 0 && recorded && r.m.stamped(r.l) {
		return Same, nil
	}
	if len(diffs) == 0 {
		var err error
		if diffs, err = contentDiffs(ctx, c, final, want); err != nil {
			return Missing, fmt.Errorf("%s: check %s: %w", c.Node(), final, err)
		}
	}
	if len(diffs) > 0 {
		return Differs, fmt.Errorf("%s: %s differs from what is to be staged: %w", c.Node(), final, diffError(diffs))
	}
	// The contents are the tree's; the manifest is missing, another, or its stamps are
	// stale (a file rewritten with the same bytes, a tree restored from a backup): Record
	// writes it anew.
	return Unrecorded, nil
}
