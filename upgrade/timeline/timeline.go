// Package timeline draws the timeline of a run: one row per node, one bar per stage of the
// node's work (stop, switch, config, start, restart, verify) on one time axis, the time each
// node's daemons were down and the cluster's downtime window marked. [WriteText] draws it for
// a terminal, [WriteHTML] as a self-contained page (inline SVG, a table for screen readers).
//
// The package only draws: package upgrade derives a [Timeline] from a run's journal. Every
// string of a Timeline comes from the journal and is untrusted (node names, errors): the text
// form escapes what the caller's Escape says, the page escapes everything for HTML.
package timeline

import (
	"slices"
	"time"
)

// Kind is the kind of work a bar stands for.
type Kind string

// The kinds of bars, in the order the stage machine runs them.
const (
	Stop    Kind = "stop"
	Switch  Kind = "switch"
	Config  Kind = "config"
	Start   Kind = "start"
	Restart Kind = "restart"
	Verify  Kind = "verify"
)

// Kinds are the kinds of bars, in the order the legend lists them.
var Kinds = []Kind{Stop, Switch, Config, Start, Restart, Verify}

// Valid reports whether k is one of Kinds.
func (k Kind) Valid() bool { return slices.Contains(Kinds, k) }

// Span is a stretch of time.
type Span struct{ From, To time.Time }

// Duration is how long the span lasts.
func (s Span) Duration() time.Duration { return s.To.Sub(s.From) }

// Bar is one node's part of one stage.
type Bar struct {
	Kind  Kind
	Stage string // the stage as the journal names it: "stop-nodes", "batch-2"
	Span
	Failed bool   // the node's part failed
	Error  string // why, as the journal has it
	Undo   bool   // the work of the stage's undo
	Open   bool   // the journal holds no end of the stage: the bar runs to the last record
	Whole  bool   // the stage's whole span: the journal holds no times of the node's own
}

// Row is one node's line.
type Row struct {
	Node string
	Bars []Bar
	// Down are the stretches the node's daemons were down.
	Down []Span
	// StillDown is true when the node's daemons were down at the timeline's end.
	StillDown bool
}

// Batch is one batch of a rolling run: its nodes' rows are drawn under it.
type Batch struct {
	Name  string   // "batch 1 (canary)"
	Span  Span     // when the batch ran; zero when it never did
	Nodes []string // its nodes, in the order the rows are drawn
}

// Timeline is what is drawn of one run.
type Timeline struct {
	// Title names the run: "run 3: upgrade 1.0.0 -> 1.1.0 (upgrade): done".
	Title string
	// Span is the time axis: from the run's start to its end, or to its last record.
	Span
	// Rows are the nodes' lines: for a rolling run in the order of its batches.
	Rows []Row
	// Batches are a rolling run's batches; none for a run that switches all at once.
	Batches []Batch
	// Down is the cluster's downtime window: when some node's daemons were down.
	Down []Span
	// Downtime is the run's downtime as its journal keeps it: "8.1s (node1 7.9s, ...)".
	Downtime string
	// Pending is true when the run waits to be resumed or aborted.
	Pending bool
	// Notes say what the journal does not hold and how the picture makes up for it.
	Notes []string
}

// row returns the row of node, or nil.
func (tl *Timeline) row(node string) *Row {
	for i := range tl.Rows {
		if tl.Rows[i].Node == node {
			return &tl.Rows[i]
		}
	}
	return nil
}

// groups are the rows as they are drawn: each batch with its nodes' rows, then the rows of
// no batch; one group without a batch for a run that switches all at once.
func (tl *Timeline) groups() []group {
	var out []group
	seen := map[string]bool{}
	for i := range tl.Batches {
		g := group{batch: &tl.Batches[i]}
		for _, n := range tl.Batches[i].Nodes {
			if r := tl.row(n); r != nil && !seen[n] {
				seen[n] = true
				g.rows = append(g.rows, r)
			}
		}
		out = append(out, g)
	}
	rest := group{}
	for i := range tl.Rows {
		if !seen[tl.Rows[i].Node] {
			rest.rows = append(rest.rows, &tl.Rows[i])
		}
	}
	if len(rest.rows) > 0 || len(out) == 0 {
		out = append(out, rest)
	}
	return out
}

// group is a batch (or none) and the rows drawn under it.
type group struct {
	batch *Batch
	rows  []*Row
}

// DownTotal is how long the cluster's downtime window lasts.
func (tl *Timeline) DownTotal() time.Duration {
	var d time.Duration
	for _, s := range tl.Down {
		d += s.Duration()
	}
	return d
}

// Union merges spans into the stretches that at least one of them covers, in order.
func Union(spans []Span) []Span {
	s := slices.Clone(spans)
	slices.SortFunc(s, func(a, b Span) int { return a.From.Compare(b.From) })
	var out []Span
	for _, sp := range s {
		if sp.To.Before(sp.From) {
			continue
		}
		if n := len(out); n > 0 && !sp.From.After(out[n-1].To) {
			if sp.To.After(out[n-1].To) {
				out[n-1].To = sp.To
			}
			continue
		}
		out = append(out, sp)
	}
	return out
}

// clock formats a time of the timeline: UTC, to the millisecond.
func clock(t time.Time) string { return t.UTC().Format("15:04:05.000Z") }

// stamp formats a time with its date: UTC, to the millisecond.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// seconds formats a duration for people: "0.350s", "12.4s", "3m05s".
func seconds(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
