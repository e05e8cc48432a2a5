package timeline

import (
	"fmt"
	"html/template"
	"io"
	"slices"
	"strings"
	"time"
)

// The page's geometry, in SVG user units.
const (
	pageNameW  = 200  // the name column
	pageChartW = 1000 // the time axis
	pageRowH   = 24   // one row
	pageBarH   = 14   // one bar
	pageAxisH  = 28   // the axis labels above the rows
	pageMinBar = 2.0  // the narrowest bar drawn
)

// HTMLOptions say how WriteHTML draws.
type HTMLOptions struct {
	// Escape makes a string from the journal printable (control characters escaped) before it
	// is escaped for HTML; nil leaves it as it is.
	Escape func(string) string
}

// WriteHTML writes tl as a self-contained HTML page: the picture in inline SVG, each bar's
// and window's stage and times in its SVG title (shown on hover), and under it the same as
// tables for screen readers. The page loads nothing and runs no script (its
// Content-Security-Policy forbids both); html/template escapes every string of the journal.
func WriteHTML(w io.Writer, tl *Timeline, o HTMLOptions) error {
	if o.Escape != nil {
		tl = escaped(tl, o.Escape)
	}
	return pageTemplate.Execute(w, newPage(tl))
}

// escaped is a copy of tl with every string of the journal passed through escape.
func escaped(tl *Timeline, escape func(string) string) *Timeline {
	out := *tl
	out.Title, out.Downtime = escape(tl.Title), escape(tl.Downtime)
	out.Notes = nil
	for _, n := range tl.Notes {
		out.Notes = append(out.Notes, escape(n))
	}
	out.Batches = nil
	for _, b := range tl.Batches {
		b.Name = escape(b.Name)
		b.Nodes = slices.Clone(b.Nodes)
		for i := range b.Nodes {
			b.Nodes[i] = escape(b.Nodes[i])
		}
		out.Batches = append(out.Batches, b)
	}
	out.Rows = nil
	for _, r := range tl.Rows {
		r.Node = escape(r.Node)
		r.Bars = slices.Clone(r.Bars)
		for i := range r.Bars {
			r.Bars[i].Stage, r.Bars[i].Error = escape(r.Bars[i].Stage), escape(r.Bars[i].Error)
		}
		out.Rows = append(out.Rows, r)
	}
	return &out
}

// page is what the template draws, every position computed.
type page struct {
	Title, Span, Downtime string
	Width, Height         int
	Axis                  []pageTick
	Down                  []pageRect
	Lines                 []pageLine
	Legend                []Kind
	Bars                  []pageBarRow
	Windows               []pageWindowRow
	Notes                 []string
}

type pageTick struct {
	X     float64
	Label string
}

type pageRect struct {
	X, W  float64
	Y, H  int
	Class string
	Tip   string
}

// pageLine is one row of the picture: a batch or a node.
type pageLine struct {
	Class, Name string
	Y, TextY    int
	Rects       []pageRect
}

// pageBarRow is one bar as a row of the table.
type pageBarRow struct{ Node, Kind, Stage, From, To, Duration, Result string }

// pageWindowRow is one stretch of downtime as a row of the table.
type pageWindowRow struct{ Who, From, To, Duration string }

