package nodes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"
)

// The Go side of a connection's command shell. The protocol and the node's side of it, the
// script, are in shell_script.go; the framing of what the shell sends, in shell_frame.go.

// errNoBash says a node has no bash for a command shell.
var errNoBash = errors.New("no bash on the node")

// shellRefused is a command shell that cutover would not use for what the node sent: output
// before the shell's ready line that is not a boot identity, or a malformed frame. Its message
// quotes what the node sent only bounded and escaped.
type shellRefused struct {
	node string
	why  string
}

func (e *shellRefused) Error() string {
	return e.node + ": the node's command shell is not used: " + e.why
}

// errShellGone says a command shell ended before it asked to run a command, which therefore
// never ran: it may run elsewhere.
var errShellGone = errors.New("the command shell ended before the command ran")

// ValidBoot reports whether s is a boot identity as a node's command shell reports it and as
// Result.Boot carries it: "" (none could be read), or "UUID/STARTTIME", the kernel's boot id
// (/proc/sys/kernel/random/boot_id: 8-4-4-4-12 lower-case hexadecimal digits) and the start
// time of the node's process 1 (a decimal of at most 20 digits, in clock ticks since boot),
// either of which may be empty when it could not be read, but not both. Anything else that a
// node sends for its boot identity is refused, never journaled or compared.
func ValidBoot(s string) bool {
	if s == "" {
		return true
	}
	id, start, ok := strings.Cut(s, "/")
	if !ok || id == "" && start == "" || len(start) > 20 {
		return false
	}
	for i := 0; i < len(start); i++ {
		if start[i] < '0' || start[i] > '9' {
			return false
		}
	}
	if id == "" {
		return true
	}
	if len(id) != 36 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// remoteShell is a command shell on a node.
type remoteShell struct {
	c    *sshClient
	tag  string
	ch   ssh.Channel
	busy sync.Mutex // held while a command runs

	out, errs *framer
	boot      string        // the node's boot identity as the shell read it when it started
	ended     chan struct{} // closed when the shell's session has ended
	status    int           // the shell's exit status; -1 when it sent none; set before ended closes

	closeOnce sync.Once
	closed    atomic.Bool // close was called
	release   func()      // frees the connection's session slot
}

// before the shell's ready line is not a boot identity (ValidBoot), is longer than one may be,
// or breaks the framing.
func (c *sshClient) startShell(ctx context.Context, bash, tag, node string, reap bool) (*remoteShell, error) {
	select {
	case c.sessions <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.dead:
		return nil, c.deadErr
	}
	release := func() { <-c.sessions }
	ses, err := c.openSession(ctx)
	if err != nil {
		release()
		return nil, err
	}
	ch, reqs := ses.ch, ses.reqs
	s := &remoteShell{c: c, tag: tag, ch: ch, out: &framer{}, errs: &framer{}, ended: make(chan struct{}), status: -1, release: release}
	s.out.broke, s.errs.broke = s.close, s.close
	boot := &bootSink{over: make(chan struct{})}
	ready := s.out.add(shellReady, boot, false)
	exitStatus := make(chan int, 1)
	go func() {
		for req := range reqs {
			if req.Type == "exit-status" {
				var m struct{ Status uint32 }
				if ssh.Unmarshal(req.Payload, &m) == nil {
					select {
					case exitStatus <- int(m.Status):
					default:
					}
				}
			}
			if req.WantReply {
				req.Reply(false, nil)
			}
		}
	}()
	ok, err := ch.SendRequest("exec", true, ssh.Marshal(struct{ Command string }{c.shellLine(bash, tag, node, reap)}))
	if err != nil || !ok {
		s.close()
		if err == nil {
			err = errors.New("the server refused to run the command shell")
		}
		return nil, c.transportError("start command shell", err)
	}
	go func() {
		var wg sync.WaitGroup
		wg.Add(2)
		// Small buffers: a shell lives as long as its connection, on every node at once.
		go func() { defer wg.Done(); io.CopyBuffer(s.out, ch, make([]byte, 4096)); s.out.fail() }()
		go func() { defer wg.Done(); io.CopyBuffer(s.errs, ch.Stderr(), make([]byte, 1024)); s.errs.fail() }()
		wg.Wait()
		select {
		case st := <-exitStatus:
			s.status = st
		case <-time.After(100 * time.Millisecond):
		}
		close(s.ended)
		s.close()
	}()
	select {
	case <-ready.passed:
	case <-boot.over:
	case <-ctx.Done():
		s.close()
		return nil, ctx.Err()
	}
	if sent, past := boot.kept(); past {
		s.close()
		return nil, &shellRefused{node, fmt.Sprintf("it sent more than %d bytes before the shell's ready line: %s", maxBoot, QuotedPrefix(sent))}
	}
	if err := s.out.problem(); err != nil {
		s.close()
		return nil, &shellRefused{node, "the shell's ready line: " + err.Error()}
	}
	if ready.status < 0 {
		<-s.ended
		if s.status == shellNoBash {
			return nil, errNoBash
		}
		return nil, c.transportError("start command shell", fmt.Errorf("the shell ended before it was ready (exit %d)", s.status))
	}
	sent, _ := boot.kept()
	if !ValidBoot(string(sent)) {
		s.close()
		return nil, &shellRefused{node, fmt.Sprintf("what it sent before the shell's ready line, %s, is not a boot identity (BOOT_ID/START)", QuotedPrefix(sent))}
	}
	s.boot = string(sent)
	return s, nil
}

// close ends the shell's session: the shell reads end of file, kills what command still runs and
// exits.
func (s *remoteShell) close() {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.ch.Close()
		s.release()
	})
}

