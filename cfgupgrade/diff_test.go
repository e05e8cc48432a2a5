package cfgupgrade

import (
	"fmt"
	"strings"
	"testing"
)

func TestUnifiedDiff(t *testing.T) {
	t.Parallel()
	lines := func(n int, change map[int]string) string {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			s, ok := change[i]
			if !ok {
				s = fmt.Sprintf("line %d", i)
			}
			if s != "" {
				b.WriteString(s + "\n")
			}
		}
		return b.String()
	}
	tests := []struct {
		name, a, b, want string
	}{
		{"equal", "a\nb\n", "a\nb\n", ""},
		{"from empty", "", "a\nb\n", "--- a\n+++ b\n@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{"to empty", "a\n", "", "--- a\n+++ b\n@@ -1 +0,0 @@\n-a\n"},
		{"one change in the middle", lines(20, nil), lines(20, map[int]string{10: "ten"}),
			"--- a\n+++ b\n@@ -7,7 +7,7 @@\n line 7\n line 8\n line 9\n-line 10\n+ten\n line 11\n line 12\n line 13\n"},
		{"two changes close together make one hunk", lines(20, nil), lines(20, map[int]string{5: "five", 11: "eleven"}),
			"--- a\n+++ b\n@@ -2,13 +2,13 @@\n line 2\n line 3\n line 4\n-line 5\n+five\n line 6\n line 7\n line 8\n line 9\n line 10\n-line 11\n+eleven\n line 12\n line 13\n line 14\n"},
		{"two changes far apart make two hunks", lines(30, nil), lines(30, map[int]string{2: "", 28: "x"}),
			"--- a\n+++ b\n@@ -1,5 +1,4 @@\n line 1\n-line 2\n line 3\n line 4\n line 5\n@@ -25,6 +24,6 @@\n line 25\n line 26\n line 27\n-line 28\n+x\n line 29\n line 30\n"},
		{"insertion at the end", "a\nb\n", "a\nb\nc\n", "--- a\n+++ b\n@@ -1,2 +1,3 @@\n a\n b\n+c\n"},
		{"repeated lines", "{\n}\n{\n}\n", "{\n}\n{\nx\n}\n{\n}\n", "--- a\n+++ b\n@@ -1,4 +1,7 @@\n {\n }\n {\n+x\n+}\n+{\n }\n"},
	}
	for _, tt := range tests {
		if got := unifiedDiff("a", "b", []byte(tt.a), []byte(tt.b)); got != tt.want {
			t.Errorf("%s: unifiedDiff =\n%s\nwant\n%s", tt.name, got, tt.want)
		}
	}
}

// TestEditScript checks that the edit script turns x into y for texts with
// few and with many repeated lines.
func TestEditScript(t *testing.T) {
	t.Parallel()
	tests := [][2]string{
		{"a b c d e", "a x c d e f"},
		{"a a a b b", "b b a a a"},
		{"", "x y"},
		{"x y", ""},
		{"} } { { } x", "{ } x } { {"},
		{"1 2 3 4 5 6 7 8 9", "9 8 7 6 5 4 3 2 1"},
		{"u v w", "u v w"},
	}
	for _, tt := range tests {
		x, y := strings.Fields(tt[0]), strings.Fields(tt[1])
		var gotX, gotY []string
		for _, e := range editScript(x, y) {
			if e.kind != '+' {
				gotX = append(gotX, e.text)
			}
			if e.kind != '-' {
				gotY = append(gotY, e.text)
			}
		}
		if strings.Join(gotX, " ") != tt[0] || strings.Join(gotY, " ") != tt[1] {
			t.Errorf("editScript(%q, %q) rebuilds %q and %q", tt[0], tt[1], gotX, gotY)
		}
	}
}
