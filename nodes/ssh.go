package nodes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// maxSessions bounds the commands running at once on one connection. sshd
// allows 10 sessions per connection by default (MaxSessions) and the SFTP
// client holds one of them.
const maxSessions = 8

// outputGrace is how long a finished command's output may stay open, held
// by a process it left running, before it is cut off.
const outputGrace = 2 * time.Second

// sessionRetry is how long a session the server refuses is asked for again.
const sessionRetry = 2 * time.Second

// sshClient is one node's SSH connection with its keepalive watch.
type sshClient struct {
	addr     string
	conn     *heardConn // the TCP connection under client
	client   *ssh.Client
	sessions chan struct{} // slots for concurrent sessions

	deadOnce sync.Once
	dead     chan struct{} // closed once the connection is gone
	deadErr  error         // why; set before dead is closed

	fileTimeout time.Duration // bounds each SFTP operation
	sftpMu      sync.Mutex
	sftp        *sftp.Client
	sftpSession atomic.Pointer[ssh.Session] // the SFTP subsystem's session, once one is opened

	sftpRefused atomic.Bool // the server has no SFTP subsystem: file operations use commands

	sftpErrMu sync.Mutex
	sftpErr   error // set once an SFTP operation went unanswered: the server is not used again

	shellMu sync.Mutex
	shell   *remoteShell // the command shell, once one was started
	noShell atomic.Bool  // the node cannot run a command shell: every command has a session of its own

	// fence is the connection's own token, random: its reap writes it to the node's fence file
	// of the command tag, and its tagged commands run only while the file still holds it, so a
	// request of a connection given up for a newer one never acts (see fenceScript).
	fence string
	// goWait bounds how long the node's command shell waits for the go of a command it asked to
	// run: the time after which cutover gives the connection up when it hears nothing.
	goWait time.Duration
	// beforeGo, when set (tests), runs between a command shell's ask and cutover's go.
	beforeGo func()
}

// dialError is a failed connection attempt.
type dialError struct {
	node    string
	op      string // "dial" or "ssh handshake with"
	addr    string
	timeout time.Duration // > 0 when the connect timeout hit
	err     error
}

func (e *dialError) Error() string {
	if e.timeout > 0 {
		return fmt.Sprintf("%s: %s %s: connection timed out after %s", e.node, e.op, e.addr, e.timeout)
	}
	var he *hostKeyError
	if errors.As(e.err, &he) {
		return fmt.Sprintf("%s: %s %s: %s", e.node, e.op, e.addr, he)
	}
	return fmt.Sprintf("%s: %s %s: %v", e.node, e.op, e.addr, e.err)
}

func (e *dialError) Unwrap() error { return e.err }

