package cfgupgrade

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// now is the fixed time the tests date backups with.
var now = time.Date(2026, 11, 21, 18, 1, 2, 0, time.FixedZone("CET", 3600))

// installConfig copies a fixture config into a new directory as config.json
// with mode perm and returns its spec.
func installConfig(t *testing.T, f fixture, perm os.FileMode) Spec {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("testdata", "configs", f.config))
	if err != nil {
		t.Fatal(err)
	}
	spec := f.spec
	spec.File = filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(spec.File, doc, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(spec.File, perm); err != nil {
		t.Fatal(err)
	}
	return spec
}

func TestApplyDryRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		f      fixture
		to     string
		golden string
	}{
		{demoFixture, "1.2.0", "dry-run-demo-1.0.0-1.2.0.diff"},
		{ganetiFixture, "2.16.0", "dry-run-ganeti-2.15.0-2.16.0.diff"},
	}
	for _, tt := range tests {
		spec := installConfig(t, tt.f, 0o640)
		_, migs := tt.f.load(t)
		before := snapshot(t, spec.File)
		rep, backup, err := Apply(spec, tt.f.version, tt.to, migs, Options{DryRun: true, Now: now})
		if err != nil {
			t.Fatalf("Apply dry run to %s: %v", tt.to, err)
		}
		if backup != "" {
			t.Errorf("Apply dry run returned backup %q", backup)
		}
		before.check(t)
		// The diff names the config; the golden file names it as an
		// operator would see it.
		got := strings.ReplaceAll(rep.Diff, spec.File, "/var/lib/demoapp/config.json")
		golden := filepath.Join("testdata", "golden", tt.golden)
		if *update {
			if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test -update to create it)", err)
		}
		if got != string(want) {
			t.Errorf("Apply dry run diff =\n%s\nwant (%s)\n%s", got, golden, want)
		}
	}
}

