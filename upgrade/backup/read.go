package backup

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// Archive is an archive read through and checked: its manifest describes exactly its
// entries, every path stays in the scope, every link target is one the scope allows, and
// every file's content matches its size and sha256.
type Archive struct {
	m   Manifest
	sum [32]byte // of the manifest's bytes: a second reading must find the same
}

// Manifest returns the archive's manifest.
func (a *Archive) Manifest() Manifest { return a.m }

// Verify reads the archive in r through and checks it against its manifest and sc, writing
// nothing: the manifest is well formed (see Scope.CheckLink for links); the entries after it
// are exactly the manifest's, in its order, each a directory, a regular file or a symlink
// with a clean relative name, named once, with the type, owner, group, mode, time, size and
// link target the manifest gives; and every file's content has its sha256. Hard links,
// devices, fifos and anything else are refused, as are a truncated or damaged archive and
// data after its end.
func Verify(ctx context.Context, r io.Reader, sc Scope) (*Archive, error) {
	return scan(ctx, r, sc, nil, nil)
}

// maxTrailer bounds what may follow the end of the tar stream (tar pads to its record size).
const maxTrailer = 1 << 20

// scan is Verify. When want is set, the manifest must be the one want was read with. fn,
// when set, is given every entry in order, and a regular file's content as it is read: its
// checksum is compared only once fn returned, so fn must not make a file visible before scan
// returned without error.
func scan(ctx context.Context, r io.Reader, sc Scope, want *Archive, fn func(e Entry, content io.Reader) error) (*Archive, error) {
	if err := sc.check(); err != nil {
		return nil, err
	}
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("not a backup archive: %w", err)
	}
	tr := tar.NewReader(gz)
	a, err := readHead(tr, sc, want)
	if err != nil {
		return nil, err
	}
	if err := scanEntries(ctx, tr, a.m.Entries, fn); err != nil {
		return nil, err
	}
	if err := checkTrailer(gz); err != nil {
		return nil, err
	}
	return a, nil
}

// readHead reads the manifest at the head of the archive and checks it: the one want was read
// with, when want is set, and within sc.
func readHead(tr *tar.Reader, sc Scope, want *Archive) (*Archive, error) {
	m, raw, err := readManifest(tr)
	if err != nil {
		return nil, err
	}
	a := &Archive{m: m, sum: sha256.Sum256(raw)}
	if want != nil && a.sum != want.sum {
		return nil, errors.New("the archive's manifest is not the one checked before: the archive was changed")
	}
	if err := m.check(sc); err != nil {
		return nil, err
	}
	return a, nil
}

// scanEntries reads the archive's entries after its manifest: each must be the manifest's
// next one, of its type, owner, mode and time, a file of its checksum; fn, when set, is given
// each in order.
func scanEntries(ctx context.Context, tr *tar.Reader, entries []Entry, fn func(e Entry, content io.Reader) error) error {
	order := newEntryOrder(entries)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read archive: %w", err)
		}
		e, err := order.entry(hdr)
		if err != nil {
			return err
		}
		if err := compare(hdr, e); err != nil {
			return err
		}
		if err := readEntry(tr, e, fn); err != nil {
			return err
		}
	}
	return order.missing()
}

// entryOrder checks that an archive holds the entries of its manifest, each once and in the
// manifest's order.
type entryOrder struct {
	entries []Entry
	index   map[string]int // an entry's place in the manifest, by path
	seen    map[string]bool
	next    int // the place of the entry expected next
}

func newEntryOrder(entries []Entry) *entryOrder {
	index := make(map[string]int, len(entries))
	for i, e := range entries {
		index[e.Path] = i
	}
	return &entryOrder{entries: entries, index: index, seen: make(map[string]bool, len(entries))}
}

// entry returns the manifest's entry of the archive's entry hdr, refusing a path or a type
// the archive may not hold, an entry held twice, one the manifest lacks or one out of order.
func (o *entryOrder) entry(hdr *tar.Header) (Entry, error) {
	p, err := entryPath(hdr.Name)
	if err != nil {
		return Entry{}, err
	}
	if err := allowedType(p, hdr); err != nil {
		return Entry{}, err
	}
	if o.seen[p] {
		return Entry{}, fmt.Errorf("the archive holds %s twice", p)
	}
	o.seen[p] = true
	i, ok := o.index[p]
	switch {
	case !ok:
		return Entry{}, fmt.Errorf("%s is in the archive but not in its manifest", p)
	case i != o.next:
		// i > next: an earlier entry would have been seen.
		return Entry{}, fmt.Errorf("%s: in the manifest but not in the archive where the manifest has it (the archive has %s there)", o.entries[o.next].Path, p)
	}
	o.next++
	return o.entries[i], nil
}

