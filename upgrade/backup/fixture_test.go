package backup

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fixture is an application's state, /etc/<app> and two installed version trees under a
// temporary base, as a Scope sees them: /var/lib/app, /etc/app, /usr/lib/app/1.0.0 and
// /usr/share/app/1.0.0, with the switch links on 1.0.0.
type fixture struct {
	t     testing.TB
	base  string
	sc    Scope
	clock time.Time // the time of the next backup: one second later each
}

var testVersion = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`)

// testScope is the scope of every fixture, under base.
func testScope(base string) Scope {
	return Scope{
		Base:         base,
		Roots:        []string{"/var/lib/app", "/etc/app"},
		Links:        map[string]string{"/etc/app/lib": "/usr/lib/app", "/etc/app/share": "/usr/share/app"},
		Trees:        []string{"/usr/lib/app", "/usr/share/app"},
		IsVersionDir: testVersion.MatchString,
	}
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	base := t.TempDir()
	f := &fixture{t: t, base: base, sc: testScope(base), clock: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	for _, v := range []string{"1.0.0", "1.1.0"} {
		f.mkdir("/usr/lib/app/"+v, 0o755)
		f.mkdir("/usr/share/app/"+v, 0o755)
	}
	f.mkdir("/etc/app", 0o755)
	f.symlink("/usr/lib/app/1.0.0", "/etc/app/lib")
	f.symlink("/usr/share/app/1.0.0", "/etc/app/share")
	f.write("/etc/app/app.conf", "setting = 1\n", 0o640)
	f.mkdir("/var/lib/app/queue", 0o755)
	f.write("/var/lib/app/config.json", `{"version": "1.0.0"}`+"\n", 0o600)
	f.write("/var/lib/app/queue/job-1", "job one\n", 0o644)
	f.symlink("queue/job-1", "/var/lib/app/current")
	return f
}

// path is where the scope's absolute path p is on disk.
func (f *fixture) path(p string) string { return f.base + p }

// dir is the fixture's backup directory: outside everything backed up.
func (f *fixture) dir() string { return f.path("/state/backups") }

func (f *fixture) mkdir(p string, perm fs.FileMode) {
	f.t.Helper()
	if err := os.MkdirAll(f.path(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Chmod(f.path(p), perm); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) write(p, data string, perm fs.FileMode) {
	f.t.Helper()
	if err := os.WriteFile(f.path(p), []byte(data), perm); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Chmod(f.path(p), perm); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) symlink(target, p string) {
	f.t.Helper()
	_ = os.Remove(f.path(p))
	if err := os.Symlink(target, f.path(p)); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) chown(p string, uid, gid uint32) {
	f.t.Helper()
	if err := os.Lchown(f.path(p), int(uid), int(gid)); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) read(p string) string {
	f.t.Helper()
	data, err := os.ReadFile(f.path(p))
	if err != nil {
		f.t.Fatal(err)
	}
	return string(data)
}

// backup writes an archive of the fixture and returns its path and manifest.
func (f *fixture) backup() (string, Manifest) {
	f.t.Helper()
	p, m, err := f.tryBackup()
	if err != nil {
		f.t.Fatalf("Write = %v", err)
	}
	return p, m
}

func (f *fixture) tryBackup() (string, Manifest, error) {
	f.clock = f.clock.Add(time.Second)
	return Write(context.Background(), f.dir(), f.sc, Manifest{Kind: KindSwitch, App: "app", Run: 1, From: "1.0.0", To: "1.1.0", Created: f.clock})
}

// restore verifies, plans and restores the archive at p, as cutover does, and says whether
// it wrote anything.
func (f *fixture) restore(p string) (bool, error) {
	f.t.Helper()
	a, plan, err := f.check(p)
	if err != nil {
		return false, err
	}
	_ = a
	return f.restorePlan(p, plan)
}

// check verifies the archive at p and plans its restore.
func (f *fixture) check(p string) (*Archive, *Plan, error) {
	f.t.Helper()
	file, err := Open(p)
	if err != nil {
		f.t.Fatal(err)
	}
	defer file.Close()
	a, err := Verify(context.Background(), file, f.sc)
	if err != nil {
		return nil, nil, err
	}
	plan, err := NewPlan(context.Background(), a, f.sc)
	return a, plan, err
}

func (f *fixture) restorePlan(p string, plan *Plan) (bool, error) {
	f.t.Helper()
	file, err := Open(p)
	if err != nil {
		f.t.Fatal(err)
	}
	defer file.Close()
	return plan.Restore(context.Background(), file, Options{})
}

// tree describes every file under the base but the backup directory: type, mode, owner,
// content or link target. A refused restore must leave it as it was.
func (f *fixture) tree() string {
	f.t.Helper()
	var lines []string
	err := filepath.Walk(f.base, func(p string, info fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if p == f.path("/state") {
			return filepath.SkipDir
		}
		st := info.Sys().(*syscall.Stat_t)
		line := fmt.Sprintf("%s %v %d:%d", strings.TrimPrefix(p, f.base), info.Mode(), st.Uid, st.Gid)
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

// temps lists the temporary files of a restore left anywhere under the base.
func (f *fixture) temps() []string {
	f.t.Helper()
	var out []string
	_ = filepath.Walk(f.base, func(p string, info fs.FileInfo, err error) error {
		if err == nil && strings.Contains(filepath.Base(p), ".cutover-restore-") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// entry returns the manifest's entry of p.
func entry(t *testing.T, m Manifest, p string) Entry {
	t.Helper()
	i := slices.IndexFunc(m.Entries, func(e Entry) bool { return e.Path == p })
	if i < 0 {
		t.Fatalf("the manifest has no entry %s", p)
	}
	return m.Entries[i]
}