func TestApplyWritesBackupAndConfig(t *testing.T) {
	t.Parallel()
	spec := installConfig(t, demoFixture, 0o640)
	orig, migs := demoFixture.load(t)
	rep, backup, err := Apply(spec, "1.0.0", "1.2.0", migs, Options{Now: now})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	wantBackup := spec.File + ".1.0.0-20261121T170102Z.bak"
	if backup != wantBackup {
		t.Errorf("Apply backup = %q, want %q", backup, wantBackup)
	}
	checkFile(t, backup, orig, 0o600)
	want, _, err := Migrate(orig, spec, "1.0.0", "1.2.0", migs)
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, spec.File, want, 0o640)
	if rep.From != "1.0.0" || rep.To != "1.2.0" || len(rep.Steps) != 2 || rep.Diff == "" {
		t.Errorf("Apply report = %s to %s, %d steps, diff %d bytes; want 1.0.0 to 1.2.0, 2 steps, a diff", rep.From, rep.To, len(rep.Steps), len(rep.Diff))
	}
	if v, err := ReadVersion(spec); err != nil || v != "1.2.0" {
		t.Errorf("ReadVersion after Apply = %q, %v; want 1.2.0", v, err)
	}
	// A second run in the same second gets its own backup.
	_, backup2, err := Apply(spec, "1.2.0", "1.1.0", migs, Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if want := spec.File + ".1.2.0-20261121T170102Z.bak"; backup2 != want {
		t.Errorf("second backup = %q, want %q", backup2, want)
	}
	_, backup3, err := Apply(spec, "1.1.0", "1.2.0", migs, Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if want := spec.File + ".1.1.0-20261121T170102Z.bak"; backup3 != want {
		t.Errorf("third backup = %q, want %q", backup3, want)
	}
	_, backup4, err := Apply(spec, "1.2.0", "1.1.0", migs, Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if want := spec.File + ".1.2.0-20261121T170102Z-2.bak"; backup4 != want {
		t.Errorf("fourth backup = %q, want %q", backup4, want)
	}
	// The three newest backups are kept.
	checkDir(t, filepath.Dir(spec.File), "config.json", filepath.Base(backup2), filepath.Base(backup3), filepath.Base(backup4))
}

// TestApplyIsIdempotent checks that a downgrade applied twice leaves the same
// file as once, and that a redone upgrade changes nothing.
func TestApplyIsIdempotent(t *testing.T) {
	t.Parallel()
	for _, f := range []fixture{demoFixture, ganetiFixture} {
		spec := installConfig(t, f, 0o600)
		orig, migs := f.load(t)
		major := f.version[:strings.Index(f.version, ".")]
		newer := map[string]string{"1": "1.1.0", "2": "2.16.0"}[major]
		if _, _, err := Apply(spec, f.version, newer, migs, Options{Now: now}); err != nil {
			t.Fatalf("Apply up: %v", err)
		}
		// A redone upgrade (crash after the rename) finds the config done.
		up := snapshot(t, spec.File)
		rep, backup, err := Apply(spec, f.version, newer, migs, Options{Now: now.Add(time.Hour)})
		if err != nil || backup != "" || len(rep.Steps) != 0 || rep.From != newer || rep.To != newer {
			t.Errorf("redone Apply up = %+v, %q, %v; want no steps, no backup", rep, backup, err)
		}
		up.check(t)

		if _, _, err := Apply(spec, newer, f.version, migs, Options{Now: now.Add(2 * time.Hour)}); err != nil {
			t.Fatalf("Apply down: %v", err)
		}
		once := snapshot(t, spec.File)
		rep, backup, err = Apply(spec, newer, f.version, migs, Options{Now: now.Add(3 * time.Hour)})
		if err != nil || backup != "" || len(rep.Steps) != 0 {
			t.Errorf("second Apply down = %+v, %q, %v; want no steps, no backup", rep, backup, err)
		}
		once.check(t)
		if !sameJSON(t, once.data, orig) {
			t.Errorf("%s: down(up(x)) != x", f.config)
		}
		entries, _ := os.ReadDir(filepath.Dir(spec.File))
		if len(entries) != 3 {
			t.Errorf("%s: directory holds %d files, want the config and 2 backups", f.config, len(entries))
		}
	}
}

// TestApplyRefusesWithoutTouching checks that a config Apply refuses, or a
// migration that fails, leaves the file's bytes and mtime alone and writes
// no backup or temporary file.
func TestApplyRefusesWithoutTouching(t *testing.T) {
	t.Parallel()
	_, migs := demoFixture.load(t)
	failing := []Migration{{From: "1.0", To: "1.1", File: "1.0-1.1.json",
		Up: []Op{{Op: "set", Path: "/nodes/*/disk/size", Value: []byte("1")}}}}
	tests := []struct {
		name, doc string
		from, to  string
		migs      []Migration
		wantErr   string
	}{
		{"newer config", `{"version": "1.2.0"}`, "1.0.0", "1.1.0", migs, "config version 1.2.0 does not match the live version 1.0.0"},
		{"unknown version", `{"version": "one"}`, "1.0.0", "1.1.0", migs, `version "one"`},
		{"no version", `{"cluster": {}}`, "1.0.0", "1.1.0", migs, "no version at /version"},
		{"not JSON", `version = 1.0.0`, "1.0.0", "1.1.0", migs, "not a JSON document"},
		{"bad target", `{"version": "1.0.0"}`, "1.0.0", "latest", migs, "target version"},
		{"bad source", `{"version": "1.0.0"}`, "1", "1.1.0", migs, "live version"},
		{"major hop", `{"version": "1.0.0"}`, "1.0.0", "2.0.0", migs, "changes the major version"},
		{"failing migration", `{"version": "1.0.0", "nodes": {"n1": {}}}`, "1.0.0", "1.1.0", failing, "parent /nodes/n1/disk does not exist"},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		spec := Spec{File: filepath.Join(dir, "config.json"), VersionKey: "/version", Encoding: Semver}
		writeFile(t, spec.File, tt.doc)
		old := time.Now().Add(-time.Hour).Truncate(time.Second)
		if err := os.Chtimes(spec.File, old, old); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, spec.File)
		_, backup, err := Apply(spec, tt.from, tt.to, tt.migs, Options{Now: now})
		if !errorMatches(err, tt.wantErr) || err == nil {
			t.Errorf("%s: Apply error = %v, want error containing %q", tt.name, err, tt.wantErr)
		}
		if backup != "" {
			t.Errorf("%s: Apply returned backup %q with its error", tt.name, backup)
		}
		before.check(t)
		checkDir(t, dir, "config.json")
	}
}

func TestApplyBadSpec(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		spec    Spec
		wantErr string
	}{
		{"relative file", Spec{File: "config.json", VersionKey: "/version", Encoding: Semver}, `config file "config.json" is not an absolute path`},
		{"missing file", Spec{File: "/nonexistent/config.json", VersionKey: "/version", Encoding: Semver}, "read config"},
		{"directory", Spec{File: t.TempDir(), VersionKey: "/version", Encoding: Semver}, "is not a regular file"},
		{"bad key", Spec{File: "/nonexistent/config.json", VersionKey: "version", Encoding: Semver}, "version key"},
		{"bad encoding", Spec{File: "/nonexistent/config.json", VersionKey: "/version", Encoding: "toml"}, `"toml" is unknown`},
	}
	for _, tt := range tests {
		if _, _, err := Apply(tt.spec, "1.0.0", "1.1.0", nil, Options{}); !errorMatches(err, tt.wantErr) {
			t.Errorf("%s: Apply error = %v, want error containing %q", tt.name, err, tt.wantErr)
		}
		if _, err := ReadVersion(tt.spec); err == nil {
			t.Errorf("%s: ReadVersion succeeded", tt.name)
		}
	}
}

