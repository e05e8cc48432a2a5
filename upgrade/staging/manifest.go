package staging

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/cutover/cutover/cfgupgrade"
	"github.com/cutover/cutover/nodes"
)

// A staged tree's manifest is kept on the node beside the tree, in a file cutover owns:
// ManifestPath(final), "<base>/.<VERSIONDIR>.cutover-manifest". It is JSON:
//
//	{"format": 1, "mode": "0755", "uid": 0, "gid": 0, "entries": [
//	{"name": "usr/sbin/app", "kind": "f", "mode": "0755", "uid": 0, "gid": 0, "size": 4096, "sha256": "…", "stamp": "2049:1311:1732300000.123456789"},
//	{"name": "usr/lib/app-link", "kind": "l", "uid": 0, "gid": 0, "target": "../sbin/app"}
//	]}
//
// mode, uid and gid at the top are the tree's root directory's; each entry has its name
// relative to the root, its kind ("d", "f", "l", "p", "c", "b"), its mode in octal with the
// setuid, setgid and sticky bits (not for links), its owner, a file's size and SHA-256, a
// link's target, and a file's stamp: its device, inode and status-change time (ctime) on the
// node when the manifest was written, after its contents were checked against the SHA-256.
// The manifest is written, synced and renamed into place before the tree is, so a placed tree
// always has one. verify-installed (with [policy] verify_checksums) and status judge the tree
// by it and by its content (the SHA-256 of every file, computed on the node), never by sizes
// and modification times. A second stage judges it by the manifest and, for its contents,
// by the stamps: the kernel sets a file's ctime anew at every write, truncation, chmod, chown
// or link, and no call sets it back (unlike the modification time, which any writer can), so
// a file whose device, inode and ctime are those recorded holds the contents that were
// checked. A file whose stamp differs is checksummed (Compare).

// manifestFormat is the format the manifest's "format" names.
const manifestFormat = 1

// maxManifest bounds the manifest read from a node: far more than the manifest of a tree
// at [stage]'s largest bounds takes.
const maxManifest = 256 << 20

// ManifestPath is where the manifest of the tree final is kept on a node.
func ManifestPath(final string) string {
	return path.Join(path.Dir(final), "."+path.Base(final)+".cutover-manifest")
}

// manifest describes a tree as a node holds it.
type manifest struct {
	Format  int             `json:"format"`
	Mode    string          `json:"mode"`
	UID     uint32          `json:"uid"`
	GID     uint32          `json:"gid"`
	Entries []manifestEntry `json:"entries"`
}

// manifestEntry is one entry of a manifest.
type manifestEntry struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Mode   string `json:"mode,omitempty"`
	UID    uint32 `json:"uid"`
	GID    uint32 `json:"gid"`
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	Target string `json:"target,omitempty"`
	Stamp  string `json:"stamp,omitempty"`
}

// manifestOf is the manifest of t as a node holds it once staged: every entry owned by uid
// and gid (the login's, as tar on the node creates it).
func manifestOf(t *Tree, uid, gid uint32) *manifest {
	m := &manifest{Format: manifestFormat, Mode: fmt.Sprintf("%04o", tarMode(t.Mode)), UID: uid, GID: gid,
		Entries: make([]manifestEntry, 0, len(t.Entries))}
	for _, e := range t.Entries {
		me := manifestEntry{Name: e.Name, Kind: string(e.Kind), UID: uid, GID: gid}
		if e.Kind != 'l' {
			me.Mode = fmt.Sprintf("%04o", tarMode(e.Mode))
		}
		switch e.Kind {
		case 'f':
			me.Size, me.SHA256 = e.Size, e.Sum
		case 'l':
			me.Target = e.Target
		}
		m.Entries = append(m.Entries, me)
	}
	return m
}

// equal reports whether two manifests describe the same tree, whatever their stamps.
func (m *manifest) equal(o *manifest) bool {
	if m.Format != o.Format || m.Mode != o.Mode || m.UID != o.UID || m.GID != o.GID || len(m.Entries) != len(o.Entries) {
		return false
	}
	for i := range m.Entries {
		a, b := m.Entries[i], o.Entries[i]
		a.Stamp, b.Stamp = "", ""
		if a != b {
			return false
		}
	}
	return true
}

