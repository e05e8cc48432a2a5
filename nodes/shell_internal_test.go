package nodes

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestShellNoBashStatus: the shell's own refusal (bash without job control) exits with the
// status the start line uses for a node without bash, so both fall back alike.
func TestShellNoBashStatus(t *testing.T) {
	want := "*) exit " + strconv.Itoa(shellNoBash) + ";;"
	if !strings.Contains(shellScript, want) {
		t.Errorf("shellScript does not refuse with %q", want)
	}
	if line := (&sshClient{}).shellLine("bash", "", "node1", false); !strings.Contains(line, "|| exit "+strconv.Itoa(shellNoBash)+"\n") {
		t.Errorf("shellLine %q does not exit %d without bash", line[:80], shellNoBash)
	}
}

// testBoundary is the boundary of the framer tests' command.
const testBoundary = "0123456789abcdef0123456789abcdef"

// newTestFramer returns a framer with one command's frame (asking first when ask is set) whose
// output goes to sink, and a channel that receives once the framing broke.
func newTestFramer(sink *bytes.Buffer, ask bool) (*framer, *frame, chan struct{}) {
	broke := make(chan struct{}, 1)
	f := &framer{broke: func() { broke <- struct{}{} }}
	return f, f.add(testBoundary, sink, ask), broke
}

// feed writes data to f in pieces of n bytes and returns the largest length its buffer had
// after a piece.
func feed(f *framer, data []byte, n int) int {
	most := 0
	for len(data) > 0 {
		c := min(n, len(data))
		f.Write(data[:c])
		data = data[c:]
		f.mu.Lock()
		most = max(most, len(f.buf))
		f.mu.Unlock()
	}
	return most
}

// isClosed reports whether c is closed.
func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestFramerStatus: a frame passes the command's output to its sink and reads the status line,
// "STATUS START", typed: the start time is a decimal that fits 64 bits or 0; what follows the
// status line up to the end line, and what comes before the shell's ask, is dropped.
func TestFramerStatus(t *testing.T) {
	for _, tc := range []struct {
		name, in, out string
		status        int
		start         uint64
	}{
		{"status and start", "output\n\nB 3 123456\n\nB end\n", "output\n", 3, 123456},
		{"status alone", "x\nB 0\n\nB end\n", "x", 0, 0},
		{"start not a decimal", "\nB 0 12ab\n\nB end\n", "", 0, 0},
		{"start past 64 bits", "\nB 255 99999999999999999999\n\nB end\n", "", 255, 0},
		{"start at 64 bits", "\nB 1 18446744073709551615\n\nB end\n", "", 1, 18446744073709551615},
		{"after the status line", "a\nB 0 7\nleft running: dropped\n\nB end\n", "a", 0, 7},
	} {
		var sink bytes.Buffer
		f, fr, _ := newTestFramer(&sink, true)
		feed(f, []byte(strings.ReplaceAll("before the ask: dropped\nB ask\n"+tc.in, "B ", testBoundary+" ")), 5)
		if !isClosed(fr.asked) || !isClosed(fr.passed) || !isClosed(fr.ended) {
			t.Errorf("%s: asked %v, passed %v, ended %v; want all", tc.name, isClosed(fr.asked), isClosed(fr.passed), isClosed(fr.ended))
		}
		if sink.String() != tc.out || fr.status != tc.status || fr.startTime != tc.start || f.problem() != nil {
			t.Errorf("%s: output %q, status %d, start %d, %v; want %q, %d, %d", tc.name, sink.String(), fr.status, fr.startTime, f.problem(), tc.out, tc.status, tc.start)
		}
	}
}

