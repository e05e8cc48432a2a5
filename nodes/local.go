package nodes

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// execLocal runs line with sh on this host under the watchdog (see
// watchdog.go), with the given timeout. It returns the exit code (-1 when
// the command did not run to an exit), the bounded output, and the error
// that stopped it, if any. A command stopped by its timeout or ctx is
// killed with its process group before execLocal returns.
func execLocal(ctx context.Context, line string, timeout time.Duration, tag, node string, out *stdoutSink) (code int, stdout, stderr []byte, timedOut bool, err error) {
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	errBuf := newTailBuffer(maxStderr)
	p, err := startLocal(line, tag, node, out.w, errBuf)
	if err != nil {
		return -1, nil, nil, false, err
	}
	stopped := false
	select {
	case <-p.exited:
		p.finish()
	case <-runCtx.Done():
		stopped = true
		p.stop()
	}
	stdout, stderr = out.bytes(), errBuf.Bytes()

	ps := p.cmd.ProcessState
	code = -1
	if ps != nil {
		code = ps.ExitCode() // -1 when killed by a signal
	}
	switch {
	case stopped && ctx.Err() != nil:
		return -1, stdout, stderr, false, ctx.Err()
	case stopped:
		return -1, stdout, stderr, true, runCtx.Err()
	case p.waitErr == nil:
		return 0, stdout, stderr, false, nil
	case code >= 0:
		return code, stdout, stderr, false, nil
	}
	if ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -1, stdout, stderr, false, fmt.Errorf("killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
		}
	}
	return -1, stdout, stderr, false, p.waitErr
}

// localProc is a command started by startLocal.
type localProc struct {
	cmd     *exec.Cmd
	stdin   *os.File      // the write end of the command's standard input
	exited  chan struct{} // closed once the shell has exited and been reaped
	waitErr error         // cmd.Wait's error; set before exited is closed
	output  chan struct{} // closed once standard output and error are at EOF
	readers []*os.File    // the read ends of standard output and error
}

// startLocal starts line under the watchdog: sh in a process group of its
// own, killed by the kernel when cutover dies (Pdeathsig), reading a pipe
// that cutover holds. Output is copied to stdout and stderr.
func startLocal(line, tag, node string, stdout, stderr io.Writer) (*localProc, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd := exec.Command("/bin/sh", watchdogArgs("local", line, tag, node)...)
	cmd.Env = LocalEnv()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &localProc{cmd: cmd, stdin: inW, exited: make(chan struct{}), output: make(chan struct{}), readers: []*os.File{outR, errR}}

	// Pdeathsig fires when the thread that started the process exits, not
	// the process: keep this goroutine on its thread until the shell exits,
	// so that the Go runtime cannot retire the thread meanwhile.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	err = <-started
	// The child has its own copies now (or never will).
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, err
	}
	var wg sync.WaitGroup
	for i, w := range []io.Writer{stdout, stderr} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			io.Copy(w, p.readers[i])
		}()
	}
	go func() {
		wg.Wait()
		close(p.output)
	}()
	return p, nil
}

// finish ends a command that exited by itself: it tells the watcher so,
// which then leaves the process group alone, and waits for the output as
// long as outputGrace.
func (p *localProc) finish() {
	p.stdin.Write([]byte("done\n")) // fails only when the watcher is gone
	p.stdin.Close()
	p.closeOutput(outputGrace)
}

// stop kills a running command: closing its standard input makes the
// watcher kill the process group, and the watcher's end closes the output.
// Should that take longer than killWait, the group is killed here.
func (p *localProc) stop() {
	p.stdin.Close()
	deadline := time.NewTimer(killWait)
	defer deadline.Stop()
	if !receivedBefore(p.exited, deadline.C) || !receivedBefore(p.output, deadline.C) {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
	p.closeOutput(0)
}

// receivedBefore reports whether ch is closed before deadline fires.
func receivedBefore(ch <-chan struct{}, deadline <-chan time.Time) bool {
	select {
	case <-ch:
		return true
	case <-deadline:
		return false
	}
}

// closeOutput waits up to grace for the output to reach EOF, then stops
// reading it: a process left running may hold it open forever.
func (p *localProc) closeOutput(grace time.Duration) {
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.output:
	case <-t.C:
	}
	for _, r := range p.readers {
		r.Close()
	}
	<-p.output
}

// runLocal runs body locally and fills a Result whose Command is line; see
// Conn.Run.
func (c *Conn) runLocal(ctx context.Context, line, shown, body, tag string, out io.Writer) (Result, error) {
	start := time.Now()
	sink := newStdout(out)
	code, stdout, stderr, timedOut, err := execLocal(ctx, body, c.timeout, tag, c.name, sink)
	res := Result{Node: c.name, Command: line, ExitCode: code, Stdout: stdout, Stderr: stderr, Duration: time.Since(start)}
	return res, commandError(c.name, shown, code, stderr, timedOut, c.timeout, err, sink.cut())
}

// commandError builds the error for a finished command: nil for exit 0, unless its standard
// output passed the read limit (cut > 0, the limit): then the output kept is not all the
// command printed, and the error says so.
func commandError(node, shown string, code int, stderr []byte, timedOut bool, timeout time.Duration, err error, cut int) error {
	if err == nil && code == 0 && cut == 0 {
		return nil
	}
	re := &runError{node: node, command: shown, code: code, tail: stderrTail(stderr), err: err, cut: cut}
	if timedOut {
		re.timeout = timeout
	}
	if err != nil {
		re.code = -1
	}
	return re
}

// localPath is the PATH of the commands run on the master: the one Debian's sshd gives root,
// as the other nodes' commands get it, whatever PATH cutover started with. An @reboot line of
// cron has only /usr/bin:/bin, where tools such as Ganeti's daemon-util find no
// start-stop-daemon and silently do nothing.
const localPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// LocalEnv is cutover's environment with PATH set to localPath, for every command it runs on
// the master.
func LocalEnv() []string {
	env := []string{"PATH=" + localPath}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	return env
}
