package nodes

import (
	"context"
	"io"
	"time"
)

// command is one command to run on a node, as Run, RunOutput, RunShell and RunInput make it,
// and the reap of a command tag's leftovers.
type command struct {
	line   string // the Result's Command: the command line as the node's sh gets it
	shown  string // what error messages call the command
	script string // what runs: an argv line (exec) or shell code
	// exec says script is an argv line that runs in the place of the shell that runs it
	// (`exec SCRIPT`), rather than as its child: so the signal that kills the program reaches
	// cutover as such, and a process less waits on every node.
	exec       bool
	tag        string    // the command tag it is recorded under; "" for none
	reapFirst  bool      // over SSH, its session first kills what commands of tag left running
	ownSession bool      // over SSH, it has a session of its own, never the command shell
	input      io.Reader // RunInput's standard input, not under the watchdog over SSH; nil for the others
	out        io.Writer // where standard output goes; nil keeps it in the Result, up to the read limit
}

// shellCode is the command as the shell code that runs it: an argv line with exec ahead.
func (cmd *command) shellCode() string {
	if cmd.exec {
		return "exec " + cmd.script
	}
	return cmd.script
}

// outcome is how a command ended on its transport.
type outcome struct {
	code  int    // the exit code; -1 when the command did not run to an exit
	boot  string // the node's boot identity, where the transport knows it (Result.Boot)
	start uint64 // the command's start time (Result.Start); 0 when unknown
	// shellStatus says code is a command shell's status, which is 128+N for a command that
	// signal N killed.
	shellStatus bool
}

// transport is how a connection reaches its node: local for the master (local.go), SSH for
// the others (ssh_transport.go).
type transport interface {
	// run runs cmd until it exits or ctx, which holds the command timeout, ends, writing its
	// output to stdout and stderr. It returns how the command ended and, when it did not run
	// to an exit, why. A command stopped by ctx is killed with its process group before run
	// returns (see the package documentation).
	run(ctx context.Context, cmd *command, stdout, stderr io.Writer) (outcome, error)
	// reapsAhead reports whether a tagged command's session kills what commands of its tag
	// left running ahead of the command itself (SSH); otherwise the reap is a command of
	// its own.
	reapsAhead() bool
	// shell returns the transport's command shell for tag, held busy for the caller; nil
	// where there is none to use (see Conn.Prepare).
	shell(ctx context.Context, tag string, reap bool) (*remoteShell, error)
	fence() string     // the connection's fence (see fenceScript); "" locally
	files() fileSystem // the node's file operations
	alive() bool       // whether the connection can still be used
	close() error      // ends the connection
}

// exec runs cmd on the node's transport under the command timeout, and makes its Result and
// error: the one place where a command's deadline, output bounds, Result and error are made.
func (c *Conn) exec(ctx context.Context, cmd *command) (Result, error) {
	start := time.Now()
	runCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	stdout, stderr := newStdout(cmd.out), newTailBuffer(maxStderr)
	o, err := c.tr.run(runCtx, cmd, stdout.w, stderr)
	var timeout time.Duration
	if err != nil && runCtx.Err() != nil {
		// The command was stopped: by the caller, or by its timeout.
		if ctx.Err() != nil {
			err = ctx.Err()
		} else {
			err, timeout = runCtx.Err(), c.timeout
		}
	}
	res := Result{Node: c.name, Command: cmd.line, ExitCode: o.code, Stdout: stdout.bytes(), Stderr: stderr.Bytes(), Duration: time.Since(start)}
	if err != nil {
		res.ExitCode = -1
	} else {
		res.Boot, res.Start = o.boot, o.start
	}
	cerr := ended{node: c.name, command: cmd.shown, code: res.ExitCode, stderr: res.Stderr, timeout: timeout, err: err, cut: stdout.cut()}.error()
	if re, ok := cerr.(*runError); ok && o.shellStatus {
		re.signal = shellSignal(re.code)
	}
	return res, cerr
}

// ended is how a command ended, as its error is made of it.
type ended struct {
	node, command string
	code          int
	stderr        []byte
	timeout       time.Duration // the command timeout, when it ended the command; 0 otherwise
	err           error         // the transport or context error, if any
	cut           int           // the read limit its standard output passed; 0 when it did not
}

// error is the error of the command: nil for exit 0, unless its standard output passed the
// read limit: then the output kept is not all the command printed, and the error says so.
func (e ended) error() error {
	if e.err == nil && e.code == 0 && e.cut == 0 {
		return nil
	}
	re := &runError{node: e.node, command: e.command, code: e.code, tail: stderrTail(e.stderr), err: e.err, cut: e.cut, timeout: e.timeout}
	if e.err != nil {
		re.code = -1
	}
	return re
}
