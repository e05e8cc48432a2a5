package nodes_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/nodes/sshdtest"
)

// transports returns a local connection, an SSH connection and an SSH connection with a
// session per command, as on a node without bash (the watchdog tests' transports of the test
// login), each given cfg changes by edit, so one test checks they all behave the same.
func transports(t *testing.T, edit func(*nodes.SSHConfig)) []*nodes.Conn {
	t.Helper()
	c := sshdtest.Start(t, 1)
	var conns []*nodes.Conn
	for _, tr := range []watchdogTransport{
		{name: "local", cluster: c, node: localMaster},
		{name: "ssh", cluster: c, node: "node1"},
		{name: "ssh-session", cluster: c, node: "node1", plain: true},
	} {
		conns = append(conns, conn(t, tr.pool(t, edit), tr.node))
	}
	return conns
}

// transportName names how c runs commands: "local", "ssh" (in the connection's command shell)
// or "ssh-session" (a session per command).
func transportName(c *nodes.Conn) string {
	switch {
	case c.Local():
		return "local"
	case nodes.CommandShellOff(c):
		return "ssh-session"
	}
	return "ssh"
}

// TestRun runs the same command cases, of every way to run one (Run, RunShell, RunOutput and
// RunInput), over every transport.
func TestRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		argv       []string // Run when set, or RunOutput or RunInput
		script     string   // RunShell otherwise
		output     bool     // RunOutput: the standard output streamed, none kept
		input      *string  // RunInput with this standard input
		wantCode   int
		wantStdout string
		wantStderr string // suffix of Stderr
		wantErr    string // substring of the error after the node name; "" means no error
	}{
		{name: "ok", argv: []string{"echo", "hello"}, wantStdout: "hello\n"},
		{name: "quoted args", argv: []string{"printf", "%s|", "a b", "it's", "$(id)", "`id`", "", "x\ny", "ünï"},
			wantStdout: "a b|it's|$(id)|`id`||x\ny|ünï|"},
		{name: "reserved word is a plain word", argv: []string{"if"}, wantCode: 127, wantErr: `run "'if'": exit 127`},
		{name: "assignment is a plain word", argv: []string{"A=b"}, wantCode: 127, wantErr: "exit 127"},
		{name: "exit code", script: "exit 3", wantCode: 3, wantErr: `run "exit 3": exit 3`},
		{name: "exit code like a signal's", script: "exit 137", wantCode: 137, wantErr: `run "exit 137": exit 137`},
		{name: "empty standard input", script: "cat; echo read", wantStdout: "read\n"},
		{name: "stderr in error", script: "echo first >&2; echo 'it failed' >&2; exit 1", wantCode: 1,
			wantStderr: "first\nit failed\n", wantErr: `run "echo first >&2; echo 'it failed' >&2; exit 1": exit 1: first; it failed`},
		{name: "stdout and stderr", script: "echo out; echo err >&2", wantStdout: "out\n", wantStderr: "err\n"},
		{name: "shell syntax", script: `for i in 1 2 3; do printf "$i"; done; [ "$(echo x)" = x ] && echo ok`,
			wantStdout: "123ok\n"},
		{name: "stdout past the limit is an error", script: "head -c 5000000 /dev/zero", wantStdout: strings.Repeat("\x00", 4<<20),
			wantErr: `run "head -c 5000000 /dev/zero": its standard output passed cutover's read limit of 4194304 bytes`},
		{name: "stdout at the limit", script: "head -c 4194304 /dev/zero", wantStdout: strings.Repeat("\x00", 4<<20)},
		{name: "stderr keeps the end", script: "head -c 100000 /dev/zero | tr '\\000' x >&2; echo END >&2",
			wantStderr: strings.Repeat("x", 64<<10-4) + "END\n"},
		{name: "output streamed", argv: []string{"printf", "%s|", "a b", "it's"}, output: true, wantStdout: "a b|it's|"},
		{name: "output of a failing command", argv: []string{"sh", "-c", "echo out; echo err >&2; exit 2"}, output: true,
			wantCode: 2, wantStdout: "out\n", wantStderr: "err\n", wantErr: `run "sh -c 'echo out; echo err >&2; exit 2'": exit 2: err`},
		{name: "input read", argv: []string{"cat"}, input: ptr("line one\nline two\n"), wantStdout: "line one\nline two\n"},
		{name: "input empty", argv: []string{"sh", "-c", "cat; echo read"}, input: ptr(""), wantStdout: "read\n"},
		{name: "input and exit code", argv: []string{"sh", "-c", "cat >/dev/null; echo err >&2; exit 4"}, input: ptr("x"),
			wantCode: 4, wantStderr: "err\n", wantErr: `run "sh -c 'cat >/dev/null; echo err >&2; exit 4'": exit 4: err`},
	}
	for _, c := range transports(t, nil) {
		for _, tt := range tests {
			t.Run(transportName(c)+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				var res nodes.Result
				var err error
				var streamed bytes.Buffer
				switch {
				case tt.output:
					res, err = c.RunOutput(context.Background(), &streamed, tt.argv...)
					if len(res.Stdout) != 0 {
						t.Errorf("RunOutput kept %d bytes of standard output, want none", len(res.Stdout))
					}
					res.Stdout = streamed.Bytes()
				case tt.input != nil:
					res, err = c.RunInput(context.Background(), strings.NewReader(*tt.input), tt.argv...)
				case tt.argv != nil:
					res, err = c.Run(context.Background(), tt.argv...)
				default:
					res, err = c.RunShell(context.Background(), tt.script)
				}
				if res.ExitCode != tt.wantCode {
					t.Errorf("ExitCode = %d, want %d (err %v)", res.ExitCode, tt.wantCode, err)
				}
				if res.Node != c.Node() {
					t.Errorf("Node = %q, want %q", res.Node, c.Node())
				}
				if got := string(res.Stdout); got != tt.wantStdout {
					t.Errorf("Stdout = %.80q (%d bytes), want %.80q (%d bytes)", got, len(got), tt.wantStdout, len(tt.wantStdout))
				}
				if tt.wantStderr != "" && string(res.Stderr) != tt.wantStderr {
					t.Errorf("Stderr = %.80q (%d bytes), want %.80q (%d bytes)", res.Stderr, len(res.Stderr), tt.wantStderr, len(tt.wantStderr))
				}
				if tt.wantErr == "" {
					if err != nil {
						t.Fatalf("err = %v, want nil", err)
					}
					return
				}
				if err == nil {
					t.Fatalf("err = nil, want %q", tt.wantErr)
				}
				if !strings.HasPrefix(err.Error(), c.Node()+": ") || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %q, want %q after the node name", err, tt.wantErr)
				}
				if code, ok := nodes.ExitCode(err); !ok || code != tt.wantCode {
					t.Errorf("ExitCode(err) = %d, %v, want %d, true", code, ok, tt.wantCode)
				}
				if nodes.IsTimeout(err) {
					t.Errorf("IsTimeout(%v) = true, want false", err)
				}
			})
		}
	}
}

