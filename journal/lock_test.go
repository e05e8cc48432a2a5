package journal

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// lockHolderEnv makes the test binary a lock holder: it takes the lock at
// the path given, says "locked" and sleeps until killed.
const lockHolderEnv = "CUTOVER_JOURNAL_TEST_HOLD_LOCK"

func TestMain(m *testing.M) {
	if path := os.Getenv(lockHolderEnv); path != "" {
		if _, err := AcquireLock(path, Holder{Host: "holder-host", Command: "cutover upgrade --to=1.1.0"}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("locked")
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestLockAcquireRelease(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state", "lock")
	h := Holder{Host: "node1", PID: 1234, Started: t0, Command: "cutover upgrade --to=1.1.0"}
	l, err := AcquireLock(path, h)
	if err != nil {
		t.Fatal(err)
	}
	if m := fileMode(t, path); m != 0o600 {
		t.Errorf("lock file mode = %v, want 0600", m)
	}
	if m := fileMode(t, filepath.Dir(path)); m != 0o700 {
		t.Errorf("lock directory mode = %v, want 0700", m)
	}
	if got, held, err := ReadHolder(path); err != nil || !held || got != h {
		t.Errorf("ReadHolder while held = %+v, %v, %v, want %+v, true", got, held, err, h)
	}

	// A second acquire (its own open file description) is refused, naming the holder.
	_, err = AcquireLock(path, Holder{Host: "node1", PID: 99})
	if !IsLocked(err) {
		t.Fatalf("second AcquireLock: err = %v, want locked", err)
	}
	want := "another cutover run holds the lock: pid 1234 on node1 since 2026-11-21T18:01:02Z"
	if err.Error() != want {
		t.Errorf("second AcquireLock: err = %q, want %q", err, want)
	}
	if got, ok := LockHolder(err); !ok || got != h {
		t.Errorf("LockHolder = %+v, %v, want %+v, true", got, ok, h)
	}

	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Errorf("second Release: %v", err)
	}
	if got, held, err := ReadHolder(path); err != nil || held || got != h {
		t.Errorf("ReadHolder after release = %+v, %v, %v, want the last holder, false", got, held, err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("Release removed the lock file: %v", err)
	}
	l2, err := AcquireLock(path, Holder{Host: "node1", PID: 5678, Started: t0})
	if err != nil {
		t.Fatalf("AcquireLock after release: %v", err)
	}
	defer l2.Release()
	if got, _, _ := ReadHolder(path); got.PID != 5678 || got.Command != "" {
		t.Errorf("holder after re-acquire = %+v, want pid 5678 and no command left over", got)
	}
}

func TestLockDefaults(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "lock")
	before := time.Now().Add(-time.Second)
	l, err := AcquireLock(path, Holder{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	host, _ := os.Hostname()
	got, held, err := ReadHolder(path)
	if err != nil || !held || got.PID != os.Getpid() || got.Host != host || got.Started.Before(before) {
		t.Errorf("ReadHolder = %+v, %v, %v, want this process on %s, now", got, held, err, host)
	}
}

func TestReadHolderNoLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := map[string]*string{
		"missing file": nil,
		"empty file":   new(""),
		"garbage":      new("{pid"),
	}
	for name, content := range tests {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if content != nil {
			writeFile(t, path, []byte(*content))
		}
		got, held, err := ReadHolder(path)
		if err != nil || held || got != (Holder{}) {
			t.Errorf("%s: ReadHolder = %+v, %v, %v, want none, not held", name, got, held, err)
		}
	}
}

// TestLockTakenOverFromDeadHolder has a child process take the lock and
// dies with SIGKILL: the lock file stays, and the next acquire succeeds.
func TestLockTakenOverFromDeadHolder(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "lock")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockHolderEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("lock holder said %q, %v, want locked", line, err)
	}

	_, err = AcquireLock(path, Holder{})
	if h, ok := LockHolder(err); !IsLocked(err) || !ok || h.PID != cmd.Process.Pid || h.Host != "holder-host" {
		t.Fatalf("AcquireLock while the child holds it: err = %v, holder %+v, want locked by pid %d", err, h, cmd.Process.Pid)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("pid %d on holder-host since ", cmd.Process.Pid)) {
		t.Errorf("error %q does not name the holder", err)
	}
	if h, held, err := ReadHolder(path); err != nil || !held || h.PID != cmd.Process.Pid || h.Command != "cutover upgrade --to=1.1.0" {
		t.Errorf("ReadHolder while the child holds it = %+v, %v, %v", h, held, err)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed = true
	if h, held, err := ReadHolder(path); err != nil || held || h.PID != cmd.Process.Pid {
		t.Errorf("ReadHolder after the holder died = %+v, %v, %v, want the dead holder, not held", h, held, err)
	}
	l, err := AcquireLock(path, Holder{Host: "node1", PID: 4321, Started: t0})
	if err != nil {
		t.Fatalf("AcquireLock after the holder died: %v", err)
	}
	defer l.Release()
	if h, held, _ := ReadHolder(path); !held || h.PID != 4321 {
		t.Errorf("holder after take-over = %+v, %v, want pid 4321, held", h, held)
	}
}
