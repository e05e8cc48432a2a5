package staging

import (
	"context"
	"fmt"
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

// compareScript lists the directory $1 (list) and follows the listing with the manifest $2:
// markerManifest and its bytes, markerNoManifest when there is none, markerBadManifest when it
// is not a regular file (a link is never followed).
const compareScript = listFunction + `set -e
list "$1"
if [ -L "$2" ] || { [ -e "$2" ] && [ ! -f "$2" ]; }; then printf '%s\0' ` + markerBadManifest + `
elif [ ! -e "$2" ]; then printf '%s\0' ` + markerNoManifest + `
else printf '%s\0' ` + markerManifest + `; exec cat -- "$2"; fi`

// readFinal reads, in one command, what the node holds at final (nil when nothing) and the
// manifest kept beside it: nil when there is none, an error satisfying errors.Is(err,
// errBadManifest) as bad when it cannot be read as a manifest. err means the node could not
// be read.
func readFinal(ctx context.Context, c Conn, final string) (l *listing, m *manifest, bad, err error) {
	p := newListingReader(final)
	rest := &limitBuffer{max: maxManifest}
	var found string
	p.marker = func(mark string) (func([]byte) error, error) {
		found = mark
		switch mark {
		case markerManifest:
			return nil, errRest
		case markerNoManifest, markerBadManifest:
			return func(rec []byte) error { return fmt.Errorf("unexpected output after %s: %q", mark, rec) }, nil
		}
		return nil, fmt.Errorf("unexpected listing of %s: %q", final, mark)
	}
	rec := &records{seps: "\x00", fn: p.record, rest: rest}
	if _, err := c.RunOutput(ctx, rec, "sh", "-c", compareScript, "cutover-stage", final, ManifestPath(final)); err != nil {
		return nil, nil, nil, err
	}
	if err := rec.end(); err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", c.Node(), err)
	}
	if l, err = p.result(c.Node()); err != nil {
		return nil, nil, nil, err
	}
	switch found {
	case markerNoManifest:
		return l, nil, nil, nil
	case markerBadManifest:
		return l, nil, fmt.Errorf("%w: %s is not a regular file", errBadManifest, ManifestPath(final)), nil
	case markerManifest:
	default:
		return nil, nil, nil, fmt.Errorf("%s: the listing of %s ended early", c.Node(), final)
	}
	if rest.over {
		return l, nil, fmt.Errorf("%w: %s is larger than %d bytes", errBadManifest, ManifestPath(final), maxManifest), nil
	}
	if m, err = decodeManifest(rest.b.Bytes()); err != nil {
		return l, nil, fmt.Errorf("%s: %w", ManifestPath(final), err), nil
	}
	return l, m, nil, nil
}

// Compare compares the node's final directory with t by kinds, modes, owners, link targets
// and contents, and reads the manifest kept beside it, all in one command. A tree whose
// manifest is the one t would have and whose files all keep the stamps the manifest records
// holds the contents that were checked when it was recorded: it is Same without being read
// again. Otherwise the SHA-256 of every file is computed on the node. A Differs state comes
// with an error saying how it differs; any other error means the node could not be read.
func Compare(ctx context.Context, c Conn, t *Tree, final string) (State, error) {
	l, rec, bad, err := readFinal(ctx, c, final)
	if err != nil {
		return Missing, fmt.Errorf("%s: read %s: %w", c.Node(), final, err)
	}
	if l == nil {
		return Missing, nil
	}
	want := manifestOf(t, l.uid, l.gid)
	diffs := differences(want, l, true)
	recorded := bad == nil && rec != nil && rec.equal(want)
	if len(diffs) == 0 && recorded && rec.stamped(l) {
		return Same, nil
	}
	if len(diffs) == 0 {
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
