package nodes

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"
)

// A command shell is one long-lived bash on a node that runs a connection's commands one after
// another, so that a command costs the node a fork and an exec or two instead of a new SSH
// session, a login shell and the watchdog's shells. It keeps the watchdog's promises (see
// watchdog.go): each command runs in a process group of its own (bash's job control), with a
// watcher in that group that reads the shell's standard input, so that end of file there (cutover
// died, the connection dropped) or a "kill" request kills the group, and the group's number
// cannot be given to another process while the watcher could still signal it. Records of tagged
// commands are kept as the watchdog keeps them, in one file per shell that holds the running
// command (empty between commands).
//
// The protocol, over the shell's standard input:
//
//	run BOUNDARY MODE N   then N lines: the command; MODE "exec" runs an argv line in the
//	                      shell's place, "sh" runs a script with sh -c
//	go BOUNDARY           the answer to the shell's ask: cutover still waits for the command
//	done                  the command's end was read: its watcher exits
//	kill                  kill the command's process group (or, instead of go, skip it)
//
// and, on standard output before the command runs:
//
//	\nBOUNDARY ask\n      the shell has the command and runs it only on go
//
// and, on both standard output and standard error, after the command's own output:
//
//	\nBOUNDARY STATUS\n   the command exited with STATUS (a shell's status: 128+N for signal N)
//	\nBOUNDARY end\n      the command's process group was waited for; the next request is read
//
// The ask costs a round trip a command, and is what keeps a request that reached the node late
// from running at all: a connection cut off while cutover wrote a request leaves it in the
// master's TCP send queue, delivered when the network heals, possibly after cutover gave the
// command up, rolled back and exited. The shell then asks, reads the end of file that follows,
// and exits without running it.
//
// The boundary is 16 random bytes per command, sent on standard input only, so no command can
// know it, let alone print it. A node without bash (exit 97 before the shell is ready) and a
// connection whose command is already running use a session of their own per command, as before.

// shellReady is the boundary of the line a command shell prints when it is ready; what it
// prints before that line is the node's boot identity (Result.Boot), read as it started.
const shellReady = "cutover-shell-ready"

// shellNoBash is the exit status of a command shell's start on a node without bash, or whose
// bash has no job control; shellScript spells it out (TestShellNoBashStatus keeps them equal).
const shellNoBash = 97

