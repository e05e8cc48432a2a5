package backup

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var errSyncRefused = errors.New("sync refused by the test")

// recordSyncs makes fsyncDir record the directories it is asked to sync, and fail for fail
// (when not ""), until t ends. Tests that call it must not run in parallel: fsyncDir belongs
// to the whole package.
func recordSyncs(t *testing.T, fail string) *[]string {
	t.Helper()
	var synced []string
	saved := fsyncDir
	fsyncDir = func(name string, d *os.File) error {
		synced = append(synced, name)
		if name == fail {
			return errSyncRefused
		}
		return saved(name, d)
	}
	t.Cleanup(func() { fsyncDir = saved })
	return &synced
}

// TestWritesAreDurable checks that an archive, a restore and a prune are on stable storage
// when they return: each directory they changed is synced, once, and a sync that fails fails
// them, naming the directory.
func TestWritesAreDurable(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(f *fixture) // more than the fixture and its archive, not recorded
		// run changes f (whose archive at p is taken before the change) and does the work.
		run  func(f *fixture, p string) error
		want func(f *fixture) []string
	}{
		{name: "archive", run: func(f *fixture, _ string) error {
			_, _, err := f.tryBackup()
			return err
		}, want: func(f *fixture) []string { return []string{f.dir()} }},
		{name: "restore", run: func(f *fixture, p string) error {
			if err := os.RemoveAll(f.path("/var/lib/app/queue")); err != nil {
				return err
			}
			f.write("/etc/app/app.conf", "setting = 2\n", 0o600)
			_, err := f.restore(p)
			return err
		}, want: func(*fixture) []string { return []string{"/var/lib/app/queue", "/var/lib/app", "/etc/app"} }},
		{name: "restore of a missing root", run: func(f *fixture, p string) error {
			if err := os.RemoveAll(f.path("/etc/app")); err != nil {
				return err
			}
			_, err := f.restore(p)
			return err
		}, want: func(*fixture) []string { return []string{"/var/lib/app/queue", "/var/lib/app", "/etc/app", "/etc"} }},
		{name: "prune", prepare: func(f *fixture) {
			f.backup()
			f.backup()
		}, run: func(f *fixture, _ string) error {
			_, err := Prune(f.dir(), "app", 1, "1.1.0", nil)
			return err
		}, want: func(f *fixture) []string { return []string{f.dir()} }},
	}
	for _, tt := range tests {
		for _, failing := range []bool{false, true} {
			name := tt.name
			if failing {
				name += ", failing"
			}
			t.Run(name, func(t *testing.T) {
				f := newFixture(t)
				p, _ := f.backup()
				if tt.prepare != nil {
					tt.prepare(f)
				}
				want := tt.want(f)
				fail := ""
				if failing {
					fail = want[len(want)-1]
				}
				synced := recordSyncs(t, fail)
				err := tt.run(f, p)
				if got := *synced; !slices.Equal(got, want) {
					t.Errorf("synced %q, want %q", got, want)
				}
				switch {
				case !failing && err != nil:
					t.Errorf("error %v, want none", err)
				case failing && !errors.Is(err, errSyncRefused):
					t.Errorf("error %v, want the sync's failure", err)
				case failing && !strings.Contains(err.Error(), "sync directory "+fail+":"):
					t.Errorf("error %q does not name the directory %s", err, fail)
				}
			})
		}
	}
}

// TestBackupDirectoryIsCreated checks that the first archive creates its directory, with
// its missing parents.
func TestBackupDirectoryIsCreated(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if _, err := os.Stat(filepath.Dir(f.dir())); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the fixture's state directory exists before the first archive: %v", err)
	}
	p, _ := f.backup()
	if filepath.Dir(p) != f.dir() {
		t.Errorf("archive %s, want it in %s", p, f.dir())
	}
}