// dialSSH connects to n, verifies its host key strictly and authenticates.
func (p *Pool) dialSSH(ctx context.Context, n Node) (*sshClient, error) {
	port := strconv.Itoa(n.Port)
	addr := net.JoinHostPort(n.Address, port)
	candidates := []string{addr}
	if n.Name != n.Address {
		candidates = append(candidates, net.JoinHostPort(n.Name, port))
	}
	if a := p.cfg.HostKeyAlias; a != "" {
		candidates = append(candidates, net.JoinHostPort(a, port))
	}
	known, algos := p.hostKeys.pick(candidates...)
	if known == "" {
		return nil, &dialError{node: n.Name, op: "ssh handshake with", addr: addr, err: p.hostKeys.unknownHost(addr)}
	}
	cfg := &ssh.ClientConfig{
		User:              p.cfg.User,
		Auth:              []ssh.AuthMethod{p.auth},
		HostKeyCallback:   p.hostKeys.check(known),
		HostKeyAlgorithms: algos,
	}

	timeout := p.cfg.ConnectTimeout
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	raw, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) {
			err = oe.Err // "connect: connection refused", without repeating the address
		}
		de := &dialError{node: n.Name, op: "dial", addr: addr, err: err}
		if ctx.Err() != nil {
			de.err = ctx.Err()
		} else if dctx.Err() != nil || isNetTimeout(err) {
			de.timeout = timeout
		}
		return nil, de
	}
	tcp := &heardConn{Conn: raw}
	// The handshake shares the connect timeout and stops when ctx ends.
	deadline, _ := dctx.Deadline()
	tcp.SetDeadline(deadline)
	stop := context.AfterFunc(dctx, func() { tcp.SetDeadline(time.Unix(1, 0)) })
	conn, chans, reqs, err := ssh.NewClientConn(tcp, addr, cfg)
	stop()
	if err != nil {
		tcp.Close()
		if inner := errors.Unwrap(err); inner != nil {
			err = inner // drop "ssh: handshake failed: "
		}
		if strings.Contains(err.Error(), "unable to authenticate") {
			err = fmt.Errorf("login as %s refused: %w", p.cfg.User, err)
		}
		de := &dialError{node: n.Name, op: "ssh handshake with", addr: addr, err: err}
		if ctx.Err() != nil {
			de.err = ctx.Err()
		} else if dctx.Err() != nil || isNetTimeout(err) {
			de.timeout = timeout
		}
		return nil, de
	}
	tcp.SetDeadline(time.Time{})

	c := &sshClient{
		addr:     addr,
		conn:     tcp,
		client:   ssh.NewClient(conn, chans, reqs),
		sessions: make(chan struct{}, maxSessions),
		dead:     make(chan struct{}),

		fileTimeout: p.cfg.FileTimeout,
		fence:       newFence(),
		goWait:      p.cfg.KeepaliveInterval * time.Duration(p.cfg.KeepaliveMax),
	}
	go func() {
		err := c.client.Wait()
		if err == nil {
			err = errors.New("closed by the peer")
		}
		c.markDead(fmt.Errorf("connection to %s lost: %w", addr, err))
	}()
	go c.keepalive(p.cfg.KeepaliveInterval, p.cfg.KeepaliveMax)
	return c, nil
}

func isNetTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// markDead records why the connection is gone; the first reason wins.
func (c *sshClient) markDead(err error) {
	c.deadOnce.Do(func() {
		c.deadErr = err
		close(c.dead)
	})
}

// alive reports whether the connection is still usable.
func (c *sshClient) alive() bool {
	select {
	case <-c.dead:
		return false
	default:
		return true
	}
}

// close ends the connection.
func (c *sshClient) close() error {
	c.markDead(fmt.Errorf("connection to %s closed", c.addr))
	return c.client.Close()
}

// keepalive watches the connection as OpenSSH's ServerAliveCountMax does:
// while a keepalive@openssh.com request is unanswered, every interval in
// which nothing at all came from the node is a miss; anything the node sends
// (an answer, however late, a command's output) proves it alive and clears
// the misses. After maxMissed misses in a row the connection is closed, so
// that commands on a node that vanished fail instead of hanging, while a node
// too busy to answer within one interval is not cut off in the middle of a
// run.
func (c *sshClient) keepalive(interval time.Duration, maxMissed int) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	answers := make(chan error, 1)
	asking := false
	var m misses
	for {
		select {
		case <-c.dead:
			return
		case err := <-answers:
			asking = false
			if err != nil {
				c.markDead(fmt.Errorf("connection to %s lost: keepalive: %w", c.addr, err))
				c.client.Close()
				return
			}
			continue
		case <-tick.C:
		}
		if n := m.tick(c.conn.heard(), asking); n >= maxMissed {
			c.markDead(fmt.Errorf("connection to %s lost: nothing heard for %d keepalive intervals of %s", c.addr, n, interval))
			c.client.Close()
			return
		}
		if !asking {
			asking = true
			go func() {
				// Any reply, even a refusal, proves the peer is alive.
				_, _, err := c.client.SendRequest("keepalive@openssh.com", true, nil)
				answers <- err
			}()
		}
	}
}

