package upgrade

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// backupFixture is an installed application under a temporary root, at 1.0.0, with a backup
// of that state taken as a run to 1.1.0 would take it.
type backupFixture struct {
	t       *testing.T
	root    string
	cfg     *Config
	id      string // the archive's id
	archive string // its path
}

func newBackupFixture(t *testing.T, verify string) *backupFixture {
	t.Helper()
	root := t.TempDir()
	f := &backupFixture{t: t, root: root, cfg: testConfig(t, root, verify)}
	for _, v := range []string{"1.0.0", "1.1.0"} {
		f.mkdir("usr/lib/app/" + v)
		f.mkdir("usr/share/app/" + v)
	}
	f.mkdir("etc/app")
	f.symlink(root+"/usr/lib/app/1.0.0", "etc/app/lib")
	f.symlink(root+"/usr/share/app/1.0.0", "etc/app/share")
	f.write("etc/app/app.conf", "setting = 1\n", 0o640)
	f.mkdir("var/lib/app/queue")
	f.write("var/lib/app/config.json", `{"name": "demo", "version": "1.0.0"}`+"\n", 0o600)
	f.write("var/lib/app/queue/job-1", "job one\n", 0o644)
	f.symlink("queue/job-1", "var/lib/app/current")

	r := &Run{Config: f.cfg}
	m := Manifest{App: "app", Run: 1, From: "1.0.0", To: "1.1.0", Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Links: map[string]string{root + "/etc/app/lib": root + "/usr/lib/app/1.0.0", root + "/etc/app/share": root + "/usr/share/app/1.0.0"}}
	path, err := WriteBackup(context.Background(), BackupDir(f.cfg), r.backupDirs(), m)
	if err != nil {
		t.Fatal(err)
	}
	f.archive = path
	f.id = strings.TrimSuffix(filepath.Base(path), ".tar.gz")
	return f
}

func (f *backupFixture) path(rel string) string { return filepath.Join(f.root, rel) }

func (f *backupFixture) mkdir(rel string) {
	f.t.Helper()
	if err := os.MkdirAll(f.path(rel), 0o755); err != nil {
		f.t.Fatal(err)
	}
}

func (f *backupFixture) write(rel, data string, perm fs.FileMode) {
	f.t.Helper()
	if err := os.WriteFile(f.path(rel), []byte(data), perm); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Chmod(f.path(rel), perm); err != nil {
		f.t.Fatal(err)
	}
}

func (f *backupFixture) symlink(target, rel string) {
	f.t.Helper()
	_ = os.Remove(f.path(rel))
	if err := os.Symlink(target, f.path(rel)); err != nil {
		f.t.Fatal(err)
	}
}

// upgrade changes the state as a run to 1.1.0 would, and a little more.
func (f *backupFixture) upgrade() {
	f.t.Helper()
	f.symlink(f.root+"/usr/lib/app/1.1.0", "etc/app/lib")
	f.symlink(f.root+"/usr/share/app/1.1.0", "etc/app/share")
	f.write("var/lib/app/config.json", `{"title": "demo", "version": "1.1.0"}`+"\n", 0o644)
	f.write("etc/app/app.conf", "setting = 2\n", 0o600)
	if err := os.RemoveAll(f.path("var/lib/app/queue")); err != nil {
		f.t.Fatal(err)
	}
	f.write("var/lib/app/new-in-1.1", "new\n", 0o644)
}