// missing refuses the manifest's entries the archive ended without, naming the first five.
func (o *entryOrder) missing() error {
	if o.next >= len(o.entries) {
		return nil
	}
	var missing []string
	for _, e := range o.entries[o.next:] {
		if len(missing) == 5 {
			missing = append(missing, fmt.Sprintf("and %d more", len(o.entries)-o.next-5))
			break
		}
		missing = append(missing, e.Path)
	}
	return fmt.Errorf("%s: in the manifest but not in the archive", strings.Join(missing, ", "))
}

// readEntry gives entry e to fn, when set, with a file's content as it is read from tr, and
// then checks the file's checksum against the manifest.
func readEntry(tr io.Reader, e Entry, fn func(e Entry, content io.Reader) error) error {
	if e.Type != TypeFile {
		if fn != nil {
			return fn(e, nil)
		}
		return nil
	}
	h := sha256.New()
	content := io.TeeReader(tr, h)
	var err error
	if fn != nil {
		err = fn(e, content)
	}
	if err == nil {
		_, err = io.Copy(io.Discard, content) // the rest, for the checksum
	}
	if err != nil {
		return fmt.Errorf("%s: %w", e.Path, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != e.SHA256 {
		return fmt.Errorf("%s: sha256 %s, but the manifest says %s: the archive was changed", e.Path, got, e.SHA256)
	}
	return nil
}

// checkTrailer reads the end of the gzip stream: its checksum, and no more than padding.
func checkTrailer(gz io.Reader) error {
	n, err := io.Copy(io.Discard, io.LimitReader(gz, maxTrailer+1))
	if err != nil {
		return fmt.Errorf("read archive: %w", err)
	}
	if n > maxTrailer {
		return errors.New("read archive: data after the end of the archive")
	}
	return nil
}

// entryPath turns an entry's name into the absolute path it is restored to, refusing
// anything but a clean relative path.
func entryPath(name string) (string, error) {
	rel := strings.TrimSuffix(name, "/")
	if rel == "" || strings.HasPrefix(rel, "/") || path.Clean(rel) != rel || rel == ".." || strings.HasPrefix(rel, "../") ||
		len(rel) >= maxPath || strings.ContainsFunc(rel, isControl) {
		return "", fmt.Errorf("entry %q is not a clean relative path", name)
	}
	return "/" + rel, nil
}

// allowedType refuses every entry but directories, regular files and symlinks.
func allowedType(p string, hdr *tar.Header) error {
	switch hdr.Typeflag {
	case tar.TypeDir, tar.TypeReg, tar.TypeSymlink:
		return nil
	case tar.TypeLink:
		return fmt.Errorf("%s is a hard link to %q: a backup holds none, and a restore makes none", p, hdr.Linkname)
	case tar.TypeChar, tar.TypeBlock:
		return fmt.Errorf("%s is a device: a backup holds none, and a restore makes none", p)
	case tar.TypeFifo:
		return fmt.Errorf("%s is a fifo: a backup holds none, and a restore makes none", p)
	}
	return fmt.Errorf("%s is an entry of type %q: a backup holds only directories, regular files and symlinks", p, hdr.Typeflag)
}

// compare checks that the header of an entry says what the manifest says of it.
func compare(hdr *tar.Header, e Entry) error {
	var diffs []string
	typ := map[byte]string{tar.TypeDir: TypeDir, tar.TypeReg: TypeFile, tar.TypeSymlink: TypeSymlink}[hdr.Typeflag]
	if typ != e.Type {
		diffs = append(diffs, fmt.Sprintf("a %s in the archive, a %s in the manifest", typ, e.Type))
	}
	if hdr.Mode != int64(e.Mode) {
		diffs = append(diffs, fmt.Sprintf("mode %04o in the archive, %s in the manifest", hdr.Mode, e.Mode))
	}
	if hdr.Uid != int(e.UID) || hdr.Gid != int(e.GID) {
		diffs = append(diffs, fmt.Sprintf("owner %d:%d in the archive, %d:%d in the manifest", hdr.Uid, hdr.Gid, e.UID, e.GID))
	}
	if hdr.Size != e.Size {
		diffs = append(diffs, fmt.Sprintf("%d bytes in the archive, %d in the manifest", hdr.Size, e.Size))
	}
	if hdr.Linkname != e.Link {
		diffs = append(diffs, fmt.Sprintf("link target %q in the archive, %q in the manifest", hdr.Linkname, e.Link))
	}
	if hdr.ModTime.Unix() != e.ModTime {
		diffs = append(diffs, fmt.Sprintf("time %d in the archive, %d in the manifest", hdr.ModTime.Unix(), e.ModTime))
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%s: %s", e.Path, strings.Join(diffs, "; "))
	}
	return nil
}
