package nodes

import (
	"context"
	"errors"
	"fmt"
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
	// owner returns the pool's connection owner (see Pool.SetConnectionOwner) when a reap runs.
	owner func() string
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
		owner:       p.connectionOwner,
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
