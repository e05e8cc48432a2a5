package backup

import (
	"bytes"
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRoundTrip backs up the fixture, changes it, restores it, and finds it as it was, the
// files that were not in the archive left alone.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	want := f.tree()
	p, m := f.backup()
	if info, err := os.Stat(p); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("archive %s: %v, %v; want mode 0600", p, info, err)
	}
	if info, err := os.Stat(f.dir()); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("backup directory: %v, %v; want mode 0700", info, err)
	}
	if got := m.Count(TypeFile); got != 3 || m.Count(TypeDir) != 3 || m.Count(TypeSymlink) != 3 || len(m.Skipped) != 0 {
		t.Errorf("manifest: %d files, %d dirs, %d symlinks, skipped %v; want 3, 3, 3, none", got, m.Count(TypeDir), m.Count(TypeSymlink), m.Skipped)
	}
	if m.Links["/etc/app/lib"] != "/usr/lib/app/1.0.0" || m.Links["/etc/app/share"] != "/usr/share/app/1.0.0" {
		t.Errorf("manifest links = %v", m.Links)
	}
	if e := entry(t, m, "/etc/app/app.conf"); e.Mode != 0o640 || e.Size != 12 || len(e.SHA256) != 64 {
		t.Errorf("entry of app.conf = %+v", e)
	}
	if got, err := ReadManifest(p); err != nil || len(got.Entries) != len(m.Entries) || got.ID() != strings.TrimSuffix(baseName(p), ".tar.gz") {
		t.Errorf("ReadManifest = %+v, %v; want the manifest Write returned, named as the archive", got, err)
	}

	f.symlink("/usr/lib/app/1.1.0", "/etc/app/lib")
	f.write("/var/lib/app/config.json", `{"version": "1.1.0", "more": true}`+"\n", 0o644)
	f.write("/etc/app/app.conf", "setting = 2\n", 0o600)
	if err := os.RemoveAll(f.path("/var/lib/app/queue")); err != nil {
		t.Fatal(err)
	}
	f.write("/var/lib/app/new", "new\n", 0o644)
	f.mkdir("/var/lib/app", 0o700)

	written, err := f.restore(p)
	if err != nil || !written {
		t.Fatalf("restore = %v, %v", written, err)
	}
	got := f.tree()
	if without(got, "/var/lib/app/new") != want {
		t.Errorf("after the restore:\n%s\nwant as backed up, plus the newer file:\n%s", got, want)
	}
	if temps := f.temps(); len(temps) > 0 {
		t.Errorf("temporary files left: %v", temps)
	}
}

