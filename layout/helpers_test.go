package layout

import (
	"context"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// testPaths are the ./configure defaults the tests install under.
var testPaths = Paths{LibDir: "/usr/lib", DataDir: "/usr/share", SysconfDir: "/etc", LocalstateDir: "/var"}

// newTestLayout returns the Layout of "app" under root, failing the test on error.
func newTestLayout(t *testing.T, versionDirs, root string) *Layout {
	t.Helper()
	l, err := New("app", testPaths, versionDirs, root)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

// build creates a tree under a new temporary root and returns the root. Each entry is
// "d PATH" (directory), "f PATH" (empty file) or "l PATH TARGET" (symlink); parents are made.
func build(t *testing.T, entries ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, e := range entries {
		f := strings.Fields(e)
		p := filepath.Join(root, f[1])
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case f[0] == "d" && len(f) == 2:
			err = os.MkdirAll(p, 0o755)
		case f[0] == "f" && len(f) == 2:
			err = os.WriteFile(p, nil, 0o644)
		case f[0] == "l" && len(f) == 3:
			err = os.Symlink(f[2], p)
		default:
			t.Fatalf("bad fixture entry %q", e)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// installed is a fixture with versions 1.0 and 1.1 installed and 1.0 live.
var installed = []string{
	"d usr/lib/app/1.0", "d usr/share/app/1.0",
	"d usr/lib/app/1.1", "d usr/share/app/1.1",
	"l usr/lib/app/default /etc/app/lib", "l usr/share/app/default /etc/app/share",
	"l etc/app/lib /usr/lib/app/1.0", "l etc/app/share /usr/share/app/1.0",
}

// with returns base with more entries, without modifying base.
func with(base []string, more ...string) []string {
	return append(slices.Clone(base), more...)
}

// snapshot describes every file under root: "d", "f" or "l TARGET", keyed by relative path.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			snap[rel] = "l " + target
		case d.IsDir():
			snap[rel] = "d"
		default:
			snap[rel] = "f"
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// assertUnchanged fails unless root looks as it did in before.
func assertUnchanged(t *testing.T, root string, before map[string]string) {
	t.Helper()
	if after := snapshot(t, root); !maps.Equal(before, after) {
		t.Errorf("tree changed:\nbefore %v\nafter  %v", before, after)
	}
}

// readlink returns the target of the link at root+p, or "" if it is missing.
func readlink(t *testing.T, root, p string) string {
	t.Helper()
	target, err := os.Readlink(filepath.Join(root, p))
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return target
}

// assertNoTemps fails if a temporary link is left in dir (relative to root).
func assertNoTemps(t *testing.T, root, dir string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root, dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), tempMarker) {
			t.Errorf("temporary link %s left in %s", e.Name(), dir)
		}
	}
}

// switchTo parses version, as cutover does where a version enters it, and switches l's links
// on fsys to it; a version that does not parse is refused before anything is touched.
func switchTo(ctx context.Context, l *Layout, fsys FS, version string) error {
	v, err := ParseVersion(version)
	if err != nil {
		return err
	}
	return l.Switch(ctx, fsys, v)
}
