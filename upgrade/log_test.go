package upgrade

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/cutover/cutover/nodes"
)

// TestRunLogEscapesNodeOutput: what a node printed, and a message holding a path a user chose,
// reach the run log with their control characters escaped; the log's own line breaks stay.
func TestRunLogEscapesNodeOutput(t *testing.T) {
	l, err := openRunLog(t.TempDir(), 9)
	if err != nil {
		t.Fatal(err)
	}
	l.Command("node2", "demoapp daemon start", nodes.Result{ExitCode: 1, Stdout: []byte("ok\x1b[2J\n"), Stderr: []byte("bad\r\x9b31m\xff\n")}, errors.New("exit 1"))
	l.Printf("warning: %s", "daemon /usr/lib/app/1.0/\x1b]0;owned\x07x")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	got := string(data)
	for _, c := range []string{"\x1b", "\r", "\x07", "\x9b", "\xff"} {
		if strings.Contains(got, c) {
			t.Errorf("the run log holds %q raw:\n%s", c, got)
		}
	}
	for _, want := range []string{`ok\u001b[2J`, `bad\u000d\x9b31m\xff`, `\u001b]0;owned\u0007x`, "  stderr:\n    bad"} {
		if !strings.Contains(got, want) {
			t.Errorf("the run log lacks %q:\n%s", want, got)
		}
	}
}
