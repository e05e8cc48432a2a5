package backup

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Format is the manifest format this package writes and restores. Format 1 (cutover before
// it recorded owners and the modes of directories and links) is listed, never restored.
const Format = 2

// ManifestName is the name of the manifest inside an archive: its first entry.
const ManifestName = "cutover-manifest.json"

// Stamp is the layout of the UTC time that ends every archive's name.
const Stamp = "20060102T150405Z"

// Kinds of archive.
const (
	// KindSwitch is the archive a run took before it changed anything.
	KindSwitch = "switch"
	// KindBeforeRestore is the state `cutover backup restore` kept aside before it wrote.
	KindBeforeRestore = "before-restore"
)

// Manifest describes an archive: its first entry, cutover-manifest.json.
type Manifest struct {
	Format  int       `json:"format"`
	Kind    string    `json:"kind"`
	App     string    `json:"app"`
	Run     uint64    `json:"run"`
	From    string    `json:"from"`
	To      string    `json:"to"`
	Created time.Time `json:"created"`
	// Roots are the directories the backup covered.
	Roots []string `json:"roots"`
	// Links are the switch links the archive holds, with their targets.
	Links map[string]string `json:"links"`
	// Entries are every entry of the archive after the manifest, in archive order.
	Entries []Entry `json:"entries"`
	// Skipped are what the backup found and did not archive.
	Skipped []Skipped `json:"skipped"`
}

// Entry types.
const (
	TypeDir     = "dir"
	TypeFile    = "file"
	TypeSymlink = "symlink"
)

// Entry is one directory, regular file or symlink of an archive, as it was on disk.
type Entry struct {
	// Path is absolute, as the application has it.
	Path string `json:"path"`
	Type string `json:"type"`
	// Mode is the permission bits with setuid, setgid and sticky.
	Mode Mode   `json:"mode"`
	UID  uint32 `json:"uid"`
	GID  uint32 `json:"gid"`
	// ModTime is the modification time, in seconds since the Unix epoch.
	ModTime int64 `json:"mtime"`
	// Size and SHA256 are a regular file's.
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Link is a symlink's target.
	Link string `json:"link,omitempty"`
}

// Skipped is something a backup found and did not archive.
type Skipped struct {
	Path string `json:"path"`
	// Type is "socket", "fifo", "character device", "block device", "symlink" or "directory".
	Type string `json:"type"`
	// Reason says why, for what is not skipped by its type alone.
	Reason string `json:"reason,omitempty"`
}

// String is the path and what it is, for messages.
func (s Skipped) String() string {
	if s.Reason != "" {
		return fmt.Sprintf("%s (%s: %s)", s.Path, s.Type, s.Reason)
	}
	return fmt.Sprintf("%s (%s)", s.Path, s.Type)
}

// Mode is a file's permission bits with setuid, setgid and sticky (07777), written in octal.
type Mode uint32

func (m Mode) String() string { return fmt.Sprintf("%04o", uint32(m)) }

// MarshalText writes the mode in octal, such as "0644" or "4755".
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText reads the mode in octal, refusing anything beyond 07777.
func (m *Mode) UnmarshalText(b []byte) error {
	v, err := strconv.ParseUint(string(b), 8, 32)
	if err != nil || len(b) == 0 || len(b) > 5 || v > 0o7777 {
		return fmt.Errorf("mode %q: want octal permission bits, at most 7777", b)
	}
	*m = Mode(v)
	return nil
}

// ID is the archive's name without .tar.gz, as its manifest says it must be.
func (m Manifest) ID() string {
	stamp := m.Created.UTC().Format(Stamp)
	if m.Kind == KindBeforeRestore {
		return fmt.Sprintf("%s-%s-%s-%s", m.App, m.From, KindBeforeRestore, stamp)
	}
	return fmt.Sprintf("%s-%s-to-%s-%s", m.App, m.From, m.To, stamp)
}

// Count returns the number of entries of type typ.
func (m Manifest) Count(typ string) int {
	n := 0
	for _, e := range m.Entries {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// maxManifestSize bounds the manifest a reader accepts: a few hundred bytes per entry, so
// room for a hundred thousand entries and more.
const maxManifestSize = 64 << 20

// errOldFormat says the manifest is of format 1.
var errOldFormat = errors.New("manifest format 1, written by an older cutover: it records neither owners nor the modes of directories and links, so cutover lists it but neither verifies nor restores it (extract it by hand with tar if you must)")

// IsOldFormat reports whether err says an archive's manifest is of format 1.
func IsOldFormat(err error) bool { return errors.Is(err, errOldFormat) }

// ReadManifest reads the manifest of the archive at path, its first entry, without reading
// the rest of the archive. It checks that the manifest is there and parses, not that the
// archive agrees with it.
func ReadManifest(path string) (Manifest, error) {
	f, err := openArchive(path)
	if err != nil {
		return Manifest{}, fmt.Errorf("read manifest: %w", err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return Manifest{}, fmt.Errorf("read manifest of %s: not a backup archive: %w", path, err)
	}
	m, _, err := readManifest(tar.NewReader(gz))
	if err != nil {
		return Manifest{}, fmt.Errorf("read manifest of %s: %w", path, err)
	}
	return m, nil
}

// openArchive opens the regular file path for reading, never through a link.
func openArchive(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", path)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// readManifest reads the manifest from the first entry of tr, and returns its bytes too.
func readManifest(tr *tar.Reader) (Manifest, []byte, error) {
	hdr, err := tr.Next()
	if err != nil {
		return Manifest{}, nil, fmt.Errorf("not a backup archive: %w", err)
	}
	if hdr.Name != ManifestName || hdr.Typeflag != tar.TypeReg {
		return Manifest{}, nil, fmt.Errorf("not a backup archive: the first entry is %q, not %s", hdr.Name, ManifestName)
	}
	if hdr.Size > maxManifestSize {
		return Manifest{}, nil, fmt.Errorf("%s is %d bytes, more than the %d a manifest may have", ManifestName, hdr.Size, maxManifestSize)
	}
	data, err := io.ReadAll(tr)
	if err != nil {
		return Manifest{}, nil, fmt.Errorf("%s: %w", ManifestName, err)
	}
	var head struct {
		Format *int `json:"format"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return Manifest{}, nil, fmt.Errorf("%s: %w", ManifestName, err)
	}
	switch {
	case head.Format == nil:
		return Manifest{}, nil, errOldFormat
	case *head.Format != Format:
		return Manifest{}, nil, fmt.Errorf("%s: format %d, which this cutover does not know (it knows %d): a newer cutover wrote it", ManifestName, *head.Format, Format)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, nil, fmt.Errorf("%s: %w", ManifestName, err)
	}
	if dec.More() {
		return Manifest{}, nil, fmt.Errorf("%s: data after the manifest", ManifestName)
	}
	return m, data, nil
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// check checks that the manifest can describe an archive of sc: every entry is a clean
// absolute path in one of the roots, named once, after its directory; roots are
// directories; types, modes, sizes, checksums and link targets are well formed, and every
// symlink's target is one CheckLink allows; the switch links are symlinks of the archive with
// the same targets. It reads nothing from disk.
func (m Manifest) check(sc Scope) error {
	if m.Kind != KindSwitch && m.Kind != KindBeforeRestore {
		return fmt.Errorf("%s: kind %q, want %s or %s", ManifestName, m.Kind, KindSwitch, KindBeforeRestore)
	}
	var errs []error
	bad := func(format string, args ...any) {
		if len(errs) < maxErrors {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	types := make(map[string]string, len(m.Entries))
	for _, e := range m.Entries {
		p := e.Path
		switch {
		case !cleanAbs(p) || len(p) > maxPath:
			bad("the manifest names %q, not a clean absolute path", p)
			continue
		case types[p] != "":
			bad("the manifest names %s twice", p)
			continue
		case sc.rootOf(p) == "":
			bad("%s is outside %s", p, strings.Join(sc.Roots, " and "))
			continue
		case sc.isRoot(p) && e.Type != TypeDir:
			bad("%s is a %s in the manifest, but it is a directory backed up", p, e.Type)
		case !sc.isRoot(p) && types[dirOf(p)] != TypeDir:
			bad("%s: its directory is not a directory of the archive before it", p)
		}
		types[p] = e.Type
		switch e.Type {
		case TypeDir:
			if e.Size != 0 || e.SHA256 != "" || e.Link != "" {
				bad("%s: a directory with a size, a checksum or a link target", p)
			}
		case TypeFile:
			if e.Size < 0 || !sha256Hex.MatchString(e.SHA256) || e.Link != "" {
				bad("%s: a file needs a size and a sha256 of 64 hex digits, and no link target", p)
			}
		case TypeSymlink:
			if e.Size != 0 || e.SHA256 != "" {
				bad("%s: a symlink with a size or a checksum", p)
			}
			if err := sc.CheckLink(p, e.Link); err != nil {
				bad("%w", err)
			}
		default:
			bad("%s: type %q, want %s, %s or %s", p, e.Type, TypeDir, TypeFile, TypeSymlink)
		}
	}
	for l, target := range m.Links {
		if _, ok := sc.Links[l]; !ok {
			bad("the manifest names %s as a switch link, which it is not", l)
			continue
		}
		found := false
		for _, e := range m.Entries {
			if e.Path == l {
				found = e.Type == TypeSymlink && e.Link == target
				break
			}
		}
		if !found {
			bad("link %s -> %s of the manifest is not in the archive as such", l, target)
		}
	}
	return errors.Join(errs...)
}

// maxErrors bounds the problems one check reports.
const maxErrors = 20

func dirOf(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// Open opens the archive at path for reading: a regular file, never through a link.
func Open(path string) (*os.File, error) { return openArchive(path) }
