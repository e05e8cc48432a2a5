package timeline

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// TextOptions say how WriteText draws.
type TextOptions struct {
	// Width is the terminal's width in columns; no line is longer unless it is narrower than
	// a name and a few columns of time.
	Width int
	// Escape makes a string from the journal safe to print (control characters escaped);
	// nil prints it as it is.
	Escape func(string) string
}

// The letters of the bars; an undo's bar is in lower case.
var letters = map[Kind]rune{Stop: 'S', Switch: 'W', Config: 'C', Start: 'U', Restart: 'R', Verify: 'V'}

// The marks of the text form.
const (
	markNodeDown    = '.' // the node's daemons were down
	markClusterDown = '=' // the cluster's downtime window
	markBatch       = '#' // a rolling run's batch
	markFailed      = 'X' // the last column of a failed bar
	markOpen        = '>' // the last column of a bar whose stage has no end in the journal
	minChart        = 10  // the fewest columns of time drawn, whatever the width
	maxName         = 24  // the widest name column
)

// WriteText draws tl for a terminal: a header, the time axis, one line per node (under its
// batch in a rolling run), the cluster's downtime window, a legend and the notes.
func WriteText(w io.Writer, tl *Timeline, o TextOptions) error {
	if o.Escape == nil {
		o.Escape = func(s string) string { return s }
	}
	if o.Width <= 0 {
		o.Width = 80
	}
	t := &textDrawing{tl: tl, o: o, w: bufio.NewWriter(w)}
	t.layout()
	t.header()
	t.axis()
	for _, g := range tl.groups() {
		if g.batch != nil {
			t.line(g.batch.Name, t.spanCells(g.batch.Span, markBatch))
		}
		for _, r := range g.rows {
			name := r.Node
			if g.batch != nil {
				name = "  " + name
			}
			t.line(name, t.rowCells(r))
		}
	}
	t.line("downtime", t.downCells(tl.Down, markClusterDown))
	t.legend()
	return t.w.Flush()
}

// textDrawing is one text drawing under way.
type textDrawing struct {
	tl    *Timeline
	o     TextOptions
	w     *bufio.Writer
	nameW int           // the width of the name column
	cols  int           // the columns of time
	step  time.Duration // the time one column stands for
}

// layout sizes the name column and the chart to the width.
func (t *textDrawing) layout() {
	t.nameW = len("downtime")
	for _, g := range t.tl.groups() {
		indent := 0
		if g.batch != nil {
			indent = 2
			t.nameW = max(t.nameW, width(t.o.Escape(g.batch.Name)))
		}
		for _, r := range g.rows {
			t.nameW = max(t.nameW, indent+width(t.o.Escape(r.Node)))
		}
	}
	t.nameW = min(t.nameW, maxName, max(t.o.Width/3, len("downtime")))
	t.cols = max(t.o.Width-t.nameW-1, minChart)
	total := t.tl.Duration()
	if total <= 0 {
		total = time.Second
	}
	t.step = max(time.Duration(math.Ceil(float64(total)/float64(t.cols))), time.Nanosecond)
}

// header prints the run's title, its time span and its downtime.
func (t *textDrawing) header() {
	t.text(t.tl.Title)
	span := fmt.Sprintf("%s to %s (%s); one column is %s", stamp(t.tl.From), clock(t.tl.To), seconds(t.tl.Duration()), seconds(t.step))
	if t.tl.Pending {
		span += "; pending: it waits to be resumed or aborted"
	}
	t.text(span)
	down := "downtime: none recorded"
	switch {
	case t.tl.Downtime != "":
		down = "downtime: " + t.tl.Downtime
	case len(t.tl.Down) > 0:
		down = "downtime: " + seconds(t.tl.DownTotal()) + " so far"
	}
	t.text(down)
	fmt.Fprintln(t.w)
}

// axis prints the time labels and their ticks over the chart.
func (t *textDrawing) axis() {
	tick := niceTick(t.step, 10)
	labels := []rune(strings.Repeat(" ", t.cols))
	ticks := []rune(strings.Repeat(" ", t.cols))
	next := 0
	for at := time.Duration(0); ; at += tick {
		c := int(at / t.step)
		if c >= t.cols {
			break
		}
		ticks[c] = '|'
		l := offset(at)
		if c >= next && c+len(l) <= t.cols {
			copy(labels[c:], []rune(l))
			next = c + len(l) + 1
		}
	}
	t.line("", labels)
	t.line("", ticks)
}

