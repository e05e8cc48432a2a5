package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestJournalTimeline draws the timeline of a real run on the one-node cluster, with the flags
// before and after the run id, to the width $COLUMNS says: the node's row with its stop and
// start, the downtime window, and no line wider than the terminal.
func TestJournalTimeline(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	if code, out, errOut := lc.cutover("upgrade", "--to=1.1.0", "--yes"); code != 0 {
		t.Fatalf("upgrade exit %d\n%s%s", code, out, errOut)
	}
	host, _ := os.Hostname()
	for _, width := range []string{"60", "132"} {
		t.Setenv("COLUMNS", width)
		for _, args := range [][]string{{"journal", "--timeline", "1"}, {"journal", "1", "--timeline"}} {
			code, out, errOut := lc.cutover(args...)
			if code != 0 || errOut != "" {
				t.Fatalf("%v: exit %d, stderr %q", args, code, errOut)
			}
			t.Logf("%v at COLUMNS=%s:\n%s", args, width, out)
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			w := map[string]int{"60": 60, "132": 132}[width]
			var row, down string
			for _, l := range lines {
				if n := utf8.RuneCountInString(l); n > w {
					t.Errorf("%v at COLUMNS=%s: line of %d columns: %q", args, width, n, l)
				}
				if strings.HasPrefix(l, host+" ") || strings.HasPrefix(l, fit(host, 20)+" ") {
					row = l
				}
				if strings.HasPrefix(l, "downtime ") {
					down = l
				}
			}
			if !strings.HasPrefix(lines[0], "run 1: upgrade 1.0.0 -> 1.1.0 (upgrade): done") {
				t.Errorf("%v: first line %q, want the run's title", args, lines[0])
			}
			if !strings.Contains(row, "S") || !strings.Contains(row, "U") || !strings.Contains(down, "=") {
				t.Errorf("%v: node row %q and downtime row %q, want a stop, a start and the window:\n%s", args, row, down, out)
			}
		}
	}
}

// fit is what the timeline shows of a long name: cut to n columns, the cut marked.
func fit(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "~"
}

// TestJournalTimelineRefusals: what does not go together is a usage error that writes
// nothing.
func TestJournalTimelineRefusals(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	if code, out, errOut := lc.cutover("upgrade", "--to=1.1.0", "--yes"); code != 0 {
		t.Fatalf("upgrade exit %d\n%s%s", code, out, errOut)
	}
	page := filepath.Join(t.TempDir(), "page.html")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"journal", "--timeline"}, "name it"},
		{[]string{"journal", "--html=" + page, "1"}, "add --timeline"},
		{[]string{"journal", "1", "--html", page}, "add --timeline"},
		{[]string{"--output", "json", "journal", "--timeline", "1"}, "as data"},
		{[]string{"journal", "1", "--timeline", "2"}, "at most one run id"},
		{[]string{"journal", "1", "--nonsense"}, "not defined"},
		{[]string{"journal", "--timeline", "7"}, "no run 7"},
	} {
		code, _, errOut := lc.cutover(tt.args...)
		if code != exitUsage || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tt.args, code, errOut, exitUsage, tt.want)
		}
	}
	if _, err := os.Stat(page); !os.IsNotExist(err) {
		t.Errorf("a refused command wrote %s: %v", page, err)
	}
}

// TestJournalTimelineOldJournal draws a run that a cutover before the nodes' own times wrote
// (the journal package's schema 1 fixture: a switch that failed on node2, rolled back): it
// draws the switch over the stage's span on both nodes, node2's failed, and says what the
// journal lacks.
func TestJournalTimelineOldJournal(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	old, err := os.ReadFile(filepath.Join("..", "..", "journal", "testdata", "journal-schema1.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(lc.path("state"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lc.path("state/journal.db"), old, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("COLUMNS", "100")
	code, out, errOut := lc.cutover("journal", "1", "--timeline")
	if code != 0 || errOut != "" {
		t.Fatalf("journal 1 --timeline: exit %d, stderr %q", code, errOut)
	}
	for _, re := range []string{
		`(?m)^run 1: upgrade 1\.0\.0 -> 1\.1\.0 \(upgrade\): rolled-back$`,
		`(?m)^node1 +W+$`,
		`(?m)^node2 +W*X$`,
		`note: the journal holds no times of each node's own for switch`,
	} {
		if !regexp.MustCompile(re).MatchString(strings.ReplaceAll(out, "\n  ", " ")) {
			t.Errorf("the timeline of an old journal does not match %s:\n%s", re, out)
		}
	}
}