// TestApplyFollowsSymlink checks that a config reached through a link is
// replaced where it lives and the link stays.
func TestApplyFollowsSymlink(t *testing.T) {
	t.Parallel()
	spec := installConfig(t, demoFixture, 0o644)
	_, migs := demoFixture.load(t)
	link := filepath.Join(t.TempDir(), "current.json")
	if err := os.Symlink(spec.File, link); err != nil {
		t.Fatal(err)
	}
	real := spec.File
	spec.File = link
	_, backup, err := Apply(spec, "1.0.0", "1.1.0", migs, Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(link); err != nil || target != real {
		t.Errorf("link = %q, %v; want it to still point to %s", target, err, real)
	}
	if filepath.Dir(backup) != filepath.Dir(real) {
		t.Errorf("backup %s is not next to %s", backup, real)
	}
	if v, err := ReadVersion(Spec{File: real, VersionKey: "/version", Encoding: Semver}); err != nil || v != "1.1.0" {
		t.Errorf("version of %s = %q, %v; want 1.1.0", real, v, err)
	}
}

// fileState is a file's bytes, mode and modification time.
type fileState struct {
	name  string
	data  []byte
	mode  os.FileMode
	mtime time.Time
}

func snapshot(t *testing.T, name string) fileState {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return fileState{name, data, info.Mode(), info.ModTime()}
}

// check fails the test if the file changed since the snapshot.
func (s fileState) check(t *testing.T) {
	t.Helper()
	now := snapshot(t, s.name)
	if !bytes.Equal(now.data, s.data) || now.mode != s.mode || !now.mtime.Equal(s.mtime) {
		t.Errorf("%s changed: mode %v mtime %v, was %v %v; bytes equal: %v", s.name, now.mode, now.mtime, s.mode, s.mtime, bytes.Equal(now.data, s.data))
	}
}

func checkFile(t *testing.T, name string, want []byte, perm os.FileMode) {
	t.Helper()
	got := snapshot(t, name)
	if !bytes.Equal(got.data, want) {
		t.Errorf("%s holds\n%s\nwant\n%s", name, got.data, want)
	}
	if got.mode != perm {
		t.Errorf("%s mode = %v, want %v", name, got.mode, perm)
	}
}

// checkDir fails the test unless dir holds exactly the files named.
func checkDir(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	slices.Sort(names)
	if !slices.Equal(got, names) {
		t.Errorf("%s holds %q, want %q", dir, got, names)
	}
}

// TestApplyRemovesDeadWritersTemps: a write killed between creating its temporary file and
// renaming it leaves the file beside the config; the next write removes it, since its writer
// is dead, and leaves alone the file of a writer that still runs.
func TestApplyRemovesDeadWritersTemps(t *testing.T) {
	t.Parallel()
	spec := installConfig(t, demoFixture, 0o640)
	_, migs := demoFixture.load(t)
	dir, base := filepath.Dir(spec.File), filepath.Base(spec.File)
	// Linux gives no process an id of 2^22 (PID_MAX_LIMIT) or more: a dead writer whose id
	// no process can have since taken.
	dead := 1 << 22
	live := exec.Command("sleep", "30")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Process.Kill(); live.Wait() })
	deadTemp := filepath.Join(dir, fmt.Sprintf(".%s.tmp-%d-123456", base, dead))
	liveTemp := filepath.Join(dir, fmt.Sprintf(".%s.tmp-%d-654321", base, live.Process.Pid))
	for _, f := range []string{deadTemp, liveTemp} {
		if err := os.WriteFile(f, []byte("half a config"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := Apply(spec, "1.0.0", "1.2.0", migs, Options{Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(deadTemp); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the dead writer's %s is still there (%v)", deadTemp, err)
	}
	if _, err := os.Stat(liveTemp); err != nil {
		t.Errorf("the live writer's temporary file: %v, want it left alone", err)
	}
}
