package nodes

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"
)

// RunInput runs argv on the node (quoted with QuoteArgs, run by sh) with
// input as its standard input, followed by end of file, and returns like
// Run. Unlike Run, the command does not run under the watchdog, which needs
// standard input for itself: it must be one that ends by itself once its
// input ends, as `tar -x` and `cat` do. When cutover dies, or ctx or the
// command timeout ends, the input ends and the command is expected to give
// up; locally it is also killed with cutover. An error reading input ends
// the input the same way.
func (c *Conn) RunInput(ctx context.Context, input io.Reader, argv ...string) (Result, error) {
	if len(argv) == 0 {
		return Result{Node: c.name, ExitCode: -1}, fmt.Errorf("%s: run: no command given", c.name)
	}
	line := QuoteArgs(argv)
	start := time.Now()
	runCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	stdout, stderr := newStdout(nil), newTailBuffer(maxStderr)
	var code int
	var err error
	if c.ssh != nil {
		code, err = c.ssh.runInput(runCtx, line, input, stdout.w, stderr)
	} else {
		code, err = runInputLocal(runCtx, line, input, stdout.w, stderr)
	}
	timedOut := false
	if err != nil && runCtx.Err() != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		} else {
			err, timedOut = runCtx.Err(), true
		}
	}
	res := Result{Node: c.name, Command: line, ExitCode: code, Stdout: stdout.bytes(), Stderr: stderr.Bytes(), Duration: time.Since(start)}
	if err != nil {
		res.ExitCode = -1
	}
	return res, commandError(c.name, line, res.ExitCode, res.Stderr, timedOut, c.timeout, err, stdout.cut())
}

// runInputLocal runs line with sh on this host, in a process group of its
// own that dies with cutover, reading input.
func runInputLocal(ctx context.Context, line string, input io.Reader, stdout, stderr io.Writer) (int, error) {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", line)
	cmd.Env = LocalEnv()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = input, stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = killWait
	err := cmd.Run()
	if ctx.Err() != nil {
		return -1, ctx.Err()
	}
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() >= 0 {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return -1, err
	}
	return 0, nil
}