// rowCells draws a node's line: where its daemons were down, then its bars.
func (t *textDrawing) rowCells(r *Row) []rune {
	cells := t.downCells(r.Down, markNodeDown)
	// The longer bars first: a short one drawn over them stays in sight.
	bars := slices.Clone(r.Bars)
	slices.SortStableFunc(bars, func(x, y Bar) int { return cmp.Compare(y.Duration(), x.Duration()) })
	for _, b := range bars {
		from, to := t.cells(b.Span)
		mark := letters[b.Kind]
		if b.Undo {
			mark = []rune(strings.ToLower(string(mark)))[0]
		}
		for c := from; c <= to; c++ {
			cells[c] = mark
		}
		switch {
		case b.Failed:
			cells[to] = markFailed
		case b.Open:
			cells[to] = markOpen
		}
	}
	return cells
}

// downCells draws spans with mark on an empty line.
func (t *textDrawing) downCells(spans []Span, mark rune) []rune {
	cells := []rune(strings.Repeat(" ", t.cols))
	for _, s := range spans {
		from, to := t.cells(s)
		for c := from; c <= to; c++ {
			cells[c] = mark
		}
	}
	return cells
}

// spanCells draws one span with mark; nothing for a zero span.
func (t *textDrawing) spanCells(s Span, mark rune) []rune {
	if s.From.IsZero() {
		return []rune(strings.Repeat(" ", t.cols))
	}
	return t.downCells([]Span{s}, mark)
}

// cells are the first and last columns a span covers: at least one.
func (t *textDrawing) cells(s Span) (from, to int) {
	col := func(d time.Duration) int { return min(max(int(d/t.step), 0), t.cols-1) }
	from = col(s.From.Sub(t.tl.From))
	end := s.To.Sub(t.tl.From)
	to = col(end - 1)
	if end%t.step != 0 {
		to = col(end)
	}
	return from, max(from, to)
}

// line prints a name column and the chart's cells, without trailing blanks.
func (t *textDrawing) line(name string, cells []rune) {
	name = fit(t.o.Escape(name), t.nameW)
	fmt.Fprintln(t.w, strings.TrimRight(name+strings.Repeat(" ", t.nameW-width(name)+1)+string(cells), " "))
}

// text prints a string from the journal, escaped and wrapped to the width.
func (t *textDrawing) text(s string) {
	for _, l := range wrap(t.o.Escape(s), t.o.Width, "  ") {
		fmt.Fprintln(t.w, l)
	}
}

// legend says what the letters and marks stand for, then the notes.
func (t *textDrawing) legend() {
	fmt.Fprintln(t.w)
	var parts []string
	for _, k := range Kinds {
		parts = append(parts, fmt.Sprintf("%c %s", letters[k], k))
	}
	parts = append(parts, "lower case: undo", "X failed", "> no end recorded",
		". node down", "= cluster down")
	if len(t.tl.Batches) > 0 {
		parts = append(parts, "# batch")
	}
	for _, l := range wrap(strings.Join(parts, ", "), t.o.Width, "  ") {
		fmt.Fprintln(t.w, l)
	}
	for _, n := range t.tl.Notes {
		t.text("note: " + n)
	}
}

// niceTick is the shortest of the usual steps of a time axis that spans at least minCols
// columns of step each.
func niceTick(step time.Duration, minCols int) time.Duration {
	for _, d := range []time.Duration{
		100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
		time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
		time.Hour, 2 * time.Hour, 6 * time.Hour, 12 * time.Hour,
	} {
		if d >= step*time.Duration(minCols) {
			return d
		}
	}
	return 24 * time.Hour * (1 + step*time.Duration(minCols)/(24*time.Hour))
}

// offset labels a point of the axis by the time since the run started: "0s", "1.5s", "2m".
func offset(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// fit cuts s to n columns, marking the cut with "~".
func fit(s string, n int) string {
	if width(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:max(n-1, 0)]) + "~"
}

// width is how many columns s takes: one a rune.
func width(s string) int { return utf8.RuneCountInString(s) }

// wrap breaks s into lines of at most n columns at spaces, the lines after the first
// indented; a word longer than a line is cut.
func wrap(s string, n int, indent string) []string {
	var out []string
	for _, para := range strings.Split(s, "\n") {
		line := ""
		for _, word := range cutWords(strings.Fields(para), n-len(indent)) {
			switch {
			case line == "":
				line = word
				if len(out) > 0 {
					line = indent + word
				}
			case width(line)+1+width(word) <= n:
				line += " " + word
			default:
				out = append(out, line)
				line = indent + word
			}
		}
		out = append(out, line)
	}
	return out
}

// cutWords cuts each word longer than n columns into pieces of n.
func cutWords(words []string, n int) []string {
	n = max(n, 1)
	var out []string
	for _, w := range words {
		r := []rune(w)
		for len(r) > n {
			out = append(out, string(r[:n]))
			r = r[n:]
		}
		out = append(out, string(r))
	}
	return out
}
