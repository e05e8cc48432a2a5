package nodes_test

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/cutover/cutover/nodes"
)

var quoteTests = []struct {
	in, want string
}{
	{"", "''"},
	{"stop", "stop"},
	{"/usr/lib/demoapp/1.0/usr/sbin/demoapp-daemons", "/usr/lib/demoapp/1.0/usr/sbin/demoapp-daemons"},
	{"--to=1.2.0", "'--to=1.2.0'"},
	{"a_b@c%d+e:f,g.h-i", "a_b@c%d+e:f,g.h-i"},
	{"two words", "'two words'"},
	{"it's", `'it'\''s'`},
	{"'", `''\'''`},
	{"''", `''\'''\'''`},
	{`"double"`, `'"double"'`},
	{"$(reboot)", "'$(reboot)'"},
	{"`reboot`", "'`reboot`'"},
	{"${HOME}", "'${HOME}'"},
	{"$HOME", "'$HOME'"},
	{"a;b", "'a;b'"},
	{"a&&b||c|d", "'a&&b||c|d'"},
	{"a>b<c", "'a>b<c'"},
	{"*?[x]", "'*?[x]'"},
	{"~root", "'~root'"},
	{"#comment", "'#comment'"},
	{"!", "'!'"},
	{"{a,b}", "'{a,b}'"},
	{"back\\slash", `'back\slash'`},
	{"line1\nline2", "'line1\nline2'"},
	{"tab\there", "'tab\there'"},
	{"trailing newline\n", "'trailing newline\n'"},
	{"ünïcødé", "'ünïcødé'"},
	{"日本語", "'日本語'"},
	{"if", "'if'"},
	{"then", "'then'"},
	{"time", "'time'"},
	{"A=b", "'A=b'"},
	{" ", "' '"},
	{"\x01ctl", "'\x01ctl'"},
}

func TestQuote(t *testing.T) {
	t.Parallel()
	for _, tt := range quoteTests {
		if got := nodes.Quote(tt.in); got != tt.want {
			t.Errorf("Quote(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestQuoteShell hands every quoted test string to a real sh and checks
// that it reads back each one exactly.
func TestQuoteShell(t *testing.T) {
	t.Parallel()
	var in []string
	for _, tt := range quoteTests {
		in = append(in, tt.in)
	}
	// Also every byte but NUL on its own, and all of them together.
	var all []byte
	for b := 1; b < 256; b++ {
		in = append(in, string(rune(b)), string([]byte{byte(b)}))
		all = append(all, byte(b))
	}
	in = append(in, string(all))

	script := "printf '%s\\000' " + nodes.QuoteArgs(in)
	out, err := exec.Command("sh", "-c", script).Output()
	if err != nil {
		t.Fatalf("sh -c: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if len(got) != len(in) {
		t.Fatalf("sh read back %d words, want %d", len(got), len(in))
	}
	for i := range in {
		if got[i] != in[i] {
			t.Errorf("sh read back %q, want %q (quoted as %s)", got[i], in[i], nodes.Quote(in[i]))
		}
	}

	// In command position too: a quoted word is a command name, never a
	// keyword or an assignment.
	for _, word := range []string{"if", "A=b", "!", "{"} {
		out, err := exec.Command("sh", "-c", nodes.Quote(word)+" 2>&1; echo status=$?").Output()
		if err != nil || !bytes.Contains(out, []byte("status=127")) {
			t.Errorf("sh -c %s: %s (%v), want command not found (127)", nodes.Quote(word), out, err)
		}
	}
}

func TestQuoteArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{""}, "''"},
		{[]string{"demoapp", "daemons", "stop"}, "demoapp daemons stop"},
		{[]string{"echo", "a b", "", "it's"}, `echo 'a b' '' 'it'\''s'`},
	}
	for _, tt := range tests {
		if got := nodes.QuoteArgs(tt.in); got != tt.want {
			t.Errorf("QuoteArgs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzQuote checks that sh reads back any quoted string unchanged.
func FuzzQuote(f *testing.F) {
	for _, tt := range quoteTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.IndexByte(s, 0) >= 0 {
			return // a shell word cannot hold NUL
		}
		out, err := exec.Command("sh", "-c", "printf '%s' "+nodes.Quote(s)).Output()
		if err != nil {
			t.Fatalf("sh -c: %v", err)
		}
		if string(out) != s {
			t.Errorf("sh read back %q, want %q", out, s)
		}
	})
}
