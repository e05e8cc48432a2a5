package nodes

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
)

// errMalformedFrame says a shell's output broke its framing.
var errMalformedFrame = errors.New("the node's command shell sent a malformed frame")

// QuotedPrefix renders the start of what a node sent for an error message: at most 64 bytes
// (a boot identity whole), quoted and escaped, with "..." when there was more. What a node
// prints is quoted in a message only through it, never whole.
func QuotedPrefix(b []byte) string {
	const n = 64
	if len(b) > n {
		return fmt.Sprintf("%q...", b[:n])
	}
	return fmt.Sprintf("%q", b)
}

// bootSink keeps what a node sends before its command shell's ready line, up to maxBoot bytes;
// over is closed once it sent more.
type bootSink struct {
	mu   sync.Mutex
	buf  []byte
	past bool
	over chan struct{}
}

func (b *bootSink) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.past {
		return len(p), nil
	}
	if room := maxBoot - len(b.buf); len(p) > room {
		b.buf = append(b.buf, p[:room]...)
		b.past = true
		close(b.over)
		return len(p), nil
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// kept returns what was kept, and whether the node sent more.
func (b *bootSink) kept() ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf...), b.past
}

// startShell opens a session and starts a command shell for tag in it, within ctx. It returns
// errNoBash when the node has no bash, and a *shellRefused naming node when what the node sent
// frame is one command's output on one stream of a shell: it passes to sink up to the command's
// status line, and the stream is read up to the end line.
type frame struct {
	start, end []byte // "\nBOUNDARY " and "\nBOUNDARY end\n"
	sink       io.Writer
	ask        bool          // the shell asks before the command runs (a command's standard output)
	status     int           // the command's status; -1 when it has none; set before passed closes
	startTime  uint64        // the command's start time from its status line; 0 when unknown
	asked      chan struct{} // closed at the shell's ask (standard output only)
	passed     chan struct{} // closed at the status line, or at the end line when there was none
	ended      chan struct{} // closed at the end line
	isPassed   bool
	isAsked    bool
}

// framerChunk bounds what the framer's buffer takes in at once.
const framerChunk = 4096

// framer splits one output stream of a shell into its commands' frames. Output outside a frame
// (before a command's ask, between a command's status and end lines, or with no command
// waiting) is dropped. Its buffer holds at most a chunk of input and what may still be the
// start of a boundary's line (a boundary, its word and newline).
type framer struct {
	mu     sync.Mutex
	buf    []byte
	frames []*frame
	failed bool
	err    error  // why the framing broke; nil when the stream merely ended
	broke  func() // called (in a goroutine of its own) when the framing breaks
}

// add starts the frame of the command with boundary b, after those already waiting; ask says
// the shell asks before the command runs, and nothing before the ask is the command's.
func (f *framer) add(b string, sink io.Writer, ask bool) *frame {
	fr := &frame{start: []byte("\n" + b + " "), end: []byte("\n" + b + " end\n"), sink: sink, ask: ask, status: -1,
		asked: make(chan struct{}), passed: make(chan struct{}), ended: make(chan struct{})}
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
	n := len(p)
	for len(p) > 0 && !f.failed {
		c := min(len(p), framerChunk)
		f.buf = append(f.buf, p[:c]...)
		p = p[c:]
		f.scan()
	}
	return n, nil
}

// fail ends every waiting frame without a status: the stream ended.
func (f *framer) fail() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.end()
}

// end ends every waiting frame without a status and drops what is buffered; the caller holds
// mu.
func (f *framer) end() {
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

// problem returns the error of a framing that broke, nil otherwise.
func (f *framer) problem() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// malformed breaks the framing: every waiting frame ends without a status, and broke closes
// the shell; the caller holds mu.
func (f *framer) malformed(why string, word []byte) {
	f.err = fmt.Errorf("%w: %s %s", errMalformedFrame, why, QuotedPrefix(word))
	f.end()
	if f.broke != nil {
		go f.broke()
	}
}

// parseStatus reads a status line's word, "STATUS" or "STATUS START": a shell's exit status
// (0 to 255) and a start time in clock ticks (0 when it is not a decimal that fits).
func parseStatus(word string) (int, uint64, bool) {
	st, start, _ := strings.Cut(word, " ")
	if st == "" || len(st) > 3 || strings.Trim(st, "0123456789") != "" {
		return 0, 0, false
	}
	n, _ := strconv.Atoi(st)
	if n > 255 {
		return 0, 0, false
	}
	t, err := strconv.ParseUint(start, 10, 64)
	if err != nil {
		t = 0
	}
	return n, t, true
}

// scan moves what the buffer holds into the frames; the caller holds mu.
func (f *framer) scan() {
	for len(f.frames) > 0 {
		fr := f.frames[0]
		if !fr.isPassed {
			i := bytes.Index(f.buf, fr.start)
			if i < 0 {
				keep := min(len(f.buf), len(fr.start)-1)
				if !fr.ask || fr.isAsked {
					fr.sink.Write(f.buf[:len(f.buf)-keep])
				}
				f.buf = f.buf[len(f.buf)-keep:]
				return
			}
			if i > 0 {
				if !fr.ask || fr.isAsked {
					fr.sink.Write(f.buf[:i])
				}
				f.buf = f.buf[i:]
			}
			rest := f.buf[len(fr.start):]
			nl := bytes.IndexByte(rest[:min(len(rest), maxFrameWord+1)], '\n')
			if nl < 0 {
				if len(rest) > maxFrameWord {
					f.malformed(fmt.Sprintf("no end of line within %d bytes of a boundary:", maxFrameWord), rest)
				}
				return
			}
			word := rest[:nl]
			switch {
			case string(word) == "ask" && fr.ask && !fr.isAsked:
				f.buf = rest[nl+1:]
				fr.isAsked = true
				close(fr.asked)
				continue
			case string(word) == "end":
				f.buf = rest[nl+1:]
				fr.isPassed = true
				close(fr.passed)
				close(fr.ended)
				f.frames = f.frames[1:]
				continue
			}
			st, start, ok := parseStatus(string(word))
			if !ok || fr.ask && !fr.isAsked {
				f.malformed("a boundary's line is neither ask, end nor a status:", word)
				return
			}
			fr.status, fr.startTime, fr.isPassed = st, start, true
			// The end line follows; keep its leading newline.
			f.buf = rest[nl:]
			close(fr.passed)
		}
		i := bytes.Index(f.buf, fr.end)
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
