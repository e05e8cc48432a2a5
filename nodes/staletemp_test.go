package nodes_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cutover/cutover/nodes"
)

// TestWriteRemovesDeadWritersTemps checks that a write removes at once the temporary
// directory a killed cutover (another writer) left beside the file, and keeps a recent one
// of its own process, which may be a concurrent write of the same file.
func TestWriteRemovesDeadWritersTemps(t *testing.T) {
	t.Parallel()
	targets, cluster := fsTargets(t)
	for _, ft := range targets {
		if ft.conn.Local() {
			continue // TestLocalWriteRemovesDeadWritersTemps
		}
		t.Run(ft.name, func(t *testing.T) {
			t.Parallel()
			dir := ft.newDir(t, cluster)
			st, err := os.Stat(dir)
			if err != nil {
				t.Fatal(err)
			}
			sys := st.Sys().(*syscall.Stat_t)
			other := "00000000"
			if nodes.WriterID == other {
				other = "11111111"
			}
			dead := filepath.Join(dir, ".config.json.tmp-"+other+"0123abcd")
			mine := filepath.Join(dir, ".config.json.tmp-"+nodes.WriterID+"0123abcd")
			for _, d := range []string{dead, mine} {
				if err := os.Mkdir(d, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(d, "config.json"), []byte("half"), 0o600); err != nil {
					t.Fatal(err)
				}
				for _, p := range []string{d, filepath.Join(d, "config.json")} {
					if err := os.Lchown(p, int(sys.Uid), int(sys.Gid)); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := ft.conn.WriteFileAtomic(filepath.Join(dir, "config.json"), []byte("whole"), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(dead); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the temporary directory of a dead writer is still there: %v", err)
			}
			if _, err := os.Lstat(mine); err != nil {
				t.Errorf("this process's recent temporary directory was removed: %v", err)
			}
			// Once old, this process's own goes too.
			old := time.Now().Add(-11 * time.Minute)
			if err := os.Chtimes(mine, old, old); err != nil {
				t.Fatal(err)
			}
			if err := ft.conn.WriteFileAtomic(filepath.Join(dir, "config.json"), []byte("again"), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(mine); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("an old temporary directory of this process is still there: %v", err)
			}
		})
	}
}

// TestLocalWriteRemovesDeadWritersTemps checks that a local write removes the temporary file
// a writer killed before its rename left beside the file, and leaves alone the one of a
// writer that still runs.
func TestLocalWriteRemovesDeadWritersTemps(t *testing.T) {
	t.Parallel()
	targets, cluster := fsTargets(t)
	local := 0
	for _, ft := range targets {
		if !ft.conn.Local() {
			continue
		}
		local++
		dir := ft.newDir(t, cluster)
		// Linux gives no process an id of 2^22 (PID_MAX_LIMIT) or more: a dead writer whose id
		// no process can have since taken.
		dead := 1 << 22
		live := exec.Command("sleep", "30")
		if err := live.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { live.Process.Kill(); live.Wait() })
		deadTemp := filepath.Join(dir, fmt.Sprintf(".config.json.tmp-%d-123456", dead))
		liveTemp := filepath.Join(dir, fmt.Sprintf(".config.json.tmp-%d-654321", live.Process.Pid))
		for _, f := range []string{deadTemp, liveTemp} {
			if err := os.WriteFile(f, []byte("half"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := ft.conn.WriteFileAtomic(filepath.Join(dir, "config.json"), []byte("whole"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(deadTemp); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the temporary file of a dead writer is still there: %v", err)
		}
		if _, err := os.Lstat(liveTemp); err != nil {
			t.Errorf("a live writer's temporary file was removed: %v", err)
		}
	}
	if local == 0 {
		t.Fatal("no local connection among the targets")
	}
}