// shellScript is the node's side of a command shell; its arguments are the command tag ("" for
// no records) and the node's name. It exits shellNoBash where bash has no job control. The
// shell waits for a command's watcher to end; bash's wait also returns when it is stopped
// (SIGSTOP, as when the node is frozen), so it waits again for as long as the watcher is
// there and not a zombie, stopped or already continued (wait -f would do it, but loops for
// ever in bash 5.2 when the process has already been reaped; a pid given meanwhile to another
// process ends the loop, as wait then answers 127).
const shellScript = `set -m
case $- in *m*) ;; *) exit 97;; esac
cutover_tag=$1 cutover_node=$2
exec 4>&1 5<&0 6>&2 </dev/null >/dev/null 2>/dev/null
` + procStatScript + `cutover_rec= cutover_boot= cutover_init=
{ read -r cutover_boot </proc/sys/kernel/random/boot_id; } 2>/dev/null
{ read -r cutover_l </proc/1/stat; } 2>/dev/null && cutover_pstat "$cutover_l" && cutover_init=$cutover_start
if [ -n "$cutover_tag" ]; then
	` + recordDirScript + `	if [ -n "$cutover_dir" ]; then
		[ -d "$cutover_dir" ] || mkdir -p -m 700 "$cutover_dir"
		cutover_rec=$cutover_dir/$cutover_tag.$$
		{ : >"$cutover_rec"; } 2>/dev/null || cutover_rec=
	fi
fi
trap '[ -z "$cutover_rec" ] || rm -f "$cutover_rec"' EXIT
[ -n "$cutover_boot$cutover_init" ] && printf '%s/%s' "$cutover_boot" "$cutover_init" >&4
printf '\n%s 0\n\n%s end\n' ` + shellReady + ` ` + shellReady + ` >&4
while read -r cutover_op cutover_b cutover_mode cutover_n <&5; do
	[ "$cutover_op" = run ] || exit
	case $cutover_n in ''|*[!0-9]*) exit;; esac
	cutover_s= cutover_i=0
	while [ "$cutover_i" -lt "$cutover_n" ]; do
		IFS= read -r cutover_l <&5 || exit
		cutover_s=$cutover_s$cutover_l"
"
		cutover_i=$((cutover_i + 1))
	done
	cutover_s=${cutover_s%?}
	printf '\n%s ask\n' "$cutover_b" >&4
	IFS= read -r cutover_l <&5 || exit
	if [ "$cutover_l" != "go $cutover_b" ]; then
		printf '\n%s end\n' "$cutover_b" >&4
		printf '\n%s end\n' "$cutover_b" >&6
		continue
	fi
	{
		if [ "$cutover_mode" = exec ]; then
			(eval "exec $cutover_s") >&4 2>&6 4>&- 5>&- 6>&- </dev/null
		else
			sh -c "$cutover_s" >&4 2>&6 4>&- 5>&- 6>&- </dev/null
		fi
		cutover_st=$?
		printf '\n%s %s\n' "$cutover_b" "$cutover_st" >&4
		printf '\n%s %s\n' "$cutover_b" "$cutover_st" >&6
	} 5>&- | {
		trap "" TERM
		cutover_pg= cutover_start=-
		{ read -r cutover_l </proc/$BASHPID/stat; } 2>/dev/null && cutover_pstat "$cutover_l"
		[ -z "$cutover_rec" ] || { printf "%s %s %s %s %s\n" "$cutover_pg" "$BASHPID" "$cutover_start" "${cutover_boot:--}" "$cutover_node" >"$cutover_rec"; } 2>/dev/null
		cutover_l=
		IFS= read -r cutover_l <&5
		if [ "$cutover_l" != done ] && [ -n "$cutover_pg" ] && { read -r cutover_l </proc/"$cutover_pg"/stat; } 2>/dev/null; then
			set -- ${cutover_l##*) }
			case $1 in Z|X) ;; *) exec sh -c '` + killerScript + `' cutover-kill "$cutover_pg" "$cutover_rec";; esac
		fi
		[ -z "$cutover_rec" ] || { : >"$cutover_rec"; } 2>/dev/null
	} 4>&- 6>&- &
	cutover_w=$!
	while :; do
		wait "$cutover_w"
		[ $? -eq 127 ] && break
		{ read -r cutover_l </proc/"$cutover_w"/stat; } 2>/dev/null || break
		set -- ${cutover_l##*) }
		case $1 in Z|X) break;; T|t) sleep 0.2;; esac
	done
	printf '\n%s end\n' "$cutover_b" >&4
	printf '\n%s end\n' "$cutover_b" >&6
done
`

// shellLine is the command line that starts a command shell for tag on node with the program
// bash (a name to look up in PATH), after the reap of tag's leftovers when reap is set.
func shellLine(bash, tag, node string, reap bool) string {
	line := ""
	if reap && tag != "" {
		line = reapLine(tag, node)
	}
	return line + "command -v " + Quote(bash) + " >/dev/null 2>&1 || exit " + strconv.Itoa(shellNoBash) + "\n" +
		"BASH_ENV= exec " + Quote(bash) + " --norc --noprofile -c " + Quote(shellScript) + " cutover-shell " + QuoteArgs([]string{tag, node})
}

// errNoBash says a node has no bash for a command shell.
var errNoBash = errors.New("no bash on the node")

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

