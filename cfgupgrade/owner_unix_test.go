//go:build unix

package cfgupgrade

import (
	"os"
	"syscall"
	"testing"
)

// TestApplyKeepsOwner checks that the migrated config keeps the owner and
// group of the original, so the application's user can still read it.
func TestApplyKeepsOwner(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("changing a file's owner needs root")
		}
		t.Skip("changing a file's owner needs root")
	}
	spec := installConfig(t, demoFixture, 0o640)
	_, migs := demoFixture.load(t)
	const uid, gid = 65534, 65533
	if err := os.Chown(spec.File, uid, gid); err != nil {
		t.Fatal(err)
	}
	_, backup, err := Apply(spec, "1.0.0", "1.1.0", migs, Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		name     string
		uid, gid uint32
	}{{spec.File, uid, gid}, {backup, 0, 0}} {
		info, err := os.Stat(f.name)
		if err != nil {
			t.Fatal(err)
		}
		st := info.Sys().(*syscall.Stat_t)
		if st.Uid != f.uid || st.Gid != f.gid {
			t.Errorf("%s owner = %d:%d, want %d:%d", f.name, st.Uid, st.Gid, f.uid, f.gid)
		}
	}
}