// TestRunOutput checks that RunOutput streams output of any length, and that RunInput, like
// Run, fails a command whose output passes the read limit, naming the node, the command and
// the limit.
func TestRunOutput(t *testing.T) {
	t.Parallel()
	const n = 10 << 20
	for _, c := range transports(t, nil) {
		t.Run(transportName(c), func(t *testing.T) {
			t.Parallel()
			var out countWriter
			res, err := c.RunOutput(context.Background(), &out, "head", "-c", strconv.Itoa(n), "/dev/zero")
			if err != nil || out.n != n || len(res.Stdout) != 0 {
				t.Errorf("RunOutput of %d bytes = %d streamed, %d kept, %v; want all streamed, none kept", n, out.n, len(res.Stdout), err)
			}
			if nodes.IsOutputCut(err) {
				t.Errorf("IsOutputCut(%v) = true", err)
			}
			_, err = c.RunInput(context.Background(), strings.NewReader(""), "head", "-c", strconv.Itoa(n), "/dev/zero")
			want := fmt.Sprintf("%s: run \"head -c %d /dev/zero\": its standard output passed cutover's read limit of %d bytes", c.Node(), n, 4<<20)
			if err == nil || !strings.HasPrefix(err.Error(), want) || !nodes.IsOutputCut(err) {
				t.Errorf("RunInput printing %d bytes = %v, want %q", n, err, want)
			}
		})
	}
}

// ptr returns a pointer to s.
func ptr(s string) *string { return &s }

// countWriter counts what is written to it.
type countWriter struct{ n int }

func (w *countWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	return len(p), nil
}