func newPage(tl *Timeline) page {
	p := page{Title: tl.Title, Legend: Kinds, Notes: tl.Notes, Width: pageNameW + pageChartW + 10,
		Span: fmt.Sprintf("%s to %s (%s)", stamp(tl.From), stamp(tl.To), seconds(tl.Duration()))}
	if tl.Pending {
		p.Span += "; the run is pending: it waits to be resumed or aborted"
	}
	p.Downtime = "none recorded"
	switch {
	case tl.Downtime != "":
		p.Downtime = tl.Downtime
	case len(tl.Down) > 0:
		p.Downtime = seconds(tl.DownTotal()) + " so far"
	}
	x := func(t time.Time) float64 {
		total := tl.Duration()
		if total <= 0 {
			return pageNameW
		}
		return pageNameW + float64(t.Sub(tl.From))/float64(total)*pageChartW
	}
	rect := func(s Span, y, h int, class, tip string) pageRect {
		return pageRect{X: x(s.From), W: max(x(s.To)-x(s.From), pageMinBar), Y: y, H: h, Class: class, Tip: tip}
	}
	y := pageAxisH
	for _, g := range tl.groups() {
		if b := g.batch; b != nil {
			l := pageLine{Class: "batch", Name: b.Name, Y: y, TextY: y + pageRowH/2 + 4}
			if !b.Span.From.IsZero() {
				l.Rects = append(l.Rects, rect(b.Span, y+4, pageRowH-8, "batch-span", fmt.Sprintf("%s: %s", b.Name, spanText(b.Span))))
			}
			p.Lines = append(p.Lines, l)
			y += pageRowH
		}
		for _, r := range g.rows {
			l := pageLine{Class: "row", Name: r.Node, Y: y, TextY: y + pageRowH/2 + 4}
			for _, d := range r.Down {
				l.Rects = append(l.Rects, rect(d, y+pageRowH-5, 3, "node-down", fmt.Sprintf("%s: daemons down, %s", r.Node, spanText(d))))
				p.Windows = append(p.Windows, pageWindowRow{Who: r.Node, From: stamp(d.From), To: stamp(d.To), Duration: seconds(d.Duration())})
			}
			for _, b := range r.Bars {
				l.Rects = append(l.Rects, rect(b.Span, y+(pageRowH-pageBarH)/2-2, pageBarH, barClass(b), fmt.Sprintf("%s: %s, %s", r.Node, barName(b), spanText(b.Span))))
				p.Bars = append(p.Bars, pageBarRow{Node: r.Node, Kind: string(b.Kind), Stage: b.Stage, From: stamp(b.From), To: stamp(b.To),
					Duration: seconds(b.Duration()), Result: barResult(b)})
			}
			p.Lines = append(p.Lines, l)
			y += pageRowH
		}
	}
	for _, d := range tl.Down {
		p.Down = append(p.Down, rect(d, pageAxisH, y-pageAxisH, "downtime", "cluster downtime window: "+spanText(d)))
		p.Windows = append(p.Windows, pageWindowRow{Who: "cluster", From: stamp(d.From), To: stamp(d.To), Duration: seconds(d.Duration())})
	}
	p.Height = y + 8
	tick := niceTick(tl.Duration()/time.Duration(pageChartW/80), 1)
	for at := time.Duration(0); at <= tl.Duration(); at += tick {
		p.Axis = append(p.Axis, pageTick{X: x(tl.From.Add(at)), Label: offset(at)})
	}
	return p
}

// spanText says when a span began and ended, and how long it lasted.
func spanText(s Span) string {
	return fmt.Sprintf("%s to %s (%s)", clock(s.From), clock(s.To), seconds(s.Duration()))
}

// barName names a bar's work: "stop (stop-nodes)", "undo of switch (switch)".
func barName(b Bar) string {
	name := string(b.Kind)
	if b.Undo {
		name = "undo of " + name
	}
	return name + " (" + b.Stage + ")" + strings.TrimSuffix(" "+barResult(b), " ok")
}

// barResult says how a bar's work ended.
func barResult(b Bar) string {
	switch {
	case b.Failed && b.Error != "":
		return "failed: " + b.Error
	case b.Failed:
		return "failed"
	case b.Open:
		return "no end recorded"
	case b.Whole:
		return "ok (the stage's span: no times of the node's own)"
	}
	return "ok"
}

