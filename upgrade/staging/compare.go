package staging

import (
	"context"
	"fmt"
	"strings"
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

// compareScript prints, for each pair of arguments $1 $2, $3 $4, ..., what readFinals reads
// of a tree: the listing of the directory (list), then the manifest kept beside it:
// markerManifest and its bytes ended by a NUL, markerNoManifest when there is none,
// markerBadManifest when it is not a regular file (a link is never followed). A manifest is
// JSON, which holds no NUL: a NUL in the file is printed as a byte that JSON allows nowhere
// (\x01), so that the manifest cannot end early, and is refused when it is decoded. One
// command reads every tree of a version.
const compareScript = listFunction + `set -e
while [ $# -ge 2 ]; do
	list "$1"
	if [ -L "$2" ] || { [ -e "$2" ] && [ ! -f "$2" ]; }; then printf '%s\0' ` + markerBadManifest + `
	elif [ ! -e "$2" ]; then printf '%s\0' ` + markerNoManifest + `
	else printf '%s\0' ` + markerManifest + `; tr '\0' '\1' <"$2"; printf '\0'; fi
	shift 2
done`

// finalRead is what readFinals read of one tree: its listing (nil when nothing is there) and
// its manifest (nil when none), or why the manifest is bad.
type finalRead struct {
	l   *listing
	m   *manifest
	bad error
}

// finalsReader parses compareScript's output, one tree after another.
type finalsReader struct {
	node     string
	finals   []string
	out      []finalRead
	p        *listingReader // the listing of the tree being read
	manifest bool           // the next record is the tree's manifest
	rec      *records
}

func (f *finalsReader) record(b []byte) error {
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

// readFinals reads, in one command, what the node holds at each of finals (a nil listing when
// nothing) and the manifest kept beside each: nil when there is none, bad (satisfying
// errors.Is(bad, errBadManifest)) when it cannot be read as a manifest. err means the node
// could not be read.
func readFinals(ctx context.Context, c Conn, finals []string) ([]finalRead, error) {
	f := &finalsReader{node: c.Node(), finals: finals}
	f.rec = &records{seps: "\x00", fn: f.record}
	argv := []string{"sh", "-c", compareScript, "cutover-stage"}
	for _, final := range finals {
		argv = append(argv, final, ManifestPath(final))
	}
	if _, err := c.RunOutput(ctx, f.rec, argv...); err != nil {
		return nil, err
	}
	if err := f.rec.end(); err != nil {
		return nil, fmt.Errorf("%s: %w", c.Node(), err)
	}
	if len(f.out) != len(finals) {
		return nil, fmt.Errorf("%s: the listing of %s ended early", c.Node(), finals[len(f.out)])
	}
	return f.out, nil
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
	read, err := readFinals(ctx, c, finals)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: read %s: %w", c.Node(), strings.Join(finals, " and "), err)
	}
	for i, r := range read {
		st, err := compareRead(ctx, c, trees[i], finals[i], r)
		states, errs = append(states, st), append(errs, err)
	}
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
