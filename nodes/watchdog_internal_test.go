package nodes

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKillerScriptQuoting checks that the killer's text can stand in single
// quotes inside the wrapper, as the wrapper puts it.
func TestKillerScriptQuoting(t *testing.T) {
	t.Parallel()
	if strings.ContainsRune(killerScript, '\'') {
		t.Error("killerScript contains a single quote; the wrapper quotes it with single quotes")
	}
}

func TestCheckCommandTag(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tag string
		ok  bool
	}{
		{"", true},
		{"run-7", true},
		{"0-a-b-c", true},
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
		{"Run-7", false},
		{"run_7", false},
		{"run.7", false},
		{"run 7", false},
		{"../x", false},
		{"a/b", false},
		{"$(id)", false},
		{"*", false},
		{"run-7\n", false},
	}
	for _, tt := range tests {
		err := checkCommandTag(tt.tag)
		if (err == nil) != tt.ok {
			t.Errorf("checkCommandTag(%q) = %v, want ok %v", tt.tag, err, tt.ok)
		}
	}
}

// TestWatcherNeverKillsAReusedGroup checks that the watcher signals only its
// command's process group: once the command's processes are gone, its group
// number must not pass to another process before the watcher is done with
// it. The command's shell ends at once; a process that ignores SIGTERM and
// ends a moment later joins its group; then the command's standard input
// closes without "done" (cutover died), which makes the watcher kill the
// group. A bystander is placed at the group's number (through ns_last_pid)
// as soon as the number is free again, and must outlive the watcher.
func TestWatcherNeverKillsAReusedGroup(t *testing.T) {
	t.Parallel()
	const lastPid = "/proc/sys/kernel/ns_last_pid"
	if err := os.WriteFile(lastPid, []byte("1000"), 0); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("placing a process at a chosen pid needs a writable %s: %v", lastPid, err)
		}
		t.Skipf("cannot place a process at a chosen pid: %v", err)
	}
	for round := 0; round < 3; round++ {
		p, err := startLocal(&command{script: "exit 0"}, "local", io.Discard, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		<-p.exited
		pg := p.cmd.Process.Pid
		lingerer := exec.Command("sh", "-c", `trap "" TERM; sleep 0.3`)
		lingerer.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pg}
		if err := lingerer.Start(); err != nil {
			t.Fatal(err)
		}
		go lingerer.Wait() // reaped at once, so that its number and group are free at once
		p.stdin.Close()    // end of file without "done": the watcher kills group pg

		// Place a bystander, a process group of its own, at pid pg as soon as pg is free.
		var bystander *exec.Cmd
		deadline := time.Now().Add(5 * time.Second)
		for bystander == nil && time.Now().Before(deadline) {
			if err := os.WriteFile(lastPid, []byte(strconv.Itoa(pg-1)), 0); err != nil {
				t.Fatal(err)
			}
			c := exec.Command("sleep", "30")
			c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			if c.Process.Pid == pg {
				bystander = c
				break
			}
			c.Process.Kill()
			c.Wait()
		}
		p.closeOutput(killWait)
		if bystander == nil {
			continue // another process took the number first; try again
		}
		// The watcher is gone once the output is closed; give a late signal time to land.
		time.Sleep(watcherGrace + 500*time.Millisecond)
		alive := bystander.Process.Signal(syscall.Signal(0)) == nil
		if alive {
			// Reap it if it is a zombie already: Signal(0) succeeds on zombies.
			var st syscall.WaitStatus
			if wpid, _ := syscall.Wait4(pg, &st, syscall.WNOHANG, nil); wpid == pg {
				alive = false
			}
		}
		bystander.Process.Kill()
		bystander.Wait()
		if !alive {
			t.Fatalf("the watcher of the command with process group %d killed the unrelated process given that number after the command ended", pg)
		}
		return
	}
	t.Fatal("could not place a process at a finished command's group number in 3 rounds")
}

// TestKillerWaitsForTheGroup runs the killer, with and without pgrep, in the
// process group of a command that ignores SIGTERM and finishes its work
// 0.3s later: the killer must give it that time (less than watcherGrace),
// then kill what is left, itself included, and remove the record.
func TestKillerWaitsForTheGroup(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, withPgrep := range []bool{true, false} {
		name := "pgrep"
		if !withPgrep {
			name = "proc"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if _, err := exec.LookPath("pgrep"); withPgrep && err != nil {
				if os.Getenv("CI") == "true" {
					t.Fatal("pgrep (procps) is missing")
				}
				t.Skip("pgrep (procps) is missing")
			}
			// A PATH with sleep and rm, and pgrep only when asked for.
			bin := t.TempDir()
			progs := []string{"sleep", "rm"}
			if withPgrep {
				progs = append(progs, "pgrep")
			}
			for _, p := range progs {
				full, err := exec.LookPath(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(full, bin+"/"+p); err != nil {
					t.Fatal(err)
				}
			}
			dir := t.TempDir()
			late, rec := dir+"/late", dir+"/record"
			if err := os.WriteFile(rec, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			ready := dir + "/ready"
			cmd := exec.Command(sh, "-c", `trap "" TERM; : > "$1"; sleep 0.3; echo done > "$0"; exec sleep 30`, late, ready)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				if _, err := os.Stat(ready); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the command did not start within 10s")
				}
			}
			pg := cmd.Process.Pid
			// The watcher ignores SIGTERM, and so does the killer it becomes.
			killer := exec.Command(sh, "-c", `trap "" TERM; exec "$0" -c "$1" cutover-kill "$2" "$3"`, sh, killerScript, strconv.Itoa(pg), rec)
			killer.Env = []string{"PATH=" + bin}
			killer.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pg}
			out, err := killer.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Errorf("the killer ended with %v (%s); want it killed by its own SIGKILL", err, out)
			}
			cmd.Wait()
			if data, _ := os.ReadFile(late); string(data) != "done\n" {
				t.Error("the killer did not wait for the command that ignores SIGTERM")
			}
			if _, err := os.Stat(rec); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the record is still there: %v", err)
			}
			if err := syscall.Kill(-pg, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("process group %d still has processes (kill -0: %v)", pg, err)
			}
		})
	}
}

// TestRecordDirMatchesScript checks that cutover looks for the master's command records where
// the watchdog writes them (recordDirScript): as root, and as a login that cannot write /run,
// with a home and without one.
func TestRecordDirMatchesScript(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("the test runs the script as root and as another user: it needs root")
		}
		t.Skip("the test runs the script as root and as another user: it needs root (with CI=true this is a failure)")
	}
	for _, tc := range []struct {
		name        string
		uid         uint32
		home        string
		runWritable bool
	}{
		{"root", 0, "/root", true},
		{"another login", 65534, "/home/someone", false},
		{"another login without a home", 65534, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("/bin/sh", "-c", recordDirScript+`printf %s "$cutover_dir"`)
			cmd.Env = []string{"PATH=" + localPath}
			if tc.home != "" {
				cmd.Env = append(cmd.Env, "HOME="+tc.home)
			}
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: tc.uid, Gid: tc.uid}}
			out, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			if got, want := recordDir(tc.runWritable, tc.home), string(out); got != want {
				t.Errorf("recordDir = %q, the watchdog's directory %q", got, want)
			}
		})
	}
}