// misses counts the keepalive intervals in a row in which nothing was heard
// from a node while a keepalive request waited for its answer.
type misses struct {
	n     int
	heard uint64 // the connection's count of reads at the last tick
}

// tick ends an interval, given the connection's count of reads so far and
// whether a keepalive request is unanswered, and returns the misses in a
// row.
func (m *misses) tick(heard uint64, asking bool) int {
	switch {
	case heard != m.heard:
		m.n = 0
	case asking:
		m.n++
	}
	m.heard = heard
	return m.n
}

// heardConn is a node's TCP connection that counts the reads that brought
// data: the keepalive watch's evidence that the node is alive.
type heardConn struct {
	net.Conn
	reads atomic.Uint64
}

func (h *heardConn) Read(b []byte) (int, error) {
	n, err := h.Conn.Read(b)
	if n > 0 {
		h.reads.Add(1)
	}
	return n, err
}

// heard returns how many reads brought data so far.
func (h *heardConn) heard() uint64 { return h.reads.Load() }

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
	go func() {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); io.Copy(stdout, ch) }()
		go func() { defer wg.Done(); io.Copy(stderr, ch.Stderr()) }()
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
	return res
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

// sftpClient returns the connection's SFTP client, starting it on first use.
func (c *sshClient) sftpClient() (*sftp.Client, error) {
	// An operation that went unanswered may still hold sftpMu.
	if err := c.sftpFailed(); err != nil {
		return nil, err
	}
	c.sftpMu.Lock()
	defer c.sftpMu.Unlock()
	if err := c.sftpFailed(); err != nil {
		return nil, err
	}
	if c.sftp != nil {
		return c.sftp, nil
	}
	if !c.alive() {
		return nil, c.deadErr
	}
	s, err := c.client.NewSession()
	if err != nil {
		return nil, c.transportError("start sftp", err)
	}
	c.sftpSession.Store(s)
	w, err := s.StdinPipe()
	if err != nil {
		s.Close()
		return nil, err
	}
	r, err := s.StdoutPipe()
	if err != nil {
		s.Close()
		return nil, err
	}
	if err := s.RequestSubsystem("sftp"); err != nil {
		s.Close()
		if c.alive() && strings.Contains(err.Error(), "subsystem request failed") {
			c.sftpRefused.Store(true)
			return nil, errNoSFTP
		}
		return nil, c.transportError("start sftp", err)
	}
	cl, err := sftp.NewClientPipe(r, w)
	if err != nil {
		s.Close()
		if ferr := c.sftpFailed(); ferr != nil {
			return nil, ferr
		}
		return nil, c.transportError("start sftp", err)
	}
	c.sftp = cl
	return cl, nil
}

// sftpFailed returns the error that made the connection give up on SFTP.
func (c *sshClient) sftpFailed() error {
	c.sftpErrMu.Lock()
	defer c.sftpErrMu.Unlock()
	return c.sftpErr
}

// abandonSFTP gives up on the connection's SFTP server after an operation
// went unanswered for the file timeout: it closes the SFTP session and makes
// every later operation on the connection fail at once with err. An
// operation still waiting for the server ends when the server lets go of
// the session or, at the latest, when the connection closes. Commands still
// run over the connection.
func (c *sshClient) abandonSFTP(err error) {
	c.sftpErrMu.Lock()
	if c.sftpErr == nil {
		c.sftpErr = err
	}
	c.sftpErrMu.Unlock()
	if s := c.sftpSession.Load(); s != nil {
		s.Close()
	}
}

// errNoSFTP says the node's sshd refused the SFTP subsystem.
var errNoSFTP = errors.New("the node's sshd has no SFTP subsystem")

// usesCommands reports whether the node's file operations must go over
// plain commands because its sshd has no SFTP subsystem. The first call
// starts the SFTP client to find out, within the file timeout.
func (c *sshClient) usesCommands() bool {
	if c.sftpRefused.Load() {
		return true
	}
	remoteFS{c}.do("start sftp", "", func(*sftp.Client) error { return nil })
	return c.sftpRefused.Load()
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
