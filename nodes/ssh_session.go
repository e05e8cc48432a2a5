package nodes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// The sessions of a node's SSH connection: a command in a session of its own, under the
// watchdog (run) or reading its input (runInput).

// outputGrace is how long a finished command's output may stay open, held
// by a process it left running, before it is cut off.
const outputGrace = 2 * time.Second

// sessionRetry is how long a session the server refuses is asked for again.
const sessionRetry = 2 * time.Second

// run runs one command line in a new session, writing its output to stdout
// and stderr. It returns the exit code, or -1 and the reason when the command
// did not run to an exit. The session's standard input stays open while the
// command runs: the line is expected to run under the watchdog, which kills
// the command's process group when that input reaches end of file. So when
// ctx ends first, run closes the input (or, before the command started, the
// whole session), waits up to killWait for the watchdog to report the
// command gone, and returns ctx's error.
func (c *sshClient) run(ctx context.Context, line string, stdout, stderr io.Writer) (int, error) {
	select {
	case c.sessions <- struct{}{}:
	case <-ctx.Done():
		return -1, ctx.Err()
	case <-c.dead:
		return -1, c.deadErr
	}

	done := make(chan execResult, 1)
	var mu sync.Mutex
	var session ssh.Channel
	started, abandoned := false, false
	go func() {
		defer func() { <-c.sessions }()
		ses, err := c.openSession(ctx)
		if err != nil {
			done <- execResult{-1, err}
			return
		}
		ch := ses.ch
		defer ch.Close()
		mu.Lock()
		if abandoned {
			mu.Unlock()
			done <- execResult{-1, context.Canceled}
			return
		}
		session = ch
		mu.Unlock()
		done <- c.exec(ses, line, stdout, stderr, func() {
			mu.Lock()
			started = true
			mu.Unlock()
		})
	}()

	select {
	case r := <-done:
		return r.code, r.err
	case <-ctx.Done():
	}
	mu.Lock()
	abandoned = true
	if session != nil {
		if started {
			// End of file on the command's input: the watchdog kills the
			// process group, then lets the session end.
			session.CloseWrite()
		} else {
			// sshd may never pass an end of file received before the
			// command started on to it; closing the session does.
			session.Close()
		}
	}
	mu.Unlock()
	// Let the session deliver its output and end; a dead peer may never
	// answer, so do not wait long.
	wait := time.NewTimer(killWait)
	defer wait.Stop()
	select {
	case <-done:
	case <-wait.C:
		mu.Lock()
		if session != nil {
			session.Close()
		}
		mu.Unlock()
	}
	return -1, ctx.Err()
}

// execResult is how a command ended: its exit code, or -1 and why not.
type execResult struct {
	code int
	err  error
}

// session is an open session channel and its requests.
type session struct {
	ch   ssh.Channel
	reqs <-chan *ssh.Request
}

// openSession opens a session channel. sshd refuses sessions beyond its
// MaxSessions, and frees a finished session's slot a moment after the client
// sees it end, so a refused open is retried for a short while.
func (c *sshClient) openSession(ctx context.Context) (session, error) {
	delay := 5 * time.Millisecond
	for deadline := time.Now().Add(sessionRetry); ; delay *= 2 {
		ch, reqs, err := c.client.OpenChannel("session", nil)
		if err == nil {
			return session{ch, reqs}, nil
		}
		var oe *ssh.OpenChannelError
		if !errors.As(err, &oe) || oe.Reason != ssh.ConnectionFailed || time.Now().After(deadline) {
			return session{}, c.transportError("open session", err)
		}
		select {
		case <-ctx.Done():
			return session{}, ctx.Err()
		case <-c.dead:
			return session{}, c.deadErr
		case <-time.After(min(delay, 200*time.Millisecond)):
		}
	}
}