// usable reports whether the shell's session still runs and was not closed.
func (s *remoteShell) usable() bool {
	if s.closed.Load() {
		return false
	}
	select {
	case <-s.ended:
		return false
	default:
		return true
	}
}

// run runs one command in the shell, which the caller holds busy: mode "exec" for an argv line
// run in the shell's place, "sh" for a script. It returns the command's exit status and start
// time (0 when the shell did not know it), or -1 and why it has none. When ctx ends first, the
// command's process group is killed, and run returns once the shell reports it gone (at most
// killWait later; a shell that does not answer by then is closed, which kills the group as
// well). A malformed frame fails the command with errMalformedFrame and closes the shell; a
// shell that ends before it asks to run the command returns errShellGone.
func (s *remoteShell) run(ctx context.Context, mode, script string, stdout, stderr io.Writer) (int, uint64, error) {
	var raw [16]byte
	rand.Read(raw[:])
	b := hex.EncodeToString(raw[:])
	fo, fe := s.out.add(b, stdout, true), s.errs.add(b, stderr, false)
	req := fmt.Sprintf("run %s %s %d\n%s\n", b, mode, strings.Count(script, "\n")+1, script)
	if _, err := io.WriteString(s.ch, req); err != nil {
		s.close()
		return -1, 0, fmt.Errorf("command shell: %w", err)
	}
	select {
	case <-fo.asked:
		if s.c.beforeGo != nil {
			s.c.beforeGo()
		}
		if _, err := io.WriteString(s.ch, "go "+b+"\n"); err != nil {
			s.close()
			return -1, 0, fmt.Errorf("command shell: %w", err)
		}
	case <-fo.passed: // the shell ended, or its output broke the framing; both frames are done
	case <-ctx.Done():
		return -1, 0, s.stop(ctx, fo, fe)
	}
	both := func(f, g *frame) <-chan struct{} {
		c := make(chan struct{})
		go func() { <-f.passed; <-g.passed; close(c) }()
		return c
	}
	select {
	case <-both(fo, fe):
		if err := errors.Join(s.out.problem(), s.errs.problem()); err != nil {
			s.close()
			return -1, 0, err
		}
		select {
		case <-fo.asked:
		default:
			s.close()
			return -1, 0, errShellGone
		}
		if fo.status < 0 || fe.status < 0 {
			s.close()
			return -1, 0, s.c.transportError("command shell", errNoExitStatus)
		}
		if _, err := io.WriteString(s.ch, "done\n"); err != nil {
			s.close()
		}
		return fo.status, fo.startTime, nil
	case <-ctx.Done():
	}
	return -1, 0, s.stop(ctx, fo, fe)
}

// stop asks the shell to kill the command of frames fo and fe (or, before it ran, to skip it)
// and waits for the shell to report it gone, at most killWait; a shell that does not answer by
// then is closed. It returns ctx's error.
func (s *remoteShell) stop(ctx context.Context, fo, fe *frame) error {
	if _, err := io.WriteString(s.ch, "kill\n"); err != nil {
		s.close()
		return ctx.Err()
	}
	wait := time.NewTimer(killWait)
	defer wait.Stop()
	ended := make(chan struct{})
	go func() { <-fo.ended; <-fe.ended; close(ended) }()
	select {
	case <-ended:
	case <-wait.C:
		s.close()
	}
	return ctx.Err()
}

// shellSignal names the signal whose death sh reports as status (128+N), "" when there is none.
// A command shell cannot tell the one from a command that exited so.
func shellSignal(status int) string {
	if status > 128 && status < 128+65 {
		return unix.SignalName(syscall.Signal(status - 128))
	}
	return ""
}

// acquireShell is sshTransport.shell for the connection. A shell that fails to start, for any reason
// but ctx, is not tried again on the connection: its commands have sessions of their own.
func (c *sshClient) acquireShell(ctx context.Context, bash, tag, node string, reap bool) (*remoteShell, error) {
	c.shellMu.Lock()
	defer c.shellMu.Unlock()
	if s := c.shell; s != nil {
		if !s.busy.TryLock() {
			return nil, nil
		}
		if s.usable() && s.tag == tag && !reap {
			return s, nil
		}
		s.close()
		s.busy.Unlock()
		c.shell = nil
	}
	s, err := c.startShell(ctx, bash, tag, node, reap)
	if err != nil {
		if ctx.Err() == nil {
			c.noShell.Store(true)
		}
		if errors.Is(err, errNoBash) {
			err = nil
		}
		return nil, err
	}
	s.busy.Lock()
	c.shell = s
	return s, nil
}

// Prepare readies the connection for the commands of the pool's command tag before they are
// needed: over SSH, on a node that can run a command shell, it starts the connection's shell
// (which first kills what earlier executions of the tag left running on the node, as the first
// command would), so that the first command costs what the others do. It does nothing locally,
// without a tag, or where the shell is busy or cannot run. A failure to start the shell is no
// error, since the commands then run as they would have, in sessions of their own; except that
// a shell refused for what the node sent (output before its ready line that is not a boot
// identity, or a broken frame) is returned, naming the node, for the caller to report.
func (c *Conn) Prepare(ctx context.Context) error {
	tag := c.pool.commandTag()
	if tag == "" || !c.tr.reapsAhead() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	c.reapMu.Lock()
	defer c.reapMu.Unlock()
	reap := !c.reaped[tag]
	sh, err := c.tr.shell(ctx, tag, reap)
	if sh != nil {
		sh.busy.Unlock()
		if reap {
			c.markReaped(tag)
		}
	}
	var refused *shellRefused
	if errors.As(err, &refused) {
		return err
	}
	return ctx.Err()
}