// startShell opens a session and starts a command shell for tag in it, within ctx. It returns
// errNoBash when the node has no bash.
func (c *sshClient) startShell(ctx context.Context, bash, tag, node string, reap bool) (*remoteShell, error) {
	select {
	case c.sessions <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.dead:
		return nil, c.deadErr
	}
	release := func() { <-c.sessions }
	ch, reqs, err := c.openSession(ctx)
	if err != nil {
		release()
		return nil, err
	}
	s := &remoteShell{c: c, tag: tag, ch: ch, out: &framer{}, errs: &framer{}, ended: make(chan struct{}), status: -1, release: release}
	var boot bytes.Buffer
	ready := s.out.add(shellReady, &boot)
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
	ok, err := ch.SendRequest("exec", true, ssh.Marshal(struct{ Command string }{shellLine(bash, tag, node, reap)}))
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
	case <-ctx.Done():
		s.close()
		return nil, ctx.Err()
	}
	if ready.status < 0 {
		<-s.ended
		if s.status == shellNoBash {
			return nil, errNoBash
		}
		return nil, c.transportError("start command shell", fmt.Errorf("the shell ended before it was ready (exit %d)", s.status))
	}
	s.boot = boot.String()
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
// run in the shell's place, "sh" for a script. It returns the command's exit status, or -1 and
// why it has none. When ctx ends first, the command's process group is killed, and run returns
// once the shell reports it gone (at most killWait later; a shell that does not answer by then is
// closed, which kills the group as well).
func (s *remoteShell) run(ctx context.Context, mode, script string, stdout, stderr io.Writer) (int, error) {
	var raw [16]byte
	rand.Read(raw[:])
	b := hex.EncodeToString(raw[:])
	fo, fe := s.out.add(b, stdout), s.errs.add(b, stderr)
	req := fmt.Sprintf("run %s %s %d\n%s\n", b, mode, strings.Count(script, "\n")+1, script)
	if _, err := io.WriteString(s.ch, req); err != nil {
		s.close()
		return -1, fmt.Errorf("command shell: %w", err)
	}
	select {
	case <-fo.asked:
		if _, err := io.WriteString(s.ch, "go "+b+"\n"); err != nil {
			s.close()
			return -1, fmt.Errorf("command shell: %w", err)
		}
	case <-fo.passed: // the shell ended; both frames are done
	case <-ctx.Done():
		return -1, s.stop(ctx, fo, fe)
	}
	both := func(f, g *frame) <-chan struct{} {
		c := make(chan struct{})
		go func() { <-f.passed; <-g.passed; close(c) }()
		return c
	}
	select {
	case <-both(fo, fe):
		if fo.status < 0 || fe.status < 0 {
			s.close()
			return -1, s.c.transportError("command shell", errNoExitStatus)
		}
		if _, err := io.WriteString(s.ch, "done\n"); err != nil {
			s.close()
		}
		return fo.status, nil
	case <-ctx.Done():
	}
	return -1, s.stop(ctx, fo, fe)
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

// frame is one command's output on one stream of a shell: it passes to sink up to the command's
// status line, and the stream is read up to the end line.
type frame struct {
	start, end string // "\nBOUNDARY " and "\nBOUNDARY end\n"
	sink       io.Writer
	status     int           // the command's status; -1 when it has none; set before passed closes
	asked      chan struct{} // closed at the shell's ask (standard output only)
	passed     chan struct{} // closed at the status line, or at the end line when there was none
	ended      chan struct{} // closed at the end line
	isPassed   bool
	isAsked    bool
}

// framer splits one output stream of a shell into its commands' frames. Output outside a frame
// (written by a process a command left running, after the command ended) is dropped.
type framer struct {
	mu     sync.Mutex
	buf    []byte
	frames []*frame
	failed bool
}

// add starts the frame of the command with boundary b, after those already waiting.
func (f *framer) add(b string, sink io.Writer) *frame {
	fr := &frame{start: "\n" + b + " ", end: "\n" + b + " end\n", sink: sink, status: -1, asked: make(chan struct{}), passed: make(chan struct{}), ended: make(chan struct{})}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failed {
		close(fr.passed)
		close(fr.ended)
		fr.isPassed = true
		return fr
	}
	f.frames = append(f.frames, fr)
	f.scan()
	return fr
}

// Write takes the stream's output as it comes.
func (f *framer) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buf = append(f.buf, p...)
	f.scan()
	return len(p), nil
}