// barClass is a bar's CSS classes.
func barClass(b Bar) string {
	c := "bar " + string(b.Kind)
	if b.Undo {
		c += " undo"
	}
	if b.Failed {
		c += " failed"
	}
	if b.Open {
		c += " open"
	}
	return c
}

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"f": func(v float64) string { return fmt.Sprintf("%.1f", v) },
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>cutover: {{.Title}}</title>
<style>
body { font-family: sans-serif; margin: 1em; color: #222; }
svg text { font-size: 12px; font-family: monospace; }
.tick { stroke: #ccc; }
.downtime { fill: #d62728; fill-opacity: 0.12; }
.node-down { fill: #d62728; fill-opacity: 0.6; }
.batch-span { fill: #888; fill-opacity: 0.35; }
.bar { stroke: #222; stroke-width: 0.5; }
.bar.undo { fill-opacity: 0.4; }
.bar.failed { stroke: #000; stroke-width: 2; stroke-dasharray: 3 2; }
.bar.open { stroke-dasharray: 1 2; }
.stop, .key.stop { fill: #d62728; background: #d62728; }
.switch, .key.switch { fill: #9467bd; background: #9467bd; }
.config, .key.config { fill: #ff7f0e; background: #ff7f0e; }
.start, .key.start { fill: #2ca02c; background: #2ca02c; }
.restart, .key.restart { fill: #17becf; background: #17becf; }
.verify, .key.verify { fill: #1f77b4; background: #1f77b4; }
.key { display: inline-block; width: 1em; height: 1em; vertical-align: middle; }
table { border-collapse: collapse; margin-top: 1em; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: left; font-family: monospace; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p>{{.Span}}. Downtime: {{.Downtime}}.</p>
<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-labelledby="timeline-title" width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}">
<title id="timeline-title">Timeline of {{.Title}}</title>
<g class="axis">{{range .Axis}}
<line class="tick" x1="{{f .X}}" y1="18" x2="{{f .X}}" y2="{{$.Height}}"></line><text x="{{f .X}}" y="14">{{.Label}}</text>{{end}}
</g>
<g id="downtime" class="downtime-window">{{range .Down}}
<rect class="{{.Class}}" x="{{f .X}}" y="{{.Y}}" width="{{f .W}}" height="{{.H}}"><title>{{.Tip}}</title></rect>{{end}}
</g>{{range .Lines}}
<g class="{{.Class}}" data-node="{{.Name}}">
<text x="4" y="{{.TextY}}">{{.Name}}</text>{{range .Rects}}
<rect class="{{.Class}}" x="{{f .X}}" y="{{.Y}}" width="{{f .W}}" height="{{.H}}"><title>{{.Tip}}</title></rect>{{end}}
</g>{{end}}
</svg>
<p>{{range .Legend}}<span class="key {{.}}"></span> {{.}} &nbsp; {{end}}Pale bars are undos, dashed outlines failed, dotted ones without a recorded end; the pale red band is the cluster's downtime window, the red line under a node's bars the time its daemons were down.</p>
<table id="bars">
<caption>Every bar of the timeline</caption>
<thead><tr><th scope="col">Node</th><th scope="col">Work</th><th scope="col">Stage</th><th scope="col">From</th><th scope="col">To</th><th scope="col">Duration</th><th scope="col">Result</th></tr></thead>
<tbody>{{range .Bars}}
<tr><td>{{.Node}}</td><td>{{.Kind}}</td><td>{{.Stage}}</td><td>{{.From}}</td><td>{{.To}}</td><td>{{.Duration}}</td><td>{{.Result}}</td></tr>{{end}}
</tbody>
</table>
<table id="downtime-table">
<caption>Downtime: the cluster's window and each node's</caption>
<thead><tr><th scope="col">Who</th><th scope="col">Down from</th><th scope="col">To</th><th scope="col">Duration</th></tr></thead>
<tbody>{{range .Windows}}
<tr><td>{{.Who}}</td><td>{{.From}}</td><td>{{.To}}</td><td>{{.Duration}}</td></tr>{{end}}
</tbody>
</table>{{if .Notes}}
<ul class="notes">{{range .Notes}}
<li>{{.}}</li>{{end}}
</ul>{{end}}
</body>
</html>
`))
