//go:build !release

package upgrade

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The test hooks: crash points that kill (or cut the power of) cutover, and stage holds. The
// release build leaves this file out (testhooks_release.go stands in): there the environment
// variables that drive them do nothing.

var crash struct {
	once     sync.Once
	at       int
	powerCut string
	log      *os.File
	mu       sync.Mutex
	n        int
}

// The shutdown request of Linux's file systems (ext4, xfs, btrfs, f2fs), and its flag that
// drops what the file system's log has not yet committed: a power cut, as xfstests' godown
// makes it.
const (
	fsIOCShutdown         = 0x8004587d // _IOR('X', 125, __u32)
	fsGoingDownNoLogFlush = 2
)

// inFlightDelay is how long after a command started a crash point of that command kills.
const inFlightDelay = 30 * time.Millisecond

// crashPoint counts one crash point and, when it is the one CrashAtEnv names, kills the
// process: at once, or while the command runs when inFlight is set.
func crashPoint(inFlight bool, format string, args ...any) {
	crash.once.Do(func() {
		crash.at, _ = strconv.Atoi(os.Getenv(CrashAtEnv))
		crash.powerCut = os.Getenv(CrashPowerCutEnv)
		if p := os.Getenv(CrashLogEnv); p != "" {
			crash.log, _ = os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		}
	})
	if crash.at == 0 && crash.log == nil {
		return
	}
	crash.mu.Lock()
	crash.n++
	n := crash.n
	if crash.log != nil {
		fmt.Fprintf(crash.log, "%d %s\n", n, strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", `\n`))
	}
	crash.mu.Unlock()
	if n != crash.at {
		return
	}
	if inFlight {
		go func() {
			time.Sleep(inFlightDelay)
			die()
		}()
		return
	}
	die()
	select {} // the signal is on its way
}

// die ends the process at its crash point: SIGKILL, or a power cut when CrashPowerCutEnv is
// set.
func die() {
	if crash.powerCut != "" {
		powerCut()
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
}

// powerCut cuts the power of the file system CrashPowerCutEnv names while no code of this
// process runs: nothing may follow a power cut, but a goroutine that went on between the
// shutdown and the kill would see its writes fail and act on it (undo, exit). So the process
// starts its own program with powerCutOfEnv and stops itself (SIGSTOP stops every thread);
// that program waits until it is stopped, shuts the file system down and kills it
// (powerCutOf). Where the program cannot be started, the shutdown and the kill are done here.
func powerCut() {
	exe, err := os.Executable()
	if err == nil {
		env := append(os.Environ(), fmt.Sprintf("%s=%d", powerCutOfEnv, os.Getpid()))
		_, err = syscall.ForkExec(exe, []string{exe}, &syscall.ProcAttr{Env: env, Files: []uintptr{0, 1, 2}})
	}
	if err == nil {
		_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		select {} // killed while stopped
	}
	fmt.Fprintf(os.Stderr, "cutover: crash point: starting the power cut: %v\n", err)
	if err := shutDown(crash.powerCut); err != nil {
		fmt.Fprintf(os.Stderr, "cutover: crash point: %v\n", err)
	}
}

// stoppedWait bounds powerCutOf's wait for the process to stop.
const stoppedWait = 5 * time.Second

func init() {
	if pid, err := strconv.Atoi(os.Getenv(powerCutOfEnv)); err == nil && pid > 0 {
		os.Exit(powerCutOf(pid, os.Getenv(CrashPowerCutEnv)))
	}
}

// powerCutOf is the program powerCut starts: once process pid is stopped, it shuts down the
// file system at mount and kills pid. It returns the exit code.
func powerCutOf(pid int, mount string) int {
	code := 0
	for deadline := time.Now().Add(stoppedWait); ; time.Sleep(time.Millisecond) {
		if stopped(pid) {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "cutover: crash point: process %d did not stop in %s; the power is cut anyway\n", pid, stoppedWait)
			code = 1
			break
		}
	}
	if err := shutDown(mount); err != nil {
		fmt.Fprintf(os.Stderr, "cutover: crash point: %v\n", err)
		code = 1
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	return code
}

// stopped reports whether every thread of process pid is stopped (its state in /proc is T).
func stopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, t := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
		// The state follows the command name, which is in parentheses and may hold anything.
		i := strings.LastIndexByte(string(data), ')')
		if err != nil || i < 0 || i+2 >= len(data) || data[i+2] != 'T' {
			return false
		}
	}
	return true
}

// shutDown shuts down the file system mounted at mount, dropping what is not on its stable
// storage yet.
func shutDown(mount string) error {
	fd, err := unix.Open(mount, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("cutting the power of %s: %w", mount, err)
	}
	defer unix.Close(fd)
	if err := unix.IoctlSetPointerInt(fd, fsIOCShutdown, fsGoingDownNoLogFlush); err != nil {
		return fmt.Errorf("cutting the power of %s: %w", mount, err)
	}
	return nil
}

// holdAt waits while a hold is set for stage.
func holdAt(ctx context.Context, stage string) error {
	dir := os.Getenv(HoldDirEnv)
	if dir == "" {
		return nil
	}
	reached := filepath.Join(dir, "reached")
	if err := os.MkdirAll(reached, 0o700); err == nil {
		_ = os.WriteFile(filepath.Join(reached, stage), nil, 0o600)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hold", stage)); err != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
