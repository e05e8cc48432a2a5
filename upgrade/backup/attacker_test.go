package backup

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// attackerName is the throwaway system user the attack tests act as: an unprivileged local
// user who owns a directory in the application's state, like the audit's uid nobody.
const attackerName = "cutover-atk-backup"

// attacker is that user.
type attacker struct{ uid, gid uint32 }

var (
	attackerOnce sync.Once
	attackerErr  error
	attackerMade bool
	theAttacker  attacker
)

// newAttacker returns the unprivileged user, creating it (as test/setup.sh creates
// cutover-test) when running as root. Without root the test is skipped, except under
// CI=true, where it fails: CI must run the attacks.
func newAttacker(t *testing.T) attacker {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("this attack test needs root under CI=true: it creates an unprivileged user and acts as it")
		}
		t.Skip("needs root: it creates an unprivileged user and acts as it (under CI=true this fails instead)")
	}
	attackerOnce.Do(func() {
		u, err := user.Lookup(attackerName)
		if err != nil {
			var made error
			for i := 0; i < 10; i++ {
				out, err := exec.Command("useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
					"--shell", "/usr/sbin/nologin", attackerName).CombinedOutput()
				if err == nil {
					attackerMade = true
					break
				}
				made = fmt.Errorf("useradd %s: %v: %s", attackerName, err, out)
				time.Sleep(200 * time.Millisecond) // another package's test may hold /etc/passwd
			}
			if u, err = user.Lookup(attackerName); err != nil {
				attackerErr = fmt.Errorf("%w; %v", err, made)
				return
			}
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		theAttacker = attacker{uint32(uid), uint32(gid)}
	})
	if attackerErr != nil {
		t.Fatalf("create the unprivileged user %s: %v", attackerName, attackerErr)
	}
	return theAttacker
}

// TestMain removes the unprivileged user when a test made it.
func TestMain(m *testing.M) {
	code := m.Run()
	if attackerMade {
		_ = exec.Command("userdel", attackerName).Run()
	}
	os.Exit(code)
}

// run runs a shell script as the attacker, in dir.
func (a attacker) run(t *testing.T, dir, script string) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: a.uid, Gid: a.gid, Groups: []uint32{}}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("as %s in %s: %s: %v\n%s", attackerName, dir, script, err, out)
	}
}

// reachable lets the attacker reach the fixture: the temporary directories Go makes are 0700.
func (f *fixture) reachable() {
	f.t.Helper()
	for d := f.base; d != filepath.Dir(os.TempDir()) && d != "/"; d = filepath.Dir(d) {
		if d == os.TempDir() {
			break
		}
		if err := os.Chmod(d, 0o755); err != nil {
			f.t.Fatal(err)
		}
	}
}
