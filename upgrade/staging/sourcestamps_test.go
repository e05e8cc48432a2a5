package staging_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cutover/cutover/upgrade/staging"
)

// The tests of the stamps take them with a clock of their own (SetStampClock), so they do
// not run in parallel with the others.

// opened counts, by name, the files ReadTrees opens to checksum, until the test ends.
func opened(t *testing.T) func() []string {
	var mu sync.Mutex
	var names []string
	staging.SetTestHooks(t, nil, func(name string) {
		mu.Lock()
		defer mu.Unlock()
		names = append(names, name)
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := slices.Clone(names)
		names = nil
		slices.Sort(out)
		return out
	}
}

// stampsOf reads the tree at src, keeps its stamps at path and loads them back.
func stampsOf(t *testing.T, src, path string) (*staging.Tree, *staging.Stamps) {
	t.Helper()
	trees, err := staging.ReadTrees(src, []string{"."}, staging.Policy{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := staging.SaveStamps(path, trees, nil); err != nil {
		t.Fatal(err)
	}
	known, err := staging.LoadStamps(path)
	if err != nil {
		t.Fatal(err)
	}
	return trees[0], known
}

// later is a clock an hour ahead: no stamp taken by it is racy.
func later() time.Time { return time.Now().Add(time.Hour) }

func TestStampsSkipUnchangedFindChanged(t *testing.T) {
	staging.SetStampClock(t, later)
	src := t.TempDir()
	writeTree(t, src)
	path := filepath.Join(t.TempDir(), "stamps")
	seen := opened(t)
	first, known := stampsOf(t, src, path)
	if n := len(seen()); n != 5 {
		t.Fatalf("the first reading opened %d files, want all 5", n)
	}

	again, err := staging.ReadTrees(src, []string{"."}, staging.Policy{}, known)
	if err != nil {
		t.Fatal(err)
	}
	if got := seen(); len(got) != 0 || !again[0].Equal(first) {
		t.Errorf("an unchanged tree: opened %v, equal %v; want nothing opened and the same tree", got, again[0].Equal(first))
	}

	// One byte changed in place, the file's size and modification time as they were: only
	// its ctime tells, and it is read again.
	p := filepath.Join(src, "usr/lib/libapp.so")
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("L"), 100); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	sum := sha256.Sum256(data)
	changed, err := staging.ReadTrees(src, []string{"."}, staging.Policy{}, known)
	if err != nil {
		t.Fatal(err)
	}
	if got := seen(); !slices.Equal(got, []string{"usr/lib/libapp.so"}) {
		t.Errorf("after one byte changed: opened %v, want only usr/lib/libapp.so", got)
	}
	for _, e := range changed[0].Entries {
		if e.Name == "usr/lib/libapp.so" && e.Sum != hex.EncodeToString(sum[:]) {
			t.Errorf("the changed file's checksum = %s, want the new contents' %x", e.Sum, sum)
		}
	}
	if changed[0].Equal(first) {
		t.Error("the tree with a changed file equals the first")
	}
}

// TestStampsRacy keeps no stamp of a file that changed within racyWindow of its stamp: it is
// read again next time.
func TestStampsRacy(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src)
	fi, err := os.Stat(filepath.Join(src, "usr/sbin/app"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "stamps")
	seen := opened(t)
	for _, tt := range []struct {
		after time.Duration // the clock's time past the files' last change
		read  int           // the files read again at the next reading
	}{
		{0, 5},
		{time.Second, 5},
		{time.Hour, 0},
	} {
		staging.SetStampClock(t, func() time.Time { return fi.ModTime().Add(tt.after) })
		_, known := stampsOf(t, src, path)
		seen()
		if _, err := staging.ReadTrees(src, []string{"."}, staging.Policy{}, known); err != nil {
			t.Fatal(err)
		}
		if got := seen(); len(got) != tt.read {
			t.Errorf("stamps taken %v after the files changed: the next reading opened %d files, want %d", tt.after, len(got), tt.read)
		}
	}
}

// TestStampsIgnored ignores, and reads every file again, for a file at the stamps' place
// that is not cutover's own: corrupt, of another format, a link, readable by others, owned
// by another user.
func TestStampsIgnored(t *testing.T) {
	staging.SetStampClock(t, later)
	src := t.TempDir()
	writeTree(t, src)
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	stampsOf(t, src, good)
	valid, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		setup func(path string) error
		want  string
	}{
		{"corrupt", func(p string) error { return os.WriteFile(p, valid[:len(valid)/2], 0o600) }, "unexpected EOF"},
		{"trailing data", func(p string) error { return os.WriteFile(p, append(slices.Clone(valid), "{}"...), 0o600) }, "data after"},
		{"another format", func(p string) error {
			return os.WriteFile(p, bytes.Replace(valid, []byte(`"format":1`), []byte(`"format":2`), 1), 0o600)
		}, "format 2"},
		{"a bad checksum", func(p string) error {
			return os.WriteFile(p, bytes.Replace(valid, []byte(`"sha256":"`), []byte(`"sha256":"X`), 1), 0o600)
		}, "a bad record"},
		{"a link", func(p string) error { return os.Symlink(good, p) }, "symbolic link"},
		{"readable by others", func(p string) error {
			if err := os.WriteFile(p, valid, 0o600); err != nil {
				return err
			}
			return os.Chmod(p, 0o644)
		}, "mode 0644"},
		{"another user's", func(p string) error {
			if err := os.WriteFile(p, valid, 0o600); err != nil {
				return err
			}
			return os.Chown(p, 65534, 65534)
		}, "owned by uid 65534"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "another user's" && os.Geteuid() != 0 {
				t.Skip("chown needs root")
			}
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-"))
			if err := tt.setup(path); err != nil {
				t.Fatal(err)
			}
			seen := opened(t)
			known, err := staging.LoadStamps(path)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "ignored") {
				t.Errorf("LoadStamps() = %v, want an error saying the stamps are ignored: %q", err, tt.want)
			}
			if _, err := staging.ReadTrees(src, []string{"."}, staging.Policy{}, known); err != nil {
				t.Fatal(err)
			}
			if got := seen(); len(got) != 5 {
				t.Errorf("with the stamps ignored, %d files were read, want all 5", len(got))
			}
		})
	}
	if known, err := staging.LoadStamps(filepath.Join(dir, "none")); err != nil || known == nil {
		t.Errorf("LoadStamps() of no file = %v, %v; want empty stamps", known, err)
	}
}

