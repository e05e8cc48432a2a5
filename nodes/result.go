package nodes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Output bounds: what a Result keeps of a command's output.
const (
	maxStdout = 4 << 20  // the first 4 MiB of standard output
	maxStderr = 64 << 10 // the last 64 KiB of standard error
)

// maxTailInError bounds the stderr tail quoted in an error message.
const maxTailInError = 300

// Result is what one command did.
type Result struct {
	Node     string
	Command  string // the command line as given to the node's sh (inside cutover's watchdog)
	ExitCode int    // -1 when the command did not finish (transport failure, timeout, signal)
	Stdout   []byte // bounded: at most the first 4 MiB kept
	Stderr   []byte // bounded: the last 64 KiB kept
	Duration time.Duration
	// Boot is the boot identity of the node the command ran in, "BOOT_ID/START" (the kernel's
	// boot id and the start time of the node's process 1 in clock ticks since boot, so that a
	// container restarted on a host that did not boot has another), when it ran to an exit in
	// the connection's command shell: the shell read it as it started, and a shell that reports
	// a command's exit has lived since. It is always one that ValidBoot accepts: a shell that
	// sent anything else is not used. "" otherwise (a session of its own, a node without those
	// files); a command run on the master carries the master's (LocalBoot).
	Boot string
	// Start is when the command started on the node, in clock ticks since the node's boot
	// (field 22 of /proc/PID/stat) of the process that runs it, read before the command
	// itself starts: every process the command starts has a start time at least this. In the
	// connection's command shell, for a command that ran to an exit, that process is the
	// subshell the shell forked to run the command, and the shell reports the time in the
	// command's status line (parsed as a decimal, else 0). With Boot it places the command in
	// the node's time. 0 when unknown (a session of its own, a node without /proc).
	Start uint64
}

// runError is the error of a command that did not exit 0.
type runError struct {
	node    string
	command string // what the operator recognises: the argv line or the script
	code    int    // exit code, -1 when the command did not run to an exit
	tail    string // the end of standard error, on one line
	timeout time.Duration
	err     error  // the transport or context error, if any
	cut     int    // the read limit its standard output passed; 0 when it did not
	signal  string // the signal sh reports as this exit code, for a command shell's status
}

func (e *runError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: run %q: ", e.node, e.command)
	switch {
	case e.timeout > 0:
		fmt.Fprintf(&b, "timed out after %s", e.timeout)
	case e.err != nil:
		b.WriteString(e.err.Error())
	case e.code != 0 || e.cut == 0:
		fmt.Fprintf(&b, "exit %d", e.code)
		if e.signal != "" {
			fmt.Fprintf(&b, " (as sh reports a command killed by signal %s)", e.signal)
		}
	}
	if e.cut > 0 {
		if e.timeout > 0 || e.err != nil || e.code != 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "its standard output passed cutover's read limit of %d bytes: the output is not used", e.cut)
	}
	if e.tail != "" {
		b.WriteString(": ")
		b.WriteString(e.tail)
	}
	return b.String()
}

func (e *runError) Unwrap() error { return e.err }

// ExitCode returns the exit code carried by an error from Run or RunShell,
// and whether the command ran to an exit at all (false for transport
// failures, timeouts and signals).
func ExitCode(err error) (int, bool) {
	var re *runError
	if errors.As(err, &re) && re.code >= 0 {
		return re.code, true
	}
	return -1, false
}

// IsOutputCut reports whether err says a command's standard output passed the read limit
// of Run (the first 4 MiB are kept): such output is never used as if it were whole.
func IsOutputCut(err error) bool {
	var re *runError
	return errors.As(err, &re) && re.cut > 0
}

// IsTimeout reports whether err says time ran out: a command hit its
// per-command timeout or its context's deadline, or a connection attempt hit
// the connect timeout.
func IsTimeout(err error) bool {
	var re *runError
	if errors.As(err, &re) && re.timeout > 0 {
		return true
	}
	var de *dialError
	if errors.As(err, &de) && de.timeout > 0 {
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// stderrTail renders the end of a command's standard error on one line for
// an error message.
func stderrTail(b []byte) string {
	lines := trimmedLines(b)
	s := strings.Join(lines, "; ")
	if len(s) <= maxTailInError {
		return s
	}
	s = s[len(s)-maxTailInError:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return "..." + s
}

// headBuffer keeps the first max bytes written to it and discards the rest,
// so a chatty command never blocks or exhausts memory. Safe for concurrent
// use.
type headBuffer struct {
	mu        sync.Mutex
	max       int
	buf       []byte
	truncated bool
}

func newHeadBuffer(max int) *headBuffer { return &headBuffer{max: max} }

func (h *headBuffer) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	room := h.max - len(h.buf)
	if len(p) > room {
		h.buf = append(h.buf, p[:room]...)
		h.truncated = true
	} else {
		h.buf = append(h.buf, p...)
	}
	return len(p), nil
}

// Bytes returns a copy of what was kept.
func (h *headBuffer) Bytes() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]byte(nil), h.buf...)
}

// Truncated reports whether anything was discarded.
func (h *headBuffer) Truncated() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.truncated
}

// stdoutSink is where a command's standard output goes: into a head buffer of the read
// limit (maxStdout), or, for RunOutput, to the caller's writer unbounded.
type stdoutSink struct {
	w    io.Writer
	head *headBuffer // nil when streaming
}

// newStdout returns the sink for out: out itself, or a head buffer when out is nil.
func newStdout(out io.Writer) *stdoutSink {
	if out != nil {
		return &stdoutSink{w: out}
	}
	h := newHeadBuffer(maxStdout)
	return &stdoutSink{w: h, head: h}
}

// bytes returns what the head buffer kept; nil when streaming.
func (s *stdoutSink) bytes() []byte {
	if s.head == nil {
		return nil
	}
	return s.head.Bytes()
}

// cut returns the read limit when the output passed it, otherwise 0.
func (s *stdoutSink) cut() int {
	if s.head == nil || !s.head.Truncated() {
		return 0
	}
	return s.head.max
}

// tailBuffer keeps the last max bytes written to it. Safe for concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return n, nil
	}
	if over := len(t.buf) + len(p) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// Bytes returns a copy of what was kept.
func (t *tailBuffer) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.buf...)
}

// trimmedLines returns the non-blank lines of b, trimmed.
func trimmedLines(b []byte) []string {
	var out []string
	for _, l := range bytes.Split(b, []byte("\n")) {
		if l = bytes.TrimSpace(l); len(l) > 0 {
			out = append(out, string(l))
		}
	}
	return out
}
