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
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cutover/cutover/journal"
	archive "github.com/cutover/cutover/upgrade/backup"
	"github.com/cutover/cutover/upgrade/config"
)

// backupFixture is an installed application under a temporary root, at 1.0.0, with a backup
// of that state taken as a run to 1.1.0 would take it.
type backupFixture struct {
	t       *testing.T
	root    string
	cfg     *config.Config
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

	m := archive.Manifest{Kind: BackupSwitch, App: "app", Run: 1, From: "1.0.0", To: "1.1.0", Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	path, m, err := archive.Write(context.Background(), BackupDir(f.cfg), f.scope(), m)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Links) != 2 || len(m.Skipped) != 0 {
		t.Fatalf("fixture backup: links %v, skipped %v; want both links and nothing skipped", m.Links, m.Skipped)
	}
	f.archive = path
	f.id = strings.TrimSuffix(filepath.Base(path), ".tar.gz")
	return f
}

func (f *backupFixture) path(rel string) string { return filepath.Join(f.root, rel) }

func (f *backupFixture) scope() archive.Scope {
	f.t.Helper()
	sc, err := backupScope(f.cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	return sc
}

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
	ids, err := archive.IDs(BackupDir(f.cfg), "app")
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
func editManifest(t *testing.T, entries []tarEntry, change func(m *archive.Manifest)) {
	t.Helper()
	var m archive.Manifest
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
			editManifest(t, e, func(m *archive.Manifest) {
				for j := range m.Entries {
					if strings.HasSuffix(m.Entries[j].Path, "config.json") {
						m.Entries[j].Path = "/" + name
					}
				}
			})
			return e
		}, "is outside"},
		{"through a symlink", func(t *testing.T, f *backupFixture, e []tarEntry) []tarEntry {
			i := find(e, "queue/job-1")
			name := strings.TrimPrefix(f.path("etc/app/lib/evil"), "/")
			e[i].hdr.Name = name
			editManifest(t, e, func(m *archive.Manifest) {
				for j := range m.Entries {
					if strings.HasSuffix(m.Entries[j].Path, "job-1") {
						m.Entries[j].Path = "/" + name
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
		}, `link target "/etc" in the archive`},
		{"link to / in archive and manifest", func(t *testing.T, f *backupFixture, e []tarEntry) []tarEntry {
			e[find(e, "etc/app/lib")].hdr.Linkname = "/"
			editManifest(t, e, func(m *archive.Manifest) {
				for j := range m.Entries {
					if strings.HasSuffix(m.Entries[j].Path, "etc/app/lib") {
						m.Entries[j].Link = "/"
					}
				}
				m.Links[f.path("etc/app/lib")] = "/"
			})
			return e
		}, "a switch link must point at a version tree of this application"},
		{"setuid in archive and manifest, owner changed in the archive", func(t *testing.T, f *backupFixture, e []tarEntry) []tarEntry {
			i := find(e, "var/lib/app/config.json")
			e[i].hdr.Mode, e[i].hdr.Uid = 0o4755, 0
			editManifest(t, e, func(m *archive.Manifest) {
				for j := range m.Entries {
					if strings.HasSuffix(m.Entries[j].Path, "config.json") {
						m.Entries[j].Mode, m.Entries[j].UID = 0o4755, 4242
					}
				}
			})
			return e
		}, "owner 0:"},
		{"another application", func(t *testing.T, f *backupFixture, e []tarEntry) []tarEntry {
			editManifest(t, e, func(m *archive.Manifest) { m.App = "other" })
			return e
		}, `application "other"`},
		{"versions not those of the name", func(t *testing.T, f *backupFixture, e []tarEntry) []tarEntry {
			editManifest(t, e, func(m *archive.Manifest) { m.From = "0.9.0" })
			return e
		}, "does not match the archive's name"},
		{"no manifest", func(t *testing.T, f *backupFixture, e []tarEntry) []tarEntry {
			return e[1:]
		}, "not a backup archive"},
		{"manifest not json", func(t *testing.T, f *backupFixture, e []tarEntry) []tarEntry {
			e[0].data = []byte("{")
			return e
		}, archive.ManifestName},
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
	older, _, err := archive.Write(ctx, dir, f.scope(), archive.Manifest{App: "app", Run: 0, From: "0.9.0", To: "1.0.0", Created: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)})
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

// TestKeepCurrentTwice keeps the state twice within a second: the second archive waits for a
// name of its own rather than replacing the first.
func TestKeepCurrentTwice(t *testing.T) {
	t.Parallel()
	f := newBackupFixture(t, "false")
	first, _, err := keepState(context.Background(), f.cfg, f.scope(), "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	second, _, err := keepState(context.Background(), f.cfg, f.scope(), "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if first == second {
		t.Fatalf("keepState twice wrote %s both times", first)
	}
	for _, p := range []string{first, second} {
		m, err := archive.ReadManifest(p)
		if err != nil || m.From != "1.0.0" || m.Kind != BackupBeforeRestore || len(m.Links) != 2 {
			t.Errorf("ReadManifest(%s) = %+v, %v; want the kept state of 1.0.0 with its links", p, m, err)
		}
	}
	if ids := f.backups(); len(ids) != 3 {
		t.Errorf("backups = %v, want the fixture's and two kept ones", ids)
	}
}

// rebackup takes the fixture's backup again, of the tree as it is now, a second later.
func (f *backupFixture) rebackup() {
	f.t.Helper()
	m, err := archive.ReadManifest(f.archive)
	if err != nil {
		f.t.Fatal(err)
	}
	m = archive.Manifest{Kind: BackupSwitch, App: "app", Run: 1, From: "1.0.0", To: "1.1.0", Created: m.Created.Add(time.Second)}
	path, _, err := archive.Write(context.Background(), BackupDir(f.cfg), f.scope(), m)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := os.Remove(f.archive); err != nil {
		f.t.Fatal(err)
	}
	f.archive, f.id = path, strings.TrimSuffix(filepath.Base(path), ".tar.gz")
}

// TestRestoreAttackBetweenCheckAndWrite is the audit's attack on `cutover backup restore`,
// made deterministic by the runner's hold point at the restore stage: the check passed, the
// current state is kept, and before the first write an unprivileged user who owns a
// directory of the state swaps it for a link to a root-only directory. Before, root chmodded
// the link's target to the archived 0777 and wrote the user's files into it. Now the restore
// refuses, writes nothing and rolls back.
func TestRestoreAttackBetweenCheckAndWrite(t *testing.T) {
	a := newAttacker(t)
	f := newBackupFixture(t, "false")
	for d := f.root; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f.mkdir("secret")
	if err := os.Chmod(f.path("secret"), 0o700); err != nil {
		t.Fatal(err)
	}
	f.write("secret/shadow", "root only\n", 0o600)
	f.mkdir("var/lib/app/home")
	f.write("var/lib/app/home/mine", "the user's\n", 0o644)
	for _, p := range []string{"var/lib/app/home", "var/lib/app/home/mine"} {
		if err := os.Lchown(f.path(p), int(a.uid), int(a.gid)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(f.path("var/lib/app/home"), 0o777); err != nil {
		t.Fatal(err)
	}
	f.rebackup()
	if err := os.Chmod(f.path("var/lib/app"), 0o777); err != nil { // the user may rename in the state
		t.Fatal(err)
	}

	hold := t.TempDir()
	t.Setenv(HoldDirEnv, hold)
	if err := os.MkdirAll(filepath.Join(hold, "hold"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hold, "hold", "restore"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	type result struct {
		rep *RestoreReport
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := RestoreBackup(context.Background(), f.cfg, RestoreOptions{ID: f.id})
		done <- result{rep, err}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(hold, "reached", "restore")); err == nil {
			break
		}
		select {
		case res := <-done:
			t.Fatalf("the restore ended (%v) without reaching its restore stage", res.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the restore did not reach its restore stage")
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.run(t, f.path("var/lib/app"), "mv home home.old && ln -s "+f.path("secret")+" home")
	before := f.tree()
	if err := os.Remove(filepath.Join(hold, "hold", "restore")); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err == nil || IsPastPONR(res.err) || !strings.Contains(res.err.Error(), "nothing was restored") || !strings.Contains(res.err.Error(), "/var/lib/app/home") {
		t.Fatalf("RestoreBackup after the swap = %v; want refused, nothing restored, naming the directory", res.err)
	}
	t.Logf("refused: %v", res.err)
	if after := f.tree(); after != before {
		t.Errorf("the refused restore changed files:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if info, err := os.Stat(f.path("secret")); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("the root-only directory: %v, %v; want 0700 still", info.Mode(), err)
	}
	if entries, _ := os.ReadDir(f.path("secret")); len(entries) != 1 {
		t.Errorf("the root-only directory holds %d files, want only its own", len(entries))
	}
	runs, err := journal.NewStore(JournalPath(f.cfg)).Runs(context.Background())
	if err != nil || len(runs) != 1 || runs[0].Kind != "restore" || runs[0].Outcome != journal.RolledBack {
		t.Errorf("journal = %+v, %v; want the restore, rolled back", runs, err)
	}
}

// TestBackupStageSkipsSockets runs the backup stage with a unix socket and a fifo in the
// state: before, one socket failed every upgrade at the backup stage without naming it; now
// both are skipped and named, and the backup is taken.
func TestBackupStageSkipsSockets(t *testing.T) {
	t.Parallel()
	f := newBackupFixture(t, "false")
	l, err := net.Listen("unix", f.path("var/lib/app/s"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := unix.Mkfifo(f.path("var/lib/app/queue/p"), 0o600); err != nil {
		t.Fatal(err)
	}
	// An excluded directory is left out on purpose: listed, but no warning.
	if err := os.MkdirAll(f.path("var/lib/app/export"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.path("var/lib/app/export/disk.img"), []byte("image"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.cfg.Paths.BackupExclude = []string{f.path("var/lib/app/export")}
	var warnings []string
	lay, err := Layout(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &Run{Config: f.cfg, Layout: lay, Target: Target{From: "1.0.0", To: "1.1.0", Direction: Up},
		report: ReporterFunc(func(e Event) {
			if e.Type == "warn" {
				warnings = append(warnings, e.Message)
			}
		})}
	if err := (backup{}).Run(context.Background(), r); err != nil {
		t.Fatalf("backup stage with a socket and a fifo in the state = %v", err)
	}
	want := "backup: not archived (listed in the manifest): " + f.path("var/lib/app/queue/p") + " (fifo), " + f.path("var/lib/app/s") + " (socket)"
	if len(warnings) != 1 || warnings[0] != want {
		t.Errorf("warnings = %q, want %q", warnings, want)
	}
	m, err := archive.ReadManifest(r.Backup)
	if err != nil || len(m.Skipped) != 3 || m.Count(archive.TypeFile) != 3 {
		t.Errorf("the backup's manifest: %+v, %v; want 3 files, both special files and the excluded directory listed", m, err)
	}
}

// attackerName is the throwaway system user the attack tests act as: an unprivileged local
// user who owns a directory in the application's state, like the audit's uid nobody.
// upgrade/backup's tests have their own, so that the two packages' tests never race on it.
const attackerName = "cutover-atk-upgrade"

// attacker is that user.
type attacker struct{ uid, gid uint32 }

// newAttacker returns the unprivileged user, creating it (as test/setup.sh creates
// cutover-test) when running as root, and removing it when the test ends. Without root the
// test is skipped, except under CI=true, where it fails: CI must run the attacks.
func newAttacker(t *testing.T) attacker {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("this attack test needs root under CI=true: it creates an unprivileged user and acts as it")
		}
		t.Skip("needs root: it creates an unprivileged user and acts as it (under CI=true this fails instead)")
	}
	u, err := user.Lookup(attackerName)
	if err != nil {
		var made error
		for i := 0; i < 10; i++ {
			out, err := exec.Command("useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
				"--shell", "/usr/sbin/nologin", attackerName).CombinedOutput()
			if err == nil {
				t.Cleanup(func() { _ = exec.Command("userdel", attackerName).Run() })
				break
			}
			made = fmt.Errorf("useradd %s: %v: %s", attackerName, err, out)
			time.Sleep(200 * time.Millisecond) // another package's test may hold /etc/passwd
		}
		if u, err = user.Lookup(attackerName); err != nil {
			t.Fatalf("create the unprivileged user %s: %v; %v", attackerName, err, made)
		}
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return attacker{uint32(uid), uint32(gid)}
}

// run runs a shell script as the attacker, in dir.
func (a attacker) run(t *testing.T, dir, script string) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: a.uid, Gid: a.gid, Groups: []uint32{}}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("as %s in %s: %s: %v\n%s", attackerName, dir, script, err, out)
	}
}
