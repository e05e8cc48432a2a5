package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestTermSafe(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text\n\tindented ünïcode\n", "plain text\n\tindented ünïcode\n"},
		{"\x1b[2J\x1b]0;owned\x07title", `\u001b[2J\u001b]0;owned\u0007title`},
		{"del\x7f c1\u009b", `del\u007f c1\u009b`},
		{"bad \xff byte\r", `bad \xff byte\u000d`},
	}
	for _, tt := range tests {
		var b strings.Builder
		n, err := termSafe{&b}.Write([]byte(tt.in))
		if err != nil || n != len(tt.in) || b.String() != tt.want {
			t.Errorf("termSafe(%q) = %q, %d, %v; want %q", tt.in, b.String(), n, err, tt.want)
		}
	}
	// JSON output stays valid JSON with the same value.
	doc, _ := json.Marshal(map[string]string{"stderr": "\x1b[31mred\x7f\u0085"})
	var b strings.Builder
	_, _ = termSafe{&b}.Write(doc)
	var back map[string]string
	if err := json.Unmarshal([]byte(b.String()), &back); err != nil || back["stderr"] != "\x1b[31mred\x7f\u0085" {
		t.Errorf("JSON through termSafe = %s (%v), want the same value", b.String(), err)
	}
}

// TestNodeOutputEscaped: a command's output with terminal escapes reaches the operator
// escaped, in the stage's lines and in the error line.
func TestNodeOutputEscaped(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	lc.setCommand("daemons_stop", `printf '\033]0;pwned\007\033[2Jcannot stop\n' >&2; exit 7`)
	code, out, errOut := lc.cutover("upgrade", "--to=1.1.0", "--yes")
	if code != exitFailed {
		t.Fatalf("exit %d, want %d\n%s%s", code, exitFailed, out, errOut)
	}
	if strings.ContainsAny(out+errOut, "\x1b\x07") {
		t.Errorf("raw escape sequences reached the terminal:\n%q\n%q", out, errOut)
	}
	if !strings.Contains(out+errOut, `\u001b]0;pwned`) {
		t.Errorf("the escaped output is missing:\n%s%s", out, errOut)
	}
}