// TestFramerMalformed: a frame whose line after a boundary is not ask, end or a status, or has
// no end of line within maxFrameWord bytes, breaks the framing at once: the frame passes
// without a status, the error says the frame is malformed and quotes a bounded, escaped prefix
// of it, and the shell is closed. Nothing past the bound is kept.
func TestFramerMalformed(t *testing.T) {
	endless := "\n" + testBoundary + " " + strings.Repeat("\x1b[2J", 1<<18) // a MiB, no newline
	for _, tc := range []struct{ name, in, want string }{
		{"unterminated status", endless, "no end of line within 64 bytes"},
		{"oversized status", "\n" + testBoundary + " " + strings.Repeat("7", 100) + "\n", "no end of line within 64 bytes"},
		{"status too large", "\n" + testBoundary + " 1000 5\n", "neither ask, end nor a status"},
		{"not a status", "\n" + testBoundary + " ok\n", "neither ask, end nor a status"},
		{"negative status", "\n" + testBoundary + " -1\n", "neither ask, end nor a status"},
		{"status before the ask", "\n" + testBoundary + " 0 5\n", "neither ask, end nor a status"},
		{"two asks", "\n" + testBoundary + " ask\n\n" + testBoundary + " ask\n", "neither ask, end nor a status"},
	} {
		var sink bytes.Buffer
		f, fr, broke := newTestFramer(&sink, true)
		most := feed(f, []byte(tc.in), 1024)
		if !isClosed(fr.passed) || !isClosed(fr.ended) || fr.status != -1 {
			t.Errorf("%s: passed %v, ended %v, status %d; want a frame that passed without a status", tc.name, isClosed(fr.passed), isClosed(fr.ended), fr.status)
		}
		err := f.problem()
		if !errors.Is(err, errMalformedFrame) || !strings.Contains(err.Error(), tc.want) || len(err.Error()) > 400 || strings.ContainsAny(err.Error(), "\x1b\n\r") {
			t.Errorf("%s: %v; want a malformed frame that says %q, bounded and escaped", tc.name, err, tc.want)
		}
		select {
		case <-broke:
		case <-time.After(5 * time.Second):
			t.Errorf("%s: the shell was not closed", tc.name)
		}
		if bound := 1024 + len(testBoundary) + 2 + maxFrameWord; most > bound {
			t.Errorf("%s: the framer's buffer held %d bytes, want at most %d", tc.name, most, bound)
		}
		if sink.Len() != 0 {
			t.Errorf("%s: the command's output got %q", tc.name, sink.Bytes())
		}
		// The framer is done: later frames pass at once, and input is dropped.
		if later := f.add("fedcba9876543210fedcba9876543210", &sink, true); !isClosed(later.passed) || !isClosed(later.ended) {
			t.Errorf("%s: a frame added after the framing broke is still waiting", tc.name)
		}
		f.Write([]byte("more"))
		if f.buf != nil {
			t.Errorf("%s: the broken framer keeps %q", tc.name, f.buf)
		}
	}
}

// TestFramerBounded: however a node's output is cut into writes, the framer's buffer holds
// at most a chunk of input and a boundary's line, whether a frame waits for its start (a
// command's megabytes of output, a line without a newline), its ask, or its end line (what a
// process left running writes after its command's status), or no frame waits at all.
func TestFramerBounded(t *testing.T) {
	big := bytes.Repeat([]byte("output without a newline "), 1<<16)
	bound := framerChunk + len(testBoundary) + 2 + maxFrameWord
	for _, tc := range []struct {
		name string
		ask  bool
		pre  string // written before big
	}{
		{"output", false, ""},
		{"before the ask", true, ""},
		{"after the status line", true, "\n" + testBoundary + " ask\n\n" + testBoundary + " 0 1\n"},
	} {
		var sink bytes.Buffer
		f, fr, _ := newTestFramer(&sink, tc.ask)
		f.Write([]byte(tc.pre))
		for _, n := range []int{1, 7, 4096, 1 << 20} {
			if most := feed(f, big, n); most > bound {
				t.Errorf("%s, writes of %d bytes: the framer's buffer held %d bytes, want at most %d", tc.name, n, most, bound)
			}
		}
		if isClosed(fr.ended) || f.problem() != nil {
			t.Errorf("%s: the frame ended (%v), want it still waiting", tc.name, f.problem())
		}
		if want := 4 * len(big); !tc.ask && sink.Len() < want-len(testBoundary)-2 {
			t.Errorf("%s: the sink got %d bytes, want about %d", tc.name, sink.Len(), want)
		}
		if tc.ask && sink.Len() != 0 {
			t.Errorf("%s: the sink got %d bytes, want none", tc.name, sink.Len())
		}
	}
	var f framer
	if most := feed(&f, big, 1<<20); most > framerChunk {
		t.Errorf("no frame: the framer's buffer held %d bytes, want at most %d", most, framerChunk)
	}
}

// TestValidBoot: a boot identity is "" or BOOT_ID/START, the boot id canonical lower-case and
// the start time a decimal of at most 20 digits, either of them possibly empty but not both.
func TestValidBoot(t *testing.T) {
	const id = "0f6c1e4a-2b3d-4e5f-8a9b-0c1d2e3f4a5b"
	for s, want := range map[string]bool{
		"":                                       true,
		id + "/12345":                            true,
		id + "/":                                 true,
		"/12345":                                 true,
		id + "/18446744073709551615":             true,
		"/":                                      false,
		id:                                       false,
		"12345":                                  false,
		strings.ToUpper(id) + "/1":               false,
		id + "/1/2":                              false,
		id + "/-1":                               false,
		id + "/123456789012345678901":            false,
		id + "/12 3":                             false,
		id + "/12\n":                             false,
		"\x1b[2J" + id + "/1":                    false,
		"0f6c1e4a-2b3d-4e5f-8a9b-0c1d2e3f4a5/1":  false,
		"0f6c1e4a+2b3d-4e5f-8a9b-0c1d2e3f4a5b/1": false,
		"0f6c1e4a-2b3d-4e5f-8a9b-0c1d2e3f4a5g/1": false,
		"garbage" + id + "/1":                    false,
	} {
		if got := ValidBoot(s); got != want {
			t.Errorf("ValidBoot(%q) = %v, want %v", s, got, want)
		}
	}
}