// tree describes every file under the root but the state directory: type, mode, content or
// link target. A refused restore must leave it as it was.
func (f *backupFixture) tree() string {
	f.t.Helper()
	var lines []string
	err := filepath.Walk(f.root, func(p string, info fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if p == f.path("state") {
			return filepath.SkipDir
		}
		line := fmt.Sprintf("%s %v", strings.TrimPrefix(p, f.root), info.Mode())
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target
		case info.Mode().IsRegular():
			data, _ := os.ReadFile(p)
			line += fmt.Sprintf(" %q", data)
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// withoutPaths drops the lines of paths (relative to the root) from a tree.
func withoutPaths(tree string, paths ...string) string {
	var out []string
	for _, line := range strings.Split(tree, "\n") {
		keep := true
		for _, p := range paths {
			if strings.HasPrefix(line, "/"+p+" ") {
				keep = false
			}
		}
		if keep {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// backups lists the archive ids in the backup directory.
func (f *backupFixture) backups() []string {
	f.t.Helper()
	ids, err := backupIDs(BackupDir(f.cfg), "app")
	if err != nil {
		f.t.Fatal(err)
	}
	return ids
}

// rewrite rewrites the fixture's archive, letting change edit its entries (the manifest
// first) before they are written again.
func (f *backupFixture) rewrite(change func(entries []tarEntry) []tarEntry) {
	f.t.Helper()
	entries := readTar(f.t, f.archive)
	entries = change(entries)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		e.hdr.Size = int64(len(e.data))
		if e.hdr.Typeflag != tar.TypeReg {
			e.hdr.Size = 0
		}
		if err := tw.WriteHeader(e.hdr); err != nil {
			f.t.Fatal(err)
		}
		if _, err := tw.Write(e.data); err != nil {
			f.t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		f.t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(f.archive, buf.Bytes(), 0o600); err != nil {
		f.t.Fatal(err)
	}
}

type tarEntry struct {
	hdr  *tar.Header
	data []byte
}

func readTar(t *testing.T, path string) []tarEntry {
	t.Helper()
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	gz, err := gzip.NewReader(file)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var entries []tarEntry
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return entries
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, tarEntry{hdr, data})
	}
}

// editManifest changes the manifest entry (the first) of entries.
func editManifest(t *testing.T, entries []tarEntry, change func(m *Manifest)) {
	t.Helper()
	var m Manifest
	if err := json.Unmarshal(entries[0].data, &m); err != nil {
		t.Fatal(err)
	}
	change(&m)
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	entries[0].data = data
}

func TestRestoreBackup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newBackupFixture(t, "false")
	want := f.tree()
	f.upgrade()
	upgradedTree := f.tree()

	rep, err := RestoreBackup(ctx, f.cfg, RestoreOptions{ID: f.id})
	if err != nil {
		t.Fatalf("RestoreBackup(%s) = %v", f.id, err)
	}
	// Everything of the archive is back; what it does not hold is left alone.
	got := f.tree()
	if withoutPaths(got, "var/lib/app/new-in-1.1") != want || got == want {
		t.Errorf("after the restore:\n%s\nwant as backed up, plus the newer file:\n%s", got, want)
	}
	if rep.Version != "1.0.0" || rep.Previous != "1.1.0" || len(rep.Files) != 3 || len(rep.Dirs) != 3 || len(rep.Symlinks) != 3 || rep.Run == 0 {
		t.Errorf("report = %+v, want 1.0.0 (was 1.1.0), 3 files, 3 dirs, 3 symlinks, a journal run", rep)
	}
	if rep.Links[f.path("etc/app/lib")] != f.root+"/usr/lib/app/1.0.0" {
		t.Errorf("report links = %v", rep.Links)
	}

	// The state before the restore was kept, and restoring it undoes the restore.
	keptID := strings.TrimSuffix(filepath.Base(rep.Kept), ".tar.gz")
	if !strings.HasPrefix(keptID, "app-1.1.0-before-restore-") {
		t.Fatalf("kept archive %s, want app-1.1.0-before-restore-<time>", rep.Kept)
	}
	if info, err := os.Stat(rep.Kept); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("kept archive: %v, %v; want mode 0600", info, err)
	}
	list, err := ListBackups(ctx, f.cfg, BackupListOptions{Verify: true})
	if err != nil || len(list.Backups) != 2 {
		t.Fatalf("ListBackups = %+v, %v; want the backup and the kept state", list, err)
	}
	for _, b := range list.Backups {
		if !b.ManifestOK || !b.Verified {
			t.Errorf("archive %s: %+v, want it verified", b.ID, b)
		}
	}
	if k := list.Backups[1]; k.ID != keptID || k.Kind != BackupBeforeRestore || k.From != "1.1.0" {
		t.Errorf("kept archive listed as %+v", k)
	}
	if _, err := RestoreBackup(ctx, f.cfg, RestoreOptions{ID: keptID}); err != nil {
		t.Fatalf("RestoreBackup(%s) = %v", keptID, err)
	}
	// The queue directory is back from the first restore: the kept state did not hold it,
	// and a restore removes nothing.
	if back := withoutPaths(f.tree(), "var/lib/app/queue", "var/lib/app/queue/job-1"); back != upgradedTree {
		t.Errorf("after restoring the kept state:\n%s\nwant as before the first restore:\n%s", back, upgradedTree)
	}
	temps, _ := filepath.Glob(f.path("*/*/*/.*cutover-restore*"))
	etcTemps, _ := filepath.Glob(f.path("etc/app/.*cutover-restore*"))
	if len(temps)+len(etcTemps) > 0 {
		t.Errorf("temporary files left: %v %v", temps, etcTemps)
	}
}

// TestRestoreRefusesBadArchives changes an archive in every way a restore must notice, and
// checks that it is refused before anything is written.
func TestRestoreRefusesBadArchives(t *testing.T) {
	t.Parallel()
	find := func(entries []tarEntry, suffix string) int {
		for i, e := range entries {
			if strings.HasSuffix(strings.TrimSuffix(e.hdr.Name, "/"), suffix) {
				return i
			}
		}
		panic("no entry " + suffix)
	}
	tests := []struct {
		name   string
		change func(t *testing.T, f *backupFixture, entries []tarEntry) []tarEntry
		want   string
	}{
		{"content changed", func(t *testing.T, f *backupFixture, e []tarEntry) []tarEntry {
			i := find(e, "var/lib/app/config.json")
			e[i].data = bytes.Replace(e[i].data, []byte("demo"), []byte("evil"), 1)
			return e
		}, "the archive was changed"},
		{"size changed", func(t *testing.T, f *backupFixture, e []tarEntry) []tarEntry {
			i := find(e, "queue/job-1")
			e[i].data = append(e[i].data, "more"...)
			return e
		}, "in the manifest"},
		{"mode changed", func(t *testing.T, f *backupFixture, e []tarEntry) []tarEntry {
			e[find(e, "var/lib/app/config.json")].hdr.Mode = 0o4777
			return e
		}, "mode"},
		{"file dropped", func(t *testing.T, f *backupFixture, e []tarEntry) []tarEntry {
			i := find(e, "etc/app/app.conf")
			return append(e[:i], e[i+1:]...)
		}, "in the manifest but not in the archive"},
		{"file added", func(t *testing.T, f *backupFixture, e []tarEntry) []tarEntry {
			hdr := *e[find(e, "var/lib/app/config.json")].hdr
			hdr.Name = strings.TrimPrefix(f.path("var/lib/app/extra"), "/")
			return append(e, tarEntry{&hdr, []byte("extra")})
		}, "not in its manifest"},
		{"dot-dot", func(t *testing.T, f *backupFixture, e []tarEntry) []tarEntry {
			e[find(e, "queue/job-1")].hdr.Name = strings.TrimPrefix(f.root, "/") + "/var/lib/app/queue/../../../../etc/passwd"
			return e
		}, "not a clean relative path"},
		{"absolute", func(t *testing.T, f *backupFixture, e []tarEntry) []tarEntry {
			hdr := *e[find(e, "etc/app")].hdr
			hdr.Name = "/etc/cron.d/"
			return append(e, tarEntry{&hdr, nil})
		}, "not a clean relative path"},
		{"outside the application's directories", func(t *testing.T, f *backupFixture, e []tarEntry) []tarEntry {
			i := find(e, "var/lib/app/config.json")
			name := strings.TrimPrefix(f.path("usr/lib/app/1.0.0/evil"), "/")
			e[i].hdr.Name = name
			editManifest(t, e, func(m *Manifest) {
				for j := range m.Files {
					if strings.HasSuffix(m.Files[j].Path, "config.json") {
						m.Files[j].Path = "/" + name
					}
				}
			})
			return e
		}, "is outside"},
		{"through a symlink", func(t *testing.T, f *backupFixture, e []tarEntry) []tarEntry {
			i := find(e, "queue/job-1")
			name := strings.TrimPrefix(f.path("etc/app/lib/evil"), "/")
			e[i].hdr.Name = name
			editManifest(t, e, func(m *Manifest) {
				for j := range m.Files {
					if strings.HasSuffix(m.Files[j].Path, "job-1") {
						m.Files[j].Path = "/" + name
					}
				}
			})
			return e
		}, "its directory is not a directory of the archive"},
		{"twice", func(t *testing.T, f *backupFixture, e []tarEntry) []tarEntry {
			return append(e, e[find(e, "etc/app/lib")])
		}, "twice"},
		{"link target changed", func(t *testing.T, f *backupFixture, e []tarEntry) []tarEntry {
			e[find(e, "etc/app/lib")].hdr.Linkname = "/etc"
			return e
		}, "is not in the archive as such"},
		{"another application", func(t *testing.T, f *backupFixture, e []tarEntry) []tarEntry {
			editManifest(t, e, func(m *Manifest) { m.App = "other" })
			return e
		}, `application "other"`},
		{"versions not those of the name", func(t *testing.T, f *backupFixture, e []tarEntry) []tarEntry {
			editManifest(t, e, func(m *Manifest) { m.From = "0.9.0" })
			return e
		}, "does not match the archive's name"},
		{"no manifest", func(t *testing.T, f *backupFixture, e []tarEntry) []tarEntry {
			return e[1:]
		}, "not a backup archive"},
		{"manifest not json", func(t *testing.T, f *backupFixture, e []tarEntry) []tarEntry {
			e[0].data = []byte("{")
			return e
		}, ManifestName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newBackupFixture(t, "false")
			f.upgrade()
			f.rewrite(func(e []tarEntry) []tarEntry { return tt.change(t, f, e) })
			before := f.tree()
			_, err := RestoreBackup(context.Background(), f.cfg, RestoreOptions{ID: f.id})
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "nothing was restored") {
				t.Errorf("RestoreBackup = %v, want an error with %q and nothing was restored", err, tt.want)
			}
			if after := f.tree(); after != before {
				t.Errorf("a refused restore changed files:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if ids := f.backups(); len(ids) != 1 {
				t.Errorf("a refused restore wrote an archive: %v", ids)
			}
			list, err := ListBackups(context.Background(), f.cfg, BackupListOptions{Verify: true})
			if err != nil || len(list.Backups) != 1 || list.Backups[0].Verified || list.Backups[0].Problem == "" {
				t.Errorf("ListBackups --verify = %+v, %v; want the archive listed with a problem", list, err)
			}
		})
	}

	t.Run("truncated", func(t *testing.T) {
		t.Parallel()
		f := newBackupFixture(t, "false")
		data, err := os.ReadFile(f.archive)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.archive, data[:len(data)/2], 0o600); err != nil {
			t.Fatal(err)
		}
		before := f.tree()
		if _, err := RestoreBackup(context.Background(), f.cfg, RestoreOptions{ID: f.id}); err == nil || !strings.Contains(err.Error(), "nothing was restored") {
			t.Errorf("RestoreBackup of a truncated archive = %v, want refused", err)
		}
		if after := f.tree(); after != before {
			t.Errorf("a refused restore changed files")
		}
	})
}

func TestRestoreRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		verify   string
		id       string
		badInput bool
		want     string
	}{
		{"daemons running", "true", "", false, "stop the daemons first"},
		{"no verify command", "", "", true, "verify"},
		{"path", "false", "../backups/app-1.0.0-to-1.1.0-20260102T030405Z", true, "not a backup id"},
		{"absolute", "false", "/etc/passwd", true, "not a backup id"},
		{"dot-dot", "false", "app-1.0.0-to-..-20260102T030405Z", true, "not a backup id"},
		{"newline", "false", "app-1.0.0-to-1.1.0-20260102T030405Z\n", true, "not a backup id"},
		{"unknown", "false", "app-1.0.0-to-1.1.0-20990101T000000Z", true, "no backup"},
		{"too long", "false", "app-1.0.0-to-1." + strings.Repeat("1", 300) + "-20260102T030405Z", true, "not a backup id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newBackupFixture(t, tt.verify)
			f.upgrade()
			id := tt.id
			if id == "" {
				id = f.id
			}
			before := f.tree()
			_, err := RestoreBackup(context.Background(), f.cfg, RestoreOptions{ID: id})
			if err == nil || IsBadInput(err) != tt.badInput || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("RestoreBackup(%q) = %v; want an error with %q, bad input %v", id, err, tt.want, tt.badInput)
			}
			if after := f.tree(); after != before {
				t.Errorf("a refused restore changed files:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if ids := f.backups(); len(ids) != 1 {
				t.Errorf("a refused restore wrote an archive: %v", ids)
			}
		})
	}
}

