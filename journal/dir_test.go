package journal

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

// recordSyncs makes fsyncDir record the directories it is asked to sync, and fail for
// fail (when not ""), until t ends. Tests that call it must not run in parallel: fsyncDir
// belongs to the whole package.
func recordSyncs(t *testing.T, fail string) *[]string {
	t.Helper()
	var synced []string
	saved := fsyncDir
	fsyncDir = func(dir string) error {
		synced = append(synced, dir)
		if dir == fail {
			return errSyncRefused
		}
		return saved(dir)
	}
	t.Cleanup(func() { fsyncDir = saved })
	return &synced
}

// TestDurableWrites checks that everything the journal package creates, replaces or
// removes in the state directory is synced where it lives, the directory itself and its new
// parents included, and that a sync that fails fails the operation, naming the directory.
func TestDurableWrites(t *testing.T) {
	tests := []struct {
		name string
		// op works in base, a directory that exists; the state directory is base/var/state.
		op   func(base string) error
		want []string // directories synced, relative to base ("." is base)
	}{
		{"mkdir with new parents", func(b string) error { return MkdirAllDurable(b+"/var/state", 0o700) }, []string{"var/state", "var", "."}},
		{"mkdir of an existing directory", func(b string) error { return MkdirAllDurable(b, 0o700) }, []string{".", ".."}},
		{"first intent", func(b string) error { return WriteIntent(b+"/var/state/intent.json", sampleIntent()) },
			[]string{"var/state", "var", ".", "var/state"}},
		{"intent in an existing directory", func(b string) error {
			return WriteIntent(b+"/intent.json", sampleIntent())
		}, []string{".", "..", "."}},
		{"intent removed", func(b string) error {
			if err := os.WriteFile(b+"/intent.json", nil, 0o600); err != nil {
				return err
			}
			return RemoveIntent(b + "/intent.json")
		}, []string{"."}},
		{"lock", func(b string) error {
			l, err := AcquireLock(b+"/var/state/lock", Holder{})
			if err == nil {
				err = l.Release()
			}
			return err
		}, []string{"var/state", "var", "."}},
		{"new journal", func(b string) error {
			_, err := NewStore(b+"/var/state/journal.db").CreateRun(context.Background(), sampleRun())
			return err
		}, []string{"var/state", "var", ".", "var/state"}},
	}
	for _, tt := range tests {
		for _, failing := range []bool{false, true} {
			name := tt.name
			if failing {
				name += ", failing"
			}
			t.Run(name, func(t *testing.T) {
				base := t.TempDir()
				var want []string
				for _, w := range tt.want {
					want = append(want, filepath.Clean(filepath.Join(base, w)))
				}
				fail := ""
				if failing {
					fail = want[len(want)-1]
				}
				synced := recordSyncs(t, fail)
				err := tt.op(base)
				got := *synced
				if failing {
					// The operation stops at the first sync that fails.
					want = want[:slices.Index(want, fail)+1]
				}
				if !slices.Equal(got, want) {
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
