package cfgupgrade

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var errSyncRefused = errors.New("sync refused by the test")

// recordSyncs makes fsync record what it is asked to sync, and fail for fail (when not ""),
// until t ends. Tests that call it must not run in parallel: fsync belongs to the whole
// package.
func recordSyncs(t *testing.T, fail string) *[]string {
	t.Helper()
	var synced []string
	saved := fsync
	fsync = func(name string) error {
		synced = append(synced, name)
		if name == fail {
			return errSyncRefused
		}
		return saved(name)
	}
	t.Cleanup(func() { fsync = saved })
	return &synced
}

// TestMigrationIsDurable checks that a migration is on stable storage before it is reported
// done: the backup copy and the new config with their directory, a config already at the
// target (the run that wrote it may have died before its sync), and what a migration command
// wrote, through a link too. A sync that fails fails the migration, naming what it synced.
func TestMigrationIsDurable(t *testing.T) {
	requireSh(t)
	_, migs := demoFixture.load(t)
	tests := []struct {
		name string
		link bool // the config file is a link to the real one in another directory
		run  func(spec Spec) error
		want func(file, link string) []string
	}{
		{name: "migrated", run: func(spec Spec) error {
			_, _, err := Apply(spec, "1.0.0", "1.1.0", migs, Options{Now: now})
			return err
		}, want: func(f, _ string) []string { return []string{filepath.Dir(f), filepath.Dir(f)} }},
		{name: "already at the target", run: func(spec Spec) error {
			_, _, err := Apply(spec, "1.0.0", "1.0.0", migs, Options{Now: now})
			return err
		}, want: func(f, _ string) []string { return []string{f, filepath.Dir(f)} }},
		{name: "migrated by a command", run: func(spec Spec) error {
			_, err := RunExec(context.Background(), spec, script(t, "bump.sh", spec.File, "1.0.0", "1.1.0"), "1.1.0")
			return err
		}, want: func(f, _ string) []string { return []string{f, filepath.Dir(f)} }},
		{name: "migrated by a command through a link", link: true, run: func(spec Spec) error {
			edit := `sed -i --follow-symlinks 's/"version": "1.0.0"/"version": "1.1.0"/' ` + quote(spec.File)
			_, err := RunExec(context.Background(), spec, edit, "1.1.0")
			return err
		}, want: func(f, l string) []string { return []string{f, filepath.Dir(f), filepath.Dir(l)} }},
	}
	for _, tt := range tests {
		for _, failing := range []bool{false, true} {
			name := tt.name
			if failing {
				name += ", failing"
			}
			t.Run(name, func(t *testing.T) {
				spec := installConfig(t, demoFixture, 0o600)
				file, err := filepath.EvalSymlinks(spec.File)
				if err != nil {
					t.Fatal(err)
				}
				link := ""
				if tt.link {
					link = filepath.Join(t.TempDir(), "config.json")
					if err := os.Symlink(file, link); err != nil {
						t.Fatal(err)
					}
					spec.File = link
				}
				want := tt.want(file, link)
				fail := ""
				if failing {
					fail = want[len(want)-1]
					want = want[:slices.Index(want, fail)+1]
				}
				synced := recordSyncs(t, fail)
				err = tt.run(spec)
				if !slices.Equal(*synced, want) {
					t.Errorf("synced %q, want %q", *synced, want)
				}
				switch {
				case !failing && err != nil:
					t.Errorf("error %v, want none", err)
				case failing && !errors.Is(err, errSyncRefused):
					t.Errorf("error %v, want the sync's failure", err)
				case failing && !strings.Contains(err.Error(), fail+":"):
					t.Errorf("error %q does not name %s", err, fail)
				}
			})
		}
	}
}