func TestRunCommandLine(t *testing.T) {
	t.Parallel()
	for _, c := range transports(t, nil) {
		t.Run(transportName(c), func(t *testing.T) {
			res, err := c.Run(context.Background(), "echo", "a b")
			if err != nil {
				t.Fatal(err)
			}
			if want := "echo 'a b'"; res.Command != want {
				t.Errorf("Run: Command = %q, want %q", res.Command, want)
			}
			res, err = c.RunShell(context.Background(), "echo 'x'")
			if err != nil {
				t.Fatal(err)
			}
			if want := `sh -c 'echo '\''x'\'''`; res.Command != want {
				t.Errorf("RunShell: Command = %q, want %q", res.Command, want)
			}
			if _, err := c.Run(context.Background()); err == nil {
				t.Error("Run() with no argv: err = nil, want an error")
			}
			// A nil input is an empty one.
			if res, err := c.RunInput(context.Background(), nil, "sh", "-c", "cat; echo read"); err != nil || string(res.Stdout) != "read\n" {
				t.Errorf("RunInput with a nil input = %q, %v; want \"read\\n\", nil", res.Stdout, err)
			}
		})
	}
}

func TestRunTimeout(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1)
	for _, tr := range []struct{ name, node string }{{"local", localMaster}, {"ssh", "node1"}} {
		node := tr.node
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			// On a loaded machine the command may not have started when a short
			// timeout ends it: that try tells nothing, so it is made again with a
			// longer timeout.
			timeout := 500 * time.Millisecond
			for try := 1; !runTimesOut(t, c, node, timeout); try++ {
				if try == 3 {
					t.Fatalf("in 3 tries, up to a timeout of %s, the command was never seen running before its timeout", timeout)
				}
				timeout *= 4
			}
		})
	}
}