func baseName(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

// without drops the lines of paths from a tree.
func without(tree string, paths ...string) string {
	var out []string
	for _, line := range strings.Split(tree, "\n") {
		keep := true
		for _, p := range paths {
			if strings.HasPrefix(line, p+" ") {
				keep = false
			}
		}
		if keep {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestBackupSkipsSpecialFiles puts a unix socket, a fifo and (as root) a device in the state:
// the backup succeeds, names each in the manifest's skipped list, and a restore leaves them.
func TestBackupSkipsSpecialFiles(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	l, err := net.Listen("unix", f.path("/var/lib/app/sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := unix.Mkfifo(f.path("/var/lib/app/queue/fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := []string{"/var/lib/app/queue/fifo (fifo)", "/var/lib/app/sock (socket)"}
	if os.Geteuid() == 0 {
		if err := unix.Mknod(f.path("/etc/app/null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
			t.Fatal(err)
		}
		want = append(want, "/etc/app/null (character device)")
	}
	p, m, err := f.tryBackup()
	if err != nil {
		t.Fatalf("Write with a socket, a fifo and a device in the state = %v, want them skipped", err)
	}
	var got []string
	for _, s := range m.Skipped {
		got = append(got, s.String())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("skipped = %q, want %q", got, want)
	}
	if read, err := ReadManifest(p); err != nil || len(read.Skipped) != len(want) {
		t.Errorf("the archive's manifest lists skipped %v (%v), want %d", read.Skipped, err, len(want))
	}
	if m.Count(TypeFile) != 3 {
		t.Errorf("archived %d files, want the 3 regular ones", m.Count(TypeFile))
	}
	before := f.tree()
	if written, err := f.restore(p); err != nil || !written {
		t.Fatalf("restore = %v, %v", written, err)
	}
	if after := f.tree(); after != before {
		t.Errorf("restoring an archive with skipped files changed the tree:\n%s\nwant:\n%s", after, before)
	}
}

// TestBackupFollowsLinkedRoot keeps the state on another disk: /var/lib/app is a link. The
// backup follows it once, on purpose, and archives what it holds; the restore writes there.
func TestBackupFollowsLinkedRoot(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if err := os.Rename(f.path("/var/lib/app"), f.path("/srv-app")); err != nil {
		t.Fatal(err)
	}
	f.symlink(f.path("/srv-app"), "/var/lib/app")
	p, m := f.backup()
	if e := entry(t, m, "/var/lib/app"); e.Type != TypeDir {
		t.Errorf("root entry = %+v, want the directory the link leads to", e)
	}
	for _, want := range []string{"/var/lib/app/config.json", "/var/lib/app/queue/job-1", "/var/lib/app/current"} {
		entry(t, m, want)
	}
	if m.Count(TypeFile) != 3 {
		t.Errorf("archived %d files through the linked root, want 3", m.Count(TypeFile))
	}
	file, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := Verify(context.Background(), file, f.sc); err != nil {
		t.Errorf("Verify = %v", err)
	}

	f.write("/srv-app/config.json", "changed\n", 0o644)
	if written, err := f.restore(p); err != nil || !written {
		t.Fatalf("restore = %v, %v", written, err)
	}
	if got := f.read("/srv-app/config.json"); got != `{"version": "1.0.0"}`+"\n" {
		t.Errorf("config on the other disk after the restore = %q", got)
	}
	if target, err := os.Readlink(f.path("/var/lib/app")); err != nil || target != f.path("/srv-app") {
		t.Errorf("the root link after the restore -> %q, %v; want it left a link", target, err)
	}
}

// TestBackupLinkPolicy archives the links a restore may write and skips, naming them, the
// ones it may not.
func TestBackupLinkPolicy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	links := map[string]string{
		"/var/lib/app/root":      "/",
		"/var/lib/app/up":        "../../../etc/shadow",
		"/var/lib/app/through":   "queue/../../../../etc",
		"/var/lib/app/etc":       "/etc",
		"/var/lib/app/inside":    "queue/job-1",
		"/var/lib/app/abs":       "/var/lib/app/queue",
		"/var/lib/app/queue/top": "../config.json",
		"/var/lib/app/cross":     "/etc/app/app.conf",
		"/etc/app/tool":          "/usr/lib/app/1.0.0/usr/sbin/tool",
		"/etc/app/default":       "/usr/lib/app/default",
	}
	for p, target := range links {
		f.symlink(target, p)
	}
	_, m := f.backup()
	skipped := map[string]bool{}
	for _, s := range m.Skipped {
		if s.Type != "symlink" || s.Reason == "" {
			t.Errorf("skipped %v, want a symlink with its reason", s)
		}
		skipped[s.Path] = true
	}
	for p := range links {
		wantSkip := map[string]bool{"/var/lib/app/root": true, "/var/lib/app/up": true, "/var/lib/app/through": true,
			"/var/lib/app/etc": true, "/etc/app/default": true}[p]
		if skipped[p] != wantSkip {
			t.Errorf("%s -> %s: skipped %v, want %v", p, links[p], skipped[p], wantSkip)
		}
	}

	// A switch link that leads elsewhere is skipped too, and the manifest names no link.
	f.symlink("/", "/etc/app/lib")
	_, m = f.backup()
	if _, ok := m.Links["/etc/app/lib"]; ok || !strings.Contains(strings.Join(skippedStrings(m), " "), "/etc/app/lib (symlink: -> /: a switch link must point at a version tree") {
		t.Errorf("switch link to /: links %v, skipped %v; want it skipped with the reason", m.Links, skippedStrings(m))
	}
}

func skippedStrings(m Manifest) []string {
	var out []string
	for _, s := range m.Skipped {
		out = append(out, s.String())
	}
	return out
}

func TestCheckLink(t *testing.T) {
	t.Parallel()
	sc := testScope("")
	tests := []struct {
		path, target string
		ok           bool
	}{
		{"/etc/app/lib", "/usr/lib/app/1.0.0", true},
		{"/etc/app/lib", "../../usr/lib/app/1.0.0", true},
		{"/etc/app/lib", "/usr/share/app/1.0.0", false},
		{"/etc/app/lib", "/usr/lib/app/1.0.0/usr", false},
		{"/etc/app/lib", "/usr/lib/app/default", false},
		{"/etc/app/lib", "/usr/lib/app/x/../1.0.0", false},
		{"/etc/app/lib", "/", false},
		{"/etc/app/share", "/usr/share/app/1.1.0", true},
		{"/etc/app/x", "/usr/share/app/1.1.0/x", true},
		{"/etc/app/x", "/usr/share/app", false},
		{"/etc/app/x", "/usr/share/app/../../../etc", false},
		{"/var/lib/app/x", "y", true},
		{"/var/lib/app/x", ".", true},
		{"/var/lib/app/a/x", "../y", true},
		{"/var/lib/app/x", "../y", false},
		{"/var/lib/app/x", "../app/y", false},
		{"/var/lib/app/x", "a/../../y", false},
		{"/var/lib/app/x", "/var/lib/app/y", true},
		{"/var/lib/app/x", "/etc/app/y", true},
		{"/var/lib/app/x", "/var/lib/application", false},
		{"/var/lib/app/x", "/etc/shadow", false},
		{"/var/lib/app/x", "/", false},
		{"/var/lib/app/x", "", false},
		{"/var/lib/app/x", "a\x00b", false},
		{"/var/lib/app/x", strings.Repeat("a/", 3000), false},
	}
	for _, tt := range tests {
		if err := sc.CheckLink(tt.path, tt.target); (err == nil) != tt.ok {
			t.Errorf("CheckLink(%s, %q) = %v, want ok %v", tt.path, tt.target, err, tt.ok)
		}
	}
}

// TestRestoreOwnersAndModes archives setuid, setgid and sticky bits and (as root) owners,
// and restores them exactly.
func TestRestoreOwnersAndModes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	root := os.Geteuid() == 0
	f.write("/var/lib/app/suid", "#!/bin/sh\n", 0o755)
	f.write("/var/lib/app/sgid", "data\n", 0o640)
	f.mkdir("/var/lib/app/spool", 0o755)
	if root {
		f.chown("/var/lib/app/sgid", 1234, 5678)
		f.chown("/var/lib/app/spool", 1234, 0)
		f.chown("/var/lib/app/current", 1234, 5678)
	}
	for p, mode := range map[string]uint32{"/var/lib/app/suid": 0o4755, "/var/lib/app/sgid": 0o2640, "/var/lib/app/spool": 0o1777} {
		if err := unix.Chmod(f.path(p), mode); err != nil {
			t.Fatal(err)
		}
	}
	stamp := time.Date(2020, 5, 6, 7, 8, 9, 0, time.UTC)
	for _, p := range []string{"/var/lib/app/suid", "/var/lib/app/spool", "/var/lib/app/current"} {
		tv := []unix.Timeval{unix.NsecToTimeval(stamp.UnixNano()), unix.NsecToTimeval(stamp.UnixNano())}
		if err := unix.Lutimes(f.path(p), tv); err != nil {
			t.Fatal(err)
		}
	}
	want := f.tree()
	p, m := f.backup()
	for p, mode := range map[string]Mode{"/var/lib/app/suid": 0o4755, "/var/lib/app/sgid": 0o2640, "/var/lib/app/spool": 0o1777} {
		if e := entry(t, m, p); e.Mode != mode {
			t.Errorf("manifest mode of %s = %s, want %s", p, e.Mode, mode)
		}
	}
	if root {
		if e := entry(t, m, "/var/lib/app/sgid"); e.UID != 1234 || e.GID != 5678 {
			t.Errorf("manifest owner of sgid = %d:%d, want 1234:5678", e.UID, e.GID)
		}
	}
	for _, p := range []string{"/var/lib/app/suid", "/var/lib/app/sgid", "/var/lib/app/spool"} {
		if err := os.Chmod(f.path(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if root {
			f.chown(p, 0, 0)
		}
	}
	if root {
		f.chown("/var/lib/app/current", 0, 0)
	}
	if written, err := f.restore(p); err != nil || !written {
		t.Fatalf("restore = %v, %v", written, err)
	}
	if got := f.tree(); got != want {
		t.Errorf("after the restore:\n%s\nwant:\n%s", got, want)
	}
	for _, p := range []string{"/var/lib/app/suid", "/var/lib/app/spool", "/var/lib/app/current"} {
		if info, err := os.Lstat(f.path(p)); err != nil || !info.ModTime().Equal(stamp) {
			t.Errorf("%s: time %v, %v; want %v as archived", p, info.ModTime(), err, stamp)
		}
	}
}

// TestBackupNeverReplacesAnArchive: two backups with the same name cannot both exist; the
// second fails rather than replace the first.
func TestBackupNeverReplacesAnArchive(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	m := Manifest{Kind: KindSwitch, App: "app", From: "1.0.0", To: "1.1.0", Created: f.clock}
	first, _, err := Write(context.Background(), f.dir(), f.sc, m)
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	// A second run within the same second: its archive takes the next second's name.
	second, m2, err := Write(context.Background(), f.dir(), f.sc, m)
	if err != nil {
		t.Fatalf("a second Write within the same second = %v, want the next free name", err)
	}
	if second == first || !m2.Created.Equal(m.Created.Add(time.Second)) || baseName(second) != m2.ID()+".tar.gz" {
		t.Errorf("second archive %s (created %v), first %s: want the next second's name", second, m2.Created, first)
	}
	if after, _ := os.ReadFile(first); !bytes.Equal(after, before) {
		t.Error("the first archive changed")
	}
	entries, _ := os.ReadDir(f.dir())
	if len(entries) != 2 {
		t.Errorf("backup directory holds %d files, want the two archives and no temporary files", len(entries))
	}
}

// TestBackupExcludes leaves out what the scope excludes, with everything below it, lists it
// as skipped, and restores the rest without touching it; a scope that excludes what it does
// not back up is refused.
func TestBackupExcludes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.mkdir("/var/lib/app/queue/archive", 0o700)
	f.write("/var/lib/app/queue/archive/job-0", "archived job\n", 0o600)
	f.mkdir("/var/lib/app/export", 0o700)
	f.write("/var/lib/app/export/disk.img", strings.Repeat("x", 4096), 0o600)
	f.sc.Exclude = []string{"/var/lib/app/queue/archive", "/var/lib/app/export"}
	p, m, err := f.tryBackup()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range m.Entries {
		if strings.HasPrefix(e.Path, "var/lib/app/export") || strings.HasPrefix(e.Path, "var/lib/app/queue/archive") ||
			strings.HasPrefix(e.Path, "/var/lib/app/export") || strings.HasPrefix(e.Path, "/var/lib/app/queue/archive") {
			t.Errorf("the archive holds the excluded %s", e.Path)
		}
	}
	var skipped []string
	for _, s := range m.Skipped {
		skipped = append(skipped, s.Path+": "+s.Reason)
	}
	want := []string{
		"/var/lib/app/export: excluded by the configuration (backup_exclude)",
		"/var/lib/app/queue/archive: excluded by the configuration (backup_exclude)",
	}
	if strings.Join(skipped, "\n") != strings.Join(want, "\n") {
		t.Errorf("skipped = %q, want %q", skipped, want)
	}
	// What the restore does not hold stays as it is on disk.
	f.write("/var/lib/app/export/disk.img", "a newer export\n", 0o600)
	f.write("/var/lib/app/config.json", `{"version": "9.9.9"}`+"\n", 0o600)
	if written, err := f.restore(p); err != nil || !written {
		t.Fatalf("restore = %v, %v", written, err)
	}
	if data, _ := os.ReadFile(f.path("/var/lib/app/export/disk.img")); string(data) != "a newer export\n" {
		t.Errorf("the restore changed the excluded export: %q", data)
	}
	if data, _ := os.ReadFile(f.path("/var/lib/app/config.json")); !strings.Contains(string(data), "1.0.0") {
		t.Errorf("the restore did not bring back the config: %q", data)
	}

	for _, bad := range [][]string{{"/var/lib/other"}, {"/var/lib/app"}, {"var/lib/app/export"}, {"/var/lib/app/../app/export"}} {
		g := newFixture(t)
		g.sc.Exclude = bad
		if _, _, err := g.tryBackup(); err == nil {
			t.Errorf("Write excluding %q = nil error, want refused", bad)
		}
	}
}