// TestStampsWrongChecksumNeverSent: stamps that name a wrong checksum (a file changed within
// a tick of its clock, or stamps edited by hand) make a tree whose manifest is wrong, but its
// stream is refused: nothing is sent as what it is not.
func TestStampsWrongChecksumNeverSent(t *testing.T) {
	staging.SetStampClock(t, later)
	src := t.TempDir()
	writeTree(t, src)
	path := filepath.Join(t.TempDir(), "stamps")
	tree, _ := stampsOf(t, src, path)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var sum string
	for _, e := range tree.Entries {
		if e.Name == "usr/sbin/app" {
			sum = e.Sum
		}
	}
	forged := bytes.Replace(data, []byte(sum), []byte(strings.Repeat("0", 64)), 1)
	if err := os.WriteFile(path, forged, 0o600); err != nil {
		t.Fatal(err)
	}
	known, err := staging.LoadStamps(path)
	if err != nil {
		t.Fatal(err)
	}
	trees, err := staging.ReadTrees(src, []string{"."}, staging.Policy{}, known)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := staging.WriteTar(io.Discard, trees[0]); err == nil || !strings.Contains(err.Error(), "usr/sbin/app") {
		t.Errorf("WriteTar() of a tree with a wrong checksum = %v, want a refusal naming usr/sbin/app", err)
	}
}