// exec runs line on an open session, calls started once the server
// has accepted it, and waits for its exit status and output. Once the
// command has exited, output still held open by processes it left behind is
// waited for only outputGrace, as locally. The channel's input is left open.
func (c *sshClient) exec(ses session, line string, stdout, stderr io.Writer, started func()) execResult {
	ch, reqs := ses.ch, ses.reqs
	exited := make(chan execResult, 1)
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		for req := range reqs {
			switch req.Type {
			case "exit-status":
				var m struct{ Status uint32 }
				if ssh.Unmarshal(req.Payload, &m) == nil {
					sendOnce(exited, execResult{int(m.Status), nil})
				}
			case "exit-signal":
				var m struct {
					Signal     string
					CoreDumped bool
					Error      string
					Lang       string
				}
				if ssh.Unmarshal(req.Payload, &m) == nil {
					sendOnce(exited, execResult{-1, fmt.Errorf("killed by signal SIG%s", m.Signal)})
				}
			}
			if req.WantReply {
				req.Reply(false, nil)
			}
		}
	}()

	ok, err := ch.SendRequest("exec", true, ssh.Marshal(struct{ Command string }{line}))
	if err != nil {
		return execResult{-1, c.transportError("exec", err)}
	}
	if !ok {
		return execResult{-1, errors.New("the server refused to run the command")}
	}
	started()

	output := make(chan struct{})
	// The copies write through a gate that the exec shuts as it returns: output that arrives
	// after the grace, from a process the command left running, is dropped, never written
	// into the caller's writers while the caller reads them.
	gate := &outputGate{}
	go func() {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); io.Copy(gate.to(stdout), ch) }()
		go func() { defer wg.Done(); io.Copy(gate.to(stderr), ch.Stderr()) }()
		wg.Wait()
		close(output)
	}()

	var res execResult
	select {
	case res = <-exited:
	case <-closed:
		select {
		case res = <-exited: // sent just before the channel closed
		default:
			return execResult{-1, c.transportError("session", errNoExitStatus)}
		}
	}
	grace := time.NewTimer(outputGrace)
	defer grace.Stop()
	select {
	case <-output:
	case <-grace.C:
	}
	gate.shut()
	return res
}

// outputGate passes a session's output on to its writers until it is shut.
type outputGate struct {
	mu     sync.Mutex
	closed bool
}

// to returns a writer that writes to w while the gate is open and drops what comes after.
func (g *outputGate) to(w io.Writer) io.Writer {
	return gatedWriter{g, w}
}

// shut ends the writing: once it returns, no write reaches the writers.
func (g *outputGate) shut() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

type gatedWriter struct {
	g *outputGate
	w io.Writer
}

func (gw gatedWriter) Write(p []byte) (int, error) {
	gw.g.mu.Lock()
	defer gw.g.mu.Unlock()
	if gw.g.closed {
		return len(p), nil
	}
	return gw.w.Write(p)
}

var errNoExitStatus = errors.New("session ended without an exit status")

// sendOnce delivers r unless a result was delivered already.
func sendOnce(ch chan execResult, r execResult) {
	select {
	case ch <- r:
	default:
	}
}

// transportError explains a failed session, preferring the reason the
// connection died when it did.
func (c *sshClient) transportError(op string, err error) error {
	select {
	case <-c.dead:
		return c.deadErr
	default:
	}
	if errors.Is(err, errNoExitStatus) || errors.Is(err, io.EOF) {
		// The channel closed without a status: usually the connection is
		// going down; give the watcher a moment to say why.
		select {
		case <-c.dead:
			return c.deadErr
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// runInput runs line as it is, not under the watchdog, with input on its
// standard input followed by end of file, and returns its exit code (-1
// and the reason when it did not exit). When ctx ends first the session is
// closed: the command then reads end of file and is expected to give up by
// itself. An error reading input closes the session the same way.
func (c *sshClient) runInput(ctx context.Context, line string, input io.Reader, stdout, stderr io.Writer) (int, error) {
	select {
	case c.sessions <- struct{}{}:
	case <-ctx.Done():
		return -1, ctx.Err()
	case <-c.dead:
		return -1, c.deadErr
	}
	defer func() { <-c.sessions }()
	ses, err := c.openSession(ctx)
	if err != nil {
		return -1, err
	}
	ch := ses.ch
	defer ch.Close()
	done := make(chan execResult, 1)
	go func() {
		done <- c.exec(ses, line, stdout, stderr, func() {
			go func() {
				if _, err := io.Copy(ch, input); err != nil {
					ch.Close()
					return
				}
				ch.CloseWrite()
			}()
		})
	}()
	select {
	case r := <-done:
		return r.code, r.err
	case <-ctx.Done():
		ch.Close()
		select {
		case <-done:
		case <-time.After(killWait):
		}
		return -1, ctx.Err()
	}
}