// stamp gives every file of m the stamp the listing l has for it.
func (m *manifest) stamp(l *listing) {
	for i, e := range m.Entries {
		if e.Kind == "f" {
			m.Entries[i].Stamp = l.entries[e.Name].stamp
		}
	}
}

// stamped reports whether every file of m has a stamp, and the stamp the listing l has for
// it: the files hold the contents whose checksums the manifest records.
func (m *manifest) stamped(l *listing) bool {
	for _, e := range m.Entries {
		if e.Kind == "f" && (e.Stamp == "" || l.entries[e.Name].stamp != e.Stamp) {
			return false
		}
	}
	return true
}

// encode writes the manifest as JSON, one entry a line.
func (m *manifest) encode() ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"format": %d, "mode": %q, "uid": %d, "gid": %d, "entries": [`, m.Format, m.Mode, m.UID, m.GID)
	for i, e := range m.Entries {
		line, err := json.Marshal(e)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
		b.Write(line)
	}
	b.WriteString("\n]}\n")
	return b.Bytes(), nil
}

// errBadManifest marks a manifest that cannot be read as one.
var errBadManifest = errors.New("not a manifest cutover wrote")

// decodeManifest reads a manifest, refusing one that nests deeper than cfgupgrade's bound,
// has unknown fields, or describes entries no staged tree holds.
func decodeManifest(data []byte) (*manifest, error) {
	bad := func(err error) error { return fmt.Errorf("%w: %w", errBadManifest, err) }
	if err := cfgupgrade.CheckJSONDepth(data, cfgupgrade.MaxJSONDepth); err != nil {
		return nil, bad(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m manifest
	if err := dec.Decode(&m); err != nil {
		return nil, bad(err)
	}
	if dec.More() {
		return nil, bad(errors.New("data after the manifest"))
	}
	if m.Format != manifestFormat {
		return nil, bad(fmt.Errorf("format %d, want %d", m.Format, manifestFormat))
	}
	if _, err := parseMode(m.Mode); err != nil {
		return nil, bad(fmt.Errorf("the root's mode %q", m.Mode))
	}
	seen := make(map[string]bool, len(m.Entries))
	for _, e := range m.Entries {
		if err := e.check(); err != nil {
			return nil, bad(fmt.Errorf("entry %q: %w", e.Name, err))
		}
		if seen[e.Name] {
			return nil, bad(fmt.Errorf("entry %q twice", e.Name))
		}
		seen[e.Name] = true
	}
	return &m, nil
}

// check refuses an entry no staged tree holds.
func (e manifestEntry) check() error {
	if e.Name == "" || e.Name == "." || path.Clean(e.Name) != e.Name || path.IsAbs(e.Name) || e.Name == ".." || strings.HasPrefix(e.Name, "../") ||
		strings.ContainsFunc(e.Name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return errors.New("not a clean relative name")
	}
	if len(e.Kind) != 1 || !strings.Contains("dflpcb", e.Kind) {
		return fmt.Errorf("kind %q", e.Kind)
	}
	if e.Kind != "l" {
		if _, err := parseMode(e.Mode); err != nil {
			return fmt.Errorf("mode %q", e.Mode)
		}
	}
	if e.Kind == "f" && (len(e.SHA256) != 64 || strings.Trim(e.SHA256, "0123456789abcdef") != "" || e.Size < 0) {
		return errors.New("a file without a size and SHA-256")
	}
	if e.Stamp != "" && (e.Kind != "f" || !validStamp(e.Stamp)) {
		return fmt.Errorf("stamp %q", e.Stamp)
	}
	return nil
}

// parseMode reads a mode as a manifest writes it.
func parseMode(s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil || v > 0o7777 {
		return 0, errors.New("bad mode")
	}
	return uint32(v), nil
}

// differences lists how the node's listing l differs from the manifest m: entries missing,
// extra, or of another kind, mode, owner, size or link target; with root, the root
// directory's mode and owner too. Contents are compared apart (contentDiffs).
func differences(m *manifest, l *listing, root bool) []string {
	var diffs []string
	if root {
		if mode, _ := parseMode(m.Mode); l.root.mode != unixPerm(mode) {
			diffs = append(diffs, fmt.Sprintf("the tree's root has mode %v, want %v", l.root.mode, unixPerm(mode)))
		}
	}
	if l.root.uid != m.UID || l.root.gid != m.GID {
		diffs = append(diffs, fmt.Sprintf("the tree's root is owned by %d:%d, want %d:%d", l.root.uid, l.root.gid, m.UID, m.GID))
	}
	seen := make(map[string]bool, len(m.Entries))
	for _, e := range m.Entries {
		seen[e.Name] = true
		g, ok := l.entries[e.Name]
		mode, _ := parseMode(e.Mode)
		switch {
		case !ok:
			diffs = append(diffs, e.Name+" is missing")
		case kindOf(g.kind) != e.Kind[0]:
			diffs = append(diffs, fmt.Sprintf("%s is of type %c, want %s", e.Name, g.kind, e.Kind))
		case e.Kind != "l" && g.mode != unixPerm(mode):
			diffs = append(diffs, fmt.Sprintf("%s has mode %v, want %v", e.Name, g.mode, unixPerm(mode)))
		case g.uid != e.UID || g.gid != e.GID:
			diffs = append(diffs, fmt.Sprintf("%s is owned by %d:%d, want %d:%d", e.Name, g.uid, g.gid, e.UID, e.GID))
		case e.Kind == "f" && g.size != e.Size:
			diffs = append(diffs, e.Name+" has other contents (size)")
		case e.Kind == "l" && g.target != e.Target:
			diffs = append(diffs, fmt.Sprintf("%s points to %q, want %q", e.Name, g.target, e.Target))
		}
	}
	var extra []string
	for name := range l.entries {
		if !seen[name] {
			extra = append(extra, name+" should not be there")
		}
	}
	slices.Sort(extra)
	return append(diffs, extra...)
}

// contentDiffs checksums every file of m in the node's directory dir and lists those whose
// SHA-256 is not the manifest's.
func contentDiffs(ctx context.Context, c Conn, dir string, m *manifest) ([]string, error) {
	var names []string
	for _, e := range m.Entries {
		if e.Kind == "f" {
			names = append(names, e.Name)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	have, err := sums(ctx, c, dir, names)
	if err != nil {
		return nil, err
	}
	var diffs []string
	for _, e := range m.Entries {
		if e.Kind == "f" && have[e.Name] != e.SHA256 {
			diffs = append(diffs, e.Name+" has other contents (checksum)")
		}
	}
	return diffs, nil
}

// diffError joins differences into one error naming the first few; nil for none.
func diffError(diffs []string) error {
	if len(diffs) == 0 {
		return nil
	}
	if len(diffs) > 5 {
		diffs = append(diffs[:5:5], fmt.Sprintf("and %d more", len(diffs)-5))
	}
	return errors.New(strings.Join(diffs, "; "))
}

// receiveManifest defines the shell function receive, which writes standard input, that must
// be $2 bytes long, to a temporary file beside the manifest $1 (an absolute path), named in
// $mt: a manifest cut short (cutover killed while it was sent) is refused, never put in place.
const receiveManifest = `receive() {
	mt=${1%/*}/.${1##*/}.tmp
	rm -f -- "$mt"
	(umask 022 && cat >"$mt")
	if [ "$(wc -c <"$mt")" -ne "$2" ]; then rm -f -- "$mt"; echo "the manifest $1 arrived cut short" >&2; return 1; fi
}
`

// writeManifestScript writes standard input, of $2 bytes, to $1 through a temporary file
// beside it (receive), synced, renamed over $1 (never through a link there) and the rename
// synced.
const writeManifestScript = receiveManifest + `set -e
receive "$1" "$2"
sync -- "$mt" 2>/dev/null || sync
mv -f -T -- "$mt" "$1"
sync -- "${1%/*}" 2>/dev/null || sync`

// Record writes the manifest of t, as the node holds it in dir (the temporary directory
// being staged, or final itself), to ManifestPath(final), durably. The node's dir must hold
// t's entries with their kinds, modes, owners and link targets; their contents were checked
// by checksum before.
func Record(ctx context.Context, c Conn, t *Tree, dir, final string) error {
	l, err := inventory(ctx, c, dir, false)
	if err == nil && l == nil {
		err = fmt.Errorf("%s is missing", dir)
	}
	if err != nil {
		return fmt.Errorf("%s: record the manifest of %s: %w", c.Node(), final, err)
	}
	data, err := recordOf(c, t, l, dir, dir == final)
	if err != nil {
		return err
	}
	if _, err := c.RunInput(ctx, bytes.NewReader(data), "sh", "-c", writeManifestScript, "cutover-stage", ManifestPath(final), strconv.Itoa(len(data))); err != nil {
		return fmt.Errorf("%s: write the manifest of %s: %w", c.Node(), final, err)
	}
	return nil
}

// recordOf returns the manifest of t, stamped, as the node's directory dir holds it (its
// listing l), encoded; with root, dir's own mode must be the tree's too.
func recordOf(c Conn, t *Tree, l *listing, dir string, root bool) ([]byte, error) {
	m := manifestOf(t, l.uid, l.gid)
	if err := diffError(differences(m, l, root)); err != nil {
		return nil, fmt.Errorf("%s: %s does not match the manifest: %w", c.Node(), dir, err)
	}
	m.stamp(l)
	return m.encode()
}

// readManifestScript prints the manifest $1, or exits 3 when there is none and 4 when it is
// not a regular file (a link is never followed).
const readManifestScript = `[ -e "$1" ] || [ -L "$1" ] || exit 3
if [ -L "$1" ] || [ ! -f "$1" ]; then exit 4; fi
exec cat -- "$1"`

// readManifest reads the manifest of the tree final from the node: nil when there is none.
// One that cannot be read as a manifest is an error satisfying errors.Is(err,
// errBadManifest).
func readManifest(ctx context.Context, c Conn, final string) (*manifest, error) {
	buf := &limitBuffer{max: maxManifest}
	_, err := c.RunOutput(ctx, buf, "sh", "-c", readManifestScript, "cutover-stage", ManifestPath(final))
	switch code, ok := nodes.ExitCode(err); {
	case ok && code == 3:
		return nil, nil
	case ok && code == 4:
		return nil, fmt.Errorf("%w: %s is not a regular file", errBadManifest, ManifestPath(final))
	}
	if err != nil {
		return nil, err
	}
	if buf.over {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", errBadManifest, ManifestPath(final), maxManifest)
	}
	m, err := decodeManifest(buf.b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ManifestPath(final), err)
	}
	return m, nil
}

// limitBuffer keeps what is written to it up to max bytes and notes whether more came.
type limitBuffer struct {
	b    bytes.Buffer
	max  int
	over bool
}

func (l *limitBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); len(p) > room {
		l.b.Write(p[:max(room, 0)])
		l.over = true
		return len(p), nil
	}
	return l.b.Write(p)
}

// Installed reports whether the node's final directory holds exactly t with its manifest: a
// nil error and false when final does not exist or its manifest is to be recorded, an error
// saying how it differs otherwise.
func Installed(ctx context.Context, c Conn, t *Tree, final string) (bool, error) {
	st, err := Compare(ctx, c, t, final)
	return st == Same, err
}

// Verify checks the node's tree final against the manifest kept beside it: entries, kinds,
// modes, owners, link targets and the SHA-256 of every file, computed on the node. recorded
// is false, with a nil error, when the tree has no manifest (the package manager installed
// it): there is nothing to check it against. A tree that differs from its manifest, is
// missing while its manifest is there, or whose manifest cannot be read is an error naming
// the node, the tree and the first differences.
func Verify(ctx context.Context, c Conn, final string) (recorded bool, err error) {
	m, err := readManifest(ctx, c, final)
	if err != nil {
		return true, fmt.Errorf("%s: the manifest of %s: %w", c.Node(), final, err)
	}
	if m == nil {
		return false, nil
	}
	l, err := inventory(ctx, c, final, false)
	if err == nil && l == nil {
		err = errors.New("the tree is missing, its manifest is there")
	}
	if err != nil {
		return true, fmt.Errorf("%s: read %s: %w", c.Node(), final, err)
	}
	diffs := differences(m, l, true)
	if len(diffs) == 0 {
		if diffs, err = contentDiffs(ctx, c, final, m); err != nil {
			return true, fmt.Errorf("%s: check %s: %w", c.Node(), final, err)
		}
	}
	if err := diffError(diffs); err != nil {
		return true, fmt.Errorf("%s: %s does not match its manifest %s: %w", c.Node(), final, ManifestPath(final), err)
	}
	return true, nil
}