// TestStampsWritten: the stamps are written 0600, by a rename over what was there (a reader of
// the old file keeps reading it whole), never through a link at their place, and what a
// killed writer left beside them is removed.
func TestStampsWritten(t *testing.T) {
	staging.SetStampClock(t, later)
	src := t.TempDir()
	writeTree(t, src)
	dir := t.TempDir()
	path := filepath.Join(dir, "stamps")
	if err := os.WriteFile(path, []byte("old stamps"), 0o600); err != nil {
		t.Fatal(err)
	}
	old, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	leftover := filepath.Join(dir, ".stamps.new-0123456789abcdef")
	if err := os.WriteFile(leftover, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	stampsOf(t, src, path)
	if data, _ := io.ReadAll(old); string(data) != "old stamps" {
		t.Errorf("the old file now reads %q: the stamps were written in place, not renamed over it", data)
	}
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode() != 0o600 {
		t.Errorf("the stamps: %v, %v; want a regular file of mode 0600", fi.Mode(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the directory holds %d entries, want the stamps alone", len(entries))
	}
	// The same stamps again, as a restage of an unchanged source keeps them: nothing is
	// written, the file is the one written before.
	before, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	stampsOf(t, src, path)
	if after, err := os.Lstat(path); err != nil || !os.SameFile(before, after) {
		t.Errorf("the same stamps were written again (%v)", err)
	}

	// A link at the stamps' place is refused when read and replaced when written: its target
	// is never written.
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("not the stamps"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "linked")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := staging.LoadStamps(link); err == nil {
		t.Error("LoadStamps() followed a link")
	}
	stampsOf(t, src, link)
	if data, _ := os.ReadFile(target); string(data) != "not the stamps" {
		t.Errorf("the link's target now reads %q: the stamps were written through the link", data)
	}
	if fi, err := os.Lstat(link); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the link's place: %v, %v; want the stamps, a regular file", fi, err)
	}
}

// TestStampsOfArchive keeps an unpacked archive's stamp, SHA-256 and trees: the same archive
// gives the same trees without being read while it keeps its stamp, and after a single
// reading for its checksum when only its stamp changed; a changed byte, other trees or
// another policy give nothing.
func TestStampsOfArchive(t *testing.T) {
	staging.SetStampClock(t, later)
	dir := t.TempDir()
	tgz := archive(t, dir, []member{
		{name: "usr/lib/app/1.2.0/usr/sbin/app", typ: tar.TypeReg, mode: 0o755, body: "binary\n"},
		{name: "usr/share/app/1.2.0/VERSION", typ: tar.TypeReg, body: "1.2.0\n"},
	})
	into := filepath.Join(dir, "into")
	if err := os.Mkdir(into, 0o700); err != nil {
		t.Fatal(err)
	}
	a, err := staging.Unpack(tgz, into, hostileTrees, defaultPolicy)
	if err != nil {
		t.Fatal(err)
	}
	seen := opened(t)
	trees, err := staging.ReadTrees(into, hostileTrees, defaultPolicy, a.Written())
	if err != nil {
		t.Fatal(err)
	}
	if got := seen(); len(got) != 0 {
		t.Errorf("reading what Unpack wrote opened %v, want nothing: Unpack checksummed it as it wrote it", got)
	}
	read, err := staging.ReadTrees(into, hostileTrees, defaultPolicy, nil)
	if err != nil || !read[0].Equal(trees[0]) || !read[1].Equal(trees[1]) {
		t.Fatalf("the trees read from the files differ from those read by Unpack's checksums (err %v)", err)
	}
	a.Keep(trees, hostileTrees, defaultPolicy)
	path := filepath.Join(dir, "stamps")
	if err := staging.SaveStamps(path, trees, a); err != nil {
		t.Fatal(err)
	}
	known, err := staging.LoadStamps(path)
	if err != nil {
		t.Fatal(err)
	}
	same := func(got []*staging.Tree) bool {
		return len(got) == 2 && got[0].Equal(trees[0]) && got[1].Equal(trees[1]) && got[0].Unread() && got[0].Bytes == trees[0].Bytes
	}
	got, again, ok := known.ArchiveTrees(tgz, hostileTrees, defaultPolicy)
	if !ok || again != nil || !same(got) {
		t.Errorf("the unchanged archive: ok %v, read again %v, trees the same %v; want its trees, judged by its stamp", ok, again != nil, ok && same(got))
	}
	if _, _, ok := known.ArchiveTrees(tgz, hostileTrees[:1], defaultPolicy); ok {
		t.Error("other trees of the archive were taken from the stamps")
	}
	if _, _, ok := known.ArchiveTrees(tgz, hostileTrees, staging.Policy{AllowSetuid: []string{"*"}}); ok {
		t.Error("the archive's trees under another policy were taken from the stamps")
	}
	now := time.Now().Add(-time.Minute)
	if err := os.Chtimes(tgz, now, now); err != nil {
		t.Fatal(err)
	}
	if got, again, ok := known.ArchiveTrees(tgz, hostileTrees, defaultPolicy); !ok || again == nil || !same(got) {
		t.Errorf("the archive touched: ok %v, read again %v; want its trees after reading it for its checksum", ok, again != nil)
	}
	data, err := os.ReadFile(tgz)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 1
	if err := os.WriteFile(tgz, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := known.ArchiveTrees(tgz, hostileTrees, defaultPolicy); ok {
		t.Error("a changed archive's trees were taken from the stamps")
	}
}