// runTimesOut is one try of TestRunTimeout on node of the cluster: a command
// that prints, then sleeps 29s, is stopped by the timeout, with its output so
// far, and nothing of it is left. It reports false when the timeout came
// before the command was seen running, having checked only that nothing of it
// was left.
func runTimesOut(t *testing.T, cluster *sshdtest.Cluster, node string, timeout time.Duration) bool {
	c := conn(t, newPool(t, cluster, func(cfg *nodes.SSHConfig) { cfg.CommandTimeout = timeout }), node)
	// A unique sleep duration marks the shell and the sleep, so the test finds
	// the command by its command line.
	marker := fmt.Sprintf("29.%09d", time.Now().Nanosecond())
	returned := make(chan struct{})
	seen := make(chan bool, 1)
	go func() {
		for {
			if len(processesWith(t, marker)) >= 2 {
				seen <- true
				return
			}
			select {
			case <-returned:
				seen <- false
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	start := time.Now()
	res, err := c.RunShell(context.Background(), "echo started; sleep "+marker+"; true")
	took := time.Since(start)
	close(returned)
	running := <-seen
	if !nodes.IsTimeout(err) {
		t.Fatalf("err = %v, want a timeout", err)
	}
	// Whether or not it had started, nothing of the command is left.
	defer waitNoProcess(t, marker)
	if !running {
		t.Logf("the command was stopped by its %s timeout before it was seen running; once more with a longer one", timeout)
		return false
	}
	if _, ok := nodes.ExitCode(err); ok {
		t.Errorf("ExitCode(%v) reports an exit, want none", err)
	}
	if res.ExitCode != -1 {
		t.Errorf("ExitCode = %d, want -1", res.ExitCode)
	}
	if want := "timed out after " + timeout.String(); !strings.Contains(err.Error(), want) {
		t.Errorf("err = %q, want it to say %q", err, want)
	}
	if string(res.Stdout) != "started\n" {
		t.Errorf("Stdout = %q, want the output printed before the timeout", res.Stdout)
	}
	// A Run that waited for the command would take its 29s sleep.
	if took > 20*time.Second {
		t.Errorf("took %s, want Run to return at its %s timeout, not at the command's end", took, timeout)
	}
	// The connection is still usable afterwards.
	if _, err := c.Run(context.Background(), "true"); err != nil {
		t.Errorf("command after a timeout: %v", err)
	}
	return true
}

// waitNoProcess fails unless, within a few seconds, no process's command
// line contains marker: a killed command must not live on.
func waitNoProcess(t *testing.T, marker string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids := processesWith(t, marker)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("processes running %q remain: %v", marker, pids)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// processesWith lists the processes whose command line contains s.
func processesWith(t *testing.T, s string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Error(err) // may run outside the test's goroutine
		return nil
	}
	var pids []string
	for _, e := range entries {
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(cmdline, []byte(s)) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

func TestRunCancel(t *testing.T) {
	t.Parallel()
	for _, c := range transports(t, nil) {
		t.Run(transportName(c), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(300*time.Millisecond, cancel)
			start := time.Now()
			res, err := c.RunShell(ctx, "sleep 30")
			if !errors.Is(err, context.Canceled) {
				t.Errorf("err = %v, want context.Canceled", err)
			}
			if nodes.IsTimeout(err) {
				t.Errorf("IsTimeout(%v) = true, want false for a cancellation", err)
			}
			if res.ExitCode != -1 {
				t.Errorf("ExitCode = %d, want -1", res.ExitCode)
			}
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("took %s after cancel, want well under 3s", took)
			}
		})
	}
}

func TestRunSignal(t *testing.T) {
	t.Parallel()
	conns := transports(t, nil)
	// Also as root, whose login shell is bash.
	root := conn(t, newPool(t, sshdtest.Start(t, 1, sshdtest.WithRootLogin()), nil), "node1")
	for i, c := range append(conns, root) {
		name := transportName(c)
		if i == len(conns) {
			name = "ssh-root"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// RunShell's script is the command's own shell: killing it
			// kills the command line as given.
			res, err := c.RunShell(context.Background(), "echo before; kill -9 $$")
			if name == "local" || name == "ssh-session" {
				if err == nil || !strings.Contains(err.Error(), "killed by signal") {
					t.Fatalf("err = %v, want it to say the command was killed by a signal", err)
				}
				if code, ok := nodes.ExitCode(err); ok {
					t.Errorf("ExitCode(err) = %d, true; want no exit", code)
				}
				if res.ExitCode != -1 {
					t.Errorf("Result.ExitCode = %d, want -1", res.ExitCode)
				}
			} else {
				// A command shell has the status sh gives: 128+9, which it says may be SIGKILL.
				if err == nil || !strings.Contains(err.Error(), "exit 137 (as sh reports a command killed by signal SIGKILL)") {
					t.Fatalf("err = %v, want exit 137 said to be what sh reports for SIGKILL", err)
				}
				if code, ok := nodes.ExitCode(err); !ok || code != 137 || res.ExitCode != 137 {
					t.Errorf("ExitCode(err) = %d, %v, Result.ExitCode = %d; want 137", code, ok, res.ExitCode)
				}
			}
			if string(res.Stdout) != "before\n" {
				t.Errorf("Stdout = %q, want the output before the signal", res.Stdout)
			}
		})
	}
}

// TestRunLeavesBackgroundProcess runs a command that starts a process which
// keeps the output open, as a careless daemon start does: the command still
// returns soon after it exits, with its output and exit code, and the
// process lives on.
func TestRunLeavesBackgroundProcess(t *testing.T) {
	t.Parallel()
	for _, c := range transports(t, nil) {
		t.Run(transportName(c), func(t *testing.T) {
			t.Parallel()
			marker := fmt.Sprintf("6.%09d", time.Now().Nanosecond())
			start := time.Now()
			res, err := c.RunShell(context.Background(), "sleep "+marker+" & echo started")
			took := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Stdout) != "started\n" || res.ExitCode != 0 {
				t.Errorf("Stdout = %q, ExitCode = %d; want started, 0", res.Stdout, res.ExitCode)
			}
			if took > 4*time.Second {
				t.Errorf("took %s, want the command back within about 2s of its exit", took)
			}
			// The background process may not have exec'd sleep yet when the command returns.
			var pids []string
			for deadline := time.Now().Add(3 * time.Second); len(pids) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				pids = processesWith(t, "sleep\x00"+marker)
			}
			if len(pids) == 0 {
				t.Error("the background process did not survive the command")
			}
			for _, pid := range pids {
				if n, err := strconv.Atoi(pid); err == nil {
					syscall.Kill(n, syscall.SIGKILL)
				}
			}
		})
	}
}

// TestRunShellOwnJobs: a RunShell script starts without positional parameters, and its
// `wait` waits for its own jobs only, never for the watchdog's watcher, which ends only after
// the command (a watchdog whose shell ran the script with the watcher as its job would hang
// here); a Run program killed by a signal is reported as such.
func TestRunShellOwnJobs(t *testing.T) {
	t.Parallel()
	conns := transports(t, func(cfg *nodes.SSHConfig) { cfg.CommandTimeout = 20 * time.Second })
	for _, c := range conns {
		t.Run(transportName(c), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			res, err := c.RunShell(ctx, `echo "$#"; sleep 0.1 & wait; echo waited`)
			if err != nil {
				t.Fatalf("a script that waits for its job: %v (the watcher taken for its job?)", err)
			}
			if got := string(res.Stdout); got != "0\nwaited\n" {
				t.Errorf("stdout = %q, want no positional parameters, then the wait's end", got)
			}
			_, err = c.Run(ctx, "sh", "-c", "kill -9 $$")
			if err == nil || !strings.Contains(err.Error(), "killed by signal") {
				t.Errorf("Run of a program that kills itself: %v, want it killed by a signal", err)
			}
		})
	}
}
