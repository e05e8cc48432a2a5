package metrics

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// entries lists the names in dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	list, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteFileReplacesAtomically(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cutover.prom")
	for _, text := range []string{"first 1\n", "second 2\n"} {
		if err := WriteFile(path, []byte(text), TextfileMode); err != nil {
			t.Fatalf("WriteFile: %v", err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != text {
			t.Fatalf("after WriteFile(%q) the file holds %q (%v)", text, got, err)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != TextfileMode {
		t.Errorf("mode = %04o, want %04o", fi.Mode().Perm(), TextfileMode)
	}
	if got := entries(t, dir); len(got) != 1 || got[0] != "cutover.prom" {
		t.Errorf("directory holds %v, want only cutover.prom", got)
	}
}

// TestWriteFileRefuses checks every path the writer must not write through: a link at the
// path (to a file or nowhere), a link as the directory, a directory others may write, and
// something that is not a regular file. Each is refused, the link's target is untouched, and
// no temporary file is left behind.
func TestWriteFileRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string) (path string)
		want  string
	}{
		{"link to a file", func(t *testing.T, dir string) string {
			victim := filepath.Join(t.TempDir(), "victim")
			if err := os.WriteFile(victim, []byte("keep\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			symlink(t, victim, filepath.Join(dir, "cutover.prom"))
			return filepath.Join(dir, "cutover.prom")
		}, "symbolic link"},
		{"dangling link", func(t *testing.T, dir string) string {
			symlink(t, filepath.Join(t.TempDir(), "nowhere"), filepath.Join(dir, "cutover.prom"))
			return filepath.Join(dir, "cutover.prom")
		}, "symbolic link"},
		{"linked directory", func(t *testing.T, dir string) string {
			real := filepath.Join(dir, "real")
			if err := os.Mkdir(real, 0o755); err != nil {
				t.Fatal(err)
			}
			symlink(t, real, filepath.Join(dir, "textfile"))
			return filepath.Join(dir, "textfile", "cutover.prom")
		}, "a link is not followed"},
		{"directory others may write", func(t *testing.T, dir string) string {
			sub := filepath.Join(dir, "open")
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(sub, 0o777); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(sub, "cutover.prom")
		}, "writable by group or others"},
		{"directory at the path", func(t *testing.T, dir string) string {
			if err := os.Mkdir(filepath.Join(dir, "cutover.prom"), 0o755); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(dir, "cutover.prom")
		}, "not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := tc.setup(t, dir)
			before := tree(t, dir)
			err := WriteFile(path, []byte("cutover_run_pending 1\n"), TextfileMode)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("WriteFile(%s) = %v, want an error saying %q", path, err, tc.want)
			}
			if after := tree(t, dir); after != before {
				t.Errorf("WriteFile changed the directory although it refused:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// TestWriteFileSticky checks that a sticky directory of root's that others may write, like
// /tmp, is accepted: nobody may rename another's entry in it.
func TestWriteFileSticky(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the sticky directory must be root's")
	}
	dir := filepath.Join(t.TempDir(), "sticky")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(dir, "cutover.prom"), []byte("x 1\n"), TextfileMode); err != nil {
		t.Errorf("WriteFile in a sticky root directory: %v", err)
	}
}

// TestWriteFileRemovesDeadTemps checks that a temporary file a killed writer left is removed
// by the next write, and a live writer's is not.
func TestWriteFileRemovesDeadTemps(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := fmt.Sprintf(".cutover.prom.%d.abcdef.tmp", cmd.Process.Pid)
	live := fmt.Sprintf(".cutover.prom.%d.abcdef.tmp", os.Getppid())
	for _, name := range []string{dead, live} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteFile(filepath.Join(dir, "cutover.prom"), []byte("x 1\n"), TextfileMode); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(entries(t, dir), " ")
	if strings.Contains(got, dead) || !strings.Contains(got, live) {
		t.Errorf("directory holds %s: want the dead writer's %s gone and the live one's %s kept", got, dead, live)
	}
}

func TestLookMerge(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	old := Look{At: at.Add(-time.Hour), Nodes: []Node{{Name: "a", Version: "1.0", Reachable: true}, {Name: "b", Version: "1.0", Reachable: true}}}
	got := old.Merge([]Node{{Name: "b", Reachable: false}, {Name: "c", Version: "1.1", Reachable: true}, {Name: "a", Version: "1.1", Reachable: true}}, at)
	want := Look{At: at, Nodes: []Node{{Name: "a", Version: "1.1", Reachable: true}, {Name: "b", Version: "1.0", Reachable: false}, {Name: "c", Version: "1.1", Reachable: true}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Merge = %v, want %v", got, want)
	}
	if same := old.Merge(nil, at); !same.At.Equal(old.At) {
		t.Errorf("Merge(nil) moved At to %v", same.At)
	}
	path := filepath.Join(t.TempDir(), "look.json")
	if err := SaveLook(path, got); err != nil {
		t.Fatal(err)
	}
	back, err := LoadLook(path)
	if err != nil || fmt.Sprint(back) != fmt.Sprint(want) {
		t.Errorf("LoadLook(SaveLook(x)) = %v, %v; want %v", back, err, want)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// tree describes every entry below dir with its type and content, for a before-and-after
// comparison.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %s", strings.TrimPrefix(p, dir), fi.Mode())
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			fmt.Fprintf(&b, " -> %s", target)
			if data, err := os.ReadFile(p); err == nil {
				fmt.Fprintf(&b, " %q", data)
			}
		case fi.Mode().IsRegular():
			data, _ := os.ReadFile(p)
			fmt.Fprintf(&b, " %q", data)
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