func TestListBackups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newBackupFixture(t, "false")
	dir := BackupDir(f.cfg)
	// Things that are not the application's archives are not listed.
	for _, name := range []string{"other-1.0.0-to-1.1.0-20260102T030405Z.tar.gz", "notes.txt", ".app-1.0.0-to-1.1.0-20260102T030405Z.tar.gz.123.tmp", "app-latest.tar.gz"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(f.archive, filepath.Join(dir, "app-1.0.0-to-1.1.0-20300101T000000Z.tar.gz")); err != nil {
		t.Fatal(err)
	}
	// An older archive of another run, and one whose name does not match its manifest.
	r := &Run{Config: f.cfg}
	older, err := WriteBackup(ctx, dir, r.backupDirs(), Manifest{App: "app", Run: 0, From: "0.9.0", To: "1.0.0", Created: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	renamed := filepath.Join(dir, "app-1.0.0-to-1.2.0-20270101T000000Z.tar.gz")
	data, err := os.ReadFile(f.archive)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(renamed, data, 0o600); err != nil {
		t.Fatal(err)
	}

	list, err := ListBackups(ctx, f.cfg, BackupListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, b := range list.Backups {
		ids = append(ids, b.ID)
	}
	wantIDs := []string{strings.TrimSuffix(filepath.Base(older), ".tar.gz"), f.id, "app-1.0.0-to-1.2.0-20270101T000000Z"}
	if strings.Join(ids, " ") != strings.Join(wantIDs, " ") {
		t.Fatalf("ListBackups ids = %v, want %v (oldest first)", ids, wantIDs)
	}
	b := list.Backups[1]
	if b.From != "1.0.0" || b.To != "1.1.0" || b.Run != 1 || b.Files != 3 || b.Size != int64(len(data)) || !b.ManifestOK || b.Verified || b.Problem != "" {
		t.Errorf("archive = %+v", b)
	}
	if bad := list.Backups[2]; bad.ManifestOK || !strings.Contains(bad.Problem, "does not match the archive's name") {
		t.Errorf("renamed archive = %+v, want a problem with its name", bad)
	}

	// A missing directory has no archives.
	empty := testConfig(t, t.TempDir(), "false")
	if list, err := ListBackups(ctx, empty, BackupListOptions{Verify: true}); err != nil || len(list.Backups) != 0 || list.Backups == nil {
		t.Errorf("ListBackups without a directory = %+v, %v; want an empty list", list, err)
	}
}

func TestCheckBackupID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id string
		ok bool
	}{
		{"app-1.0.0-to-1.1.0-20260102T030405Z", true},
		{"app-1.1-to-1.2-20260102T030405Z", true},
		{"app-1.1.0-rc.1-to-1.1.0-20260102T030405Z", true},
		{"app-1.1.0-before-restore-20260102T030405Z", true},
		{"ganeti-2.16.2-to-3.0.2-20260102T030405Z", true},
		{"", false},
		{"app", false},
		{"app-1.0.0-to-1.1.0", false},
		{"app-1.0.0-to-1.1.0-20260102T030405Z.tar.gz", false},
		{"app-1.0.0-to-1.1.0-20260102T030405", false},
		{"../app-1.0.0-to-1.1.0-20260102T030405Z", false},
		{"app-1.0.0-to-../1.1.0-20260102T030405Z", false},
		{"app-1.0.0-to-1..1-20260102T030405Z", false},
		{"app-1.0.0-to-1.1.0-20260102T030405Z;rm", false},
		{"app-1.0.0 -to-1.1.0-20260102T030405Z", false},
		{"App-1.0.0-to-1.1.0-20260102T030405Z", false},
	}
	for _, tt := range tests {
		if err := checkBackupID(tt.id); (err == nil) != tt.ok {
			t.Errorf("checkBackupID(%q) = %v, want ok %v", tt.id, err, tt.ok)
		}
	}
}

// TestKeepCurrentTwice keeps the state twice within a second: the second archive waits for a
// name of its own rather than replacing the first.
func TestKeepCurrentTwice(t *testing.T) {
	t.Parallel()
	f := newBackupFixture(t, "false")
	lay, err := Layout(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &Run{Config: f.cfg, Layout: lay}
	first, err := keepCurrent(context.Background(), r, "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	second, err := keepCurrent(context.Background(), r, "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if first == second {
		t.Fatalf("keepCurrent twice wrote %s both times", first)
	}
	for _, p := range []string{first, second} {
		m, err := ReadManifest(p)
		if err != nil || m.From != "1.0.0" || len(m.Links) != 2 {
			t.Errorf("ReadManifest(%s) = %+v, %v; want the kept state of 1.0.0 with its links", p, m, err)
		}
	}
	if ids := f.backups(); len(ids) != 3 {
		t.Errorf("backups = %v, want the fixture's and two kept ones", ids)
	}
}
