package layout

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var errSyncRefused = errors.New("sync refused")

// recordSyncs makes fsyncDir record the directories it is asked to sync instead of syncing
// them, failing for the directory fail (when not ""), until t ends. Tests that call it must
// not run in parallel: fsyncDir belongs to the whole package.
func recordSyncs(t *testing.T, fail string) *[]string {
	t.Helper()
	var synced []string
	saved := fsyncDir
	fsyncDir = func(dir string) error {
		synced = append(synced, dir)
		if dir == fail {
			return errSyncRefused
		}
		return nil
	}
	t.Cleanup(func() { fsyncDir = saved })
	return &synced
}

func TestOSFSSyncsWhatItChanges(t *testing.T) {
	tests := []struct {
		name string
		op   func(dir string) error
		want []string // directories synced, relative to the test's directory
	}{
		{"symlink", func(d string) error { return OSFS{}.Symlink("target", filepath.Join(d, "a", "link")) }, []string{"a"}},
		{"rename in one directory", func(d string) error { return OSFS{}.Rename(filepath.Join(d, "a", "f"), filepath.Join(d, "a", "g")) }, []string{"a"}},
		{"rename across directories", func(d string) error { return OSFS{}.Rename(filepath.Join(d, "a", "f"), filepath.Join(d, "b", "f")) }, []string{"b", "a"}},
		{"remove", func(d string) error { return OSFS{}.Remove(filepath.Join(d, "a", "f")) }, []string{"a"}},
		{"sync", func(d string) error { return OSFS{}.SyncDir(filepath.Join(d, "b")) }, []string{"b"}},
	}
	for _, tt := range tests {
		for _, failing := range []bool{false, true} {
			name := tt.name
			if failing {
				name += " with a failing sync"
			}
			t.Run(name, func(t *testing.T) {
				dir := build(t, "f a/f", "d b")
				fail := ""
				if failing {
					fail = filepath.Join(dir, tt.want[len(tt.want)-1])
				}
				synced := recordSyncs(t, fail)
				err := tt.op(dir)
				var want []string
				for _, w := range tt.want {
					want = append(want, filepath.Join(dir, w))
				}
				if !slices.Equal(*synced, want) {
					t.Errorf("synced %q, want %q", *synced, want)
				}
				switch {
				case !failing && err != nil:
					t.Errorf("error %v, want none", err)
				case failing && !errors.Is(err, errSyncRefused):
					t.Errorf("error %v, want the sync's failure", err)
				case failing && !strings.Contains(err.Error(), fail):
					t.Errorf("error %q does not name the directory %s", err, fail)
				}
			})
		}
	}
}

func TestOSFSSyncFailureNamesDirectory(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "gone")
	err := OSFS{}.SyncDir(missing)
	if !errors.Is(err, os.ErrNotExist) || err.Error() != "sync directory "+missing+": no such file or directory" {
		t.Errorf("SyncDir(%s) = %v, want a sync error naming it", missing, err)
	}
}

func TestSwitchSyncs(t *testing.T) {
	tests := []struct {
		name    string
		tree    []string
		version string
		fail    bool // every sync fails
		want    int  // syncs of etc/app
		wantLib string
	}{
		{name: "upgrade is synced once", tree: installed, version: "1.1", want: 1, wantLib: "/usr/lib/app/1.1"},
		{name: "one link", tree: with(installed[:6], "l etc/app/lib /usr/lib/app/1.1", "l etc/app/share /usr/share/app/1.0"), version: "1.1", want: 1, wantLib: "/usr/lib/app/1.1"},
		{name: "already there is synced once", tree: installed, version: "1.0", want: 1, wantLib: "/usr/lib/app/1.0"},
		{name: "a sync that fails fails the switch", tree: installed, version: "1.1", fail: true, want: -1, wantLib: "/usr/lib/app/1.0"},
		{name: "already there, sync fails", tree: installed, version: "1.0", fail: true, want: 1, wantLib: "/usr/lib/app/1.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := build(t, tt.tree...)
			dir := filepath.Join(root, "etc/app")
			fail := ""
			if tt.fail {
				fail = dir
			}
			synced := recordSyncs(t, fail)
			err := switchTo(context.Background(), newTestLayout(t, "minor", root), OSFS{}, tt.version)
			if tt.fail != errors.Is(err, errSyncRefused) {
				t.Errorf("Switch(%s) = %v, want the sync's failure: %v", tt.version, err, tt.fail)
			}
			for _, d := range *synced {
				if d != dir {
					t.Errorf("synced %s, want only %s", d, dir)
				}
			}
			if tt.want >= 0 && len(*synced) != tt.want {
				t.Errorf("synced %s %d times, want %d", dir, len(*synced), tt.want)
			}
			if got := readlink(t, root, "etc/app/lib"); got != tt.wantLib {
				t.Errorf("lib -> %q, want %q", got, tt.wantLib)
			}
			if got := readlink(t, root, "etc/app/share"); !strings.HasPrefix(got, "/usr/share/app/"+filepath.Base(tt.wantLib)) {
				t.Errorf("share -> %q, want the version of lib %q", got, tt.wantLib)
			}
		})
	}
}