// fail ends every waiting frame without a status: the stream ended.
func (f *framer) fail() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = true
	for _, fr := range f.frames {
		if !fr.isPassed {
			fr.isPassed = true
			close(fr.passed)
		}
		close(fr.ended)
	}
	f.frames = nil
	f.buf = nil
}

// scan moves what the buffer holds into the frames; the caller holds mu.
func (f *framer) scan() {
	for len(f.frames) > 0 {
		fr := f.frames[0]
		if !fr.isPassed {
			i := bytes.Index(f.buf, []byte(fr.start))
			if i < 0 {
				keep := min(len(f.buf), len(fr.start)-1)
				fr.sink.Write(f.buf[:len(f.buf)-keep])
				f.buf = f.buf[len(f.buf)-keep:]
				return
			}
			if i > 0 {
				fr.sink.Write(f.buf[:i])
				f.buf = f.buf[i:]
			}
			nl := bytes.IndexByte(f.buf[len(fr.start):], '\n')
			if nl < 0 {
				return
			}
			word := string(f.buf[len(fr.start) : len(fr.start)+nl])
			if word == "ask" {
				f.buf = f.buf[len(fr.start)+nl+1:]
				if !fr.isAsked {
					fr.isAsked = true
					close(fr.asked)
				}
				continue
			}
			fr.isPassed = true
			if word == "end" {
				f.buf = f.buf[len(fr.start)+nl+1:]
				close(fr.passed)
				close(fr.ended)
				f.frames = f.frames[1:]
				continue
			}
			if n, err := strconv.Atoi(word); err == nil && n >= 0 {
				fr.status = n
			}
			// The end line follows; keep its leading newline.
			f.buf = f.buf[len(fr.start)+nl:]
			close(fr.passed)
		}
		i := bytes.Index(f.buf, []byte(fr.end))
		if i < 0 {
			keep := min(len(f.buf), len(fr.end)-1)
			f.buf = f.buf[len(f.buf)-keep:]
			return
		}
		f.buf = f.buf[i+len(fr.end):]
		close(fr.ended)
		f.frames = f.frames[1:]
	}
	f.buf = f.buf[:0]
}

// shell returns the connection's command shell for tag, held busy for the caller, starting it
// (after the reap of tag's leftovers when reap is set) where there is none yet, it serves
// another tag, or reap is asked for; nil when the command is to have a session of its own: use
// is false, the connection is local, the shell is busy with another command, or the node cannot
// run one.
func (c *Conn) shell(ctx context.Context, use bool, tag string, reap bool) *remoteShell {
	if !use || c.ssh == nil || c.ssh.noShell.Load() || c.pool.noShell {
		return nil
	}
	bash := "bash"
	if c.pool.shellBash != "" {
		bash = c.pool.shellBash
	}
	return c.ssh.acquireShell(ctx, bash, tag, c.name, reap)
}

// acquireShell is Conn.shell for the connection.
func (c *sshClient) acquireShell(ctx context.Context, bash, tag, node string, reap bool) *remoteShell {
	c.shellMu.Lock()
	defer c.shellMu.Unlock()
	if s := c.shell; s != nil {
		if !s.busy.TryLock() {
			return nil
		}
		if s.usable() && s.tag == tag && !reap {
			return s
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
		return nil
	}
	s.busy.Lock()
	c.shell = s
	return s
}

// Prepare readies the connection for the commands of the pool's command tag before they are
// needed: over SSH, on a node that can run a command shell, it starts the connection's shell
// (which first kills what earlier executions of the tag left running on the node, as the first
// command would), so that the first command costs what the others do. It does nothing locally,
// without a tag, or where the shell is busy or cannot run; a failure to start the shell is no
// error either, since the commands then run as they would have.
func (c *Conn) Prepare(ctx context.Context) error {
	tag := c.pool.commandTag()
	if c.ssh == nil || tag == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	c.reapMu.Lock()
	defer c.reapMu.Unlock()
	reap := !c.reaped[tag]
	if sh := c.shell(ctx, true, tag, reap); sh != nil {
		sh.busy.Unlock()
		if reap {
			c.markReaped(tag)
		}
	}
	return ctx.Err()
}
