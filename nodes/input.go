package nodes

import (
	"context"
	"fmt"
	"io"
	"time"
)

// RunInput runs argv on the node (quoted with QuoteArgs, run by sh) with
// input as its standard input, followed by end of file, and returns like
// Run. Unlike Run, the command does not run under the watchdog, which needs
// standard input for itself: it must be one that ends by itself once its
// input ends, as `tar -x` and `cat` do. When cutover dies, or ctx or the
// command timeout ends, the input ends and the command is expected to give
// up. Locally the watchdog runs it all the same, with its pipe as descriptor
// 3, so there its whole process group is killed then, as Run's commands are.
// An error reading input ends the input the same way.
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

// runInputLocal runs line with sh on this host, under the watchdog in its
// "input" mode: in a process group of its own, all of which dies with
// cutover or when ctx ends, reading input.
func runInputLocal(ctx context.Context, line string, input io.Reader, stdout, stderr io.Writer) (int, error) {
	p, err := startLocal(line, "", "", input, stdout, stderr)
	if err != nil {
		return -1, err
	}
	select {
	case <-p.exited:
		p.finish()
	case <-ctx.Done():
		p.stop()
		return -1, ctx.Err()
	}
	return p.result()
}
