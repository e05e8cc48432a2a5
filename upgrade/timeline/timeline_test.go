package timeline

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

var t0 = time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// sample is a timeline of two nodes, one of them with a long name full of controls.
func sample() *Timeline {
	long := "node-with-a-very-long-name-\x1b[2J-" + strings.Repeat("x", 40)
	return &Timeline{Title: "run 7: upgrade \x1b]0;pwned\x07", Span: Span{t0, at(10000)},
		Rows: []Row{
			{Node: "node1", Bars: []Bar{{Kind: Stop, Stage: "stop-master", Span: Span{at(0), at(1000)}},
				{Kind: Start, Stage: "start", Span: Span{at(5000), at(6000)}, Failed: true, Error: "boom"}},
				Down: []Span{{at(0), at(6000)}}, StillDown: true},
			{Node: long, Bars: []Bar{{Kind: Switch, Stage: "switch", Span: Span{at(3000), at(3001)}},
				{Kind: Verify, Stage: "finish", Span: Span{at(9000), at(10000)}, Open: true}}},
		},
		Down:  []Span{{at(0), at(6000)}},
		Notes: []string{"a note about " + long},
	}
}

// TestWriteTextWidth draws the same timeline at several widths: no line is wider than asked
// (a terminal of 40 columns still gets the fewest columns of time), every control character
// is escaped, a bar however short takes a column, a failed bar ends in X and an open one in >.
func TestWriteTextWidth(t *testing.T) {
	escape := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "\x1b", `\e`), "\x07", `\a`) }
	for _, width := range []int{40, 80, 200} {
		var buf bytes.Buffer
		if err := WriteText(&buf, sample(), TextOptions{Width: width, Escape: escape}); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		if strings.ContainsAny(out, "\x1b\x07") {
			t.Errorf("width %d: a control character reached the output:\n%q", width, out)
		}
		var node1, long string
		for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			if n := utf8.RuneCountInString(l); n > width {
				t.Errorf("width %d: line of %d columns %q", width, n, l)
			}
			switch {
			case strings.HasPrefix(l, "node1 "):
				node1 = l
			case strings.HasPrefix(l, "node-with"):
				long = l
			}
		}
		if !strings.Contains(long, "~") || !strings.Contains(long, "W") || !strings.HasSuffix(long, ">") {
			t.Errorf("width %d: long node's line %q, want its name cut with ~, its switch and an open verify", width, long)
		}
		if !strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(node1, "node1")), "S") || !strings.Contains(node1, "UX") || !strings.Contains(node1, ".") {
			t.Errorf("width %d: node1's line %q, want its stop, a failed start and its down time", width, node1)
		}
	}
}

// TestWriteHTMLEscapes writes a page of a timeline whose strings hold markup: it shows them as
// text, loads nothing and runs nothing.
func TestWriteHTMLEscapes(t *testing.T) {
	tl := sample()
	tl.Rows[0].Node = `<script>alert(1)</script>`
	tl.Rows[0].Bars[1].Error = `"><img src=x onerror=alert(2)>`
	var buf bytes.Buffer
	if err := WriteHTML(&buf, tl, HTMLOptions{Escape: func(s string) string { return strings.ReplaceAll(s, "\x1b", `\e`) }}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, bad := range []string{"<script", "<img", "\x1b", "http://", "https://", "<link", "javascript:"} {
		if strings.Contains(strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, ""), bad) {
			t.Errorf("the page holds %q", bad)
		}
	}
	for _, want := range []string{`&lt;script&gt;alert(1)&lt;/script&gt;`, `failed: &#34;&gt;&lt;img src=x onerror=alert(2)&gt;`,
		`default-src 'none'`, `<g id="downtime"`, `<table id="bars">`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

// TestUnion merges overlapping and touching spans and keeps the others apart.
func TestUnion(t *testing.T) {
	got := Union([]Span{{at(5), at(7)}, {at(0), at(2)}, {at(2), at(3)}, {at(6), at(9)}})
	want := []Span{{at(0), at(3)}, {at(5), at(9)}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Union = %v, want %v", got, want)
	}
}
