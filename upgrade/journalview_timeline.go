package upgrade

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/upgrade/timeline"
)

// drawnStage is a stage the timeline draws as a bar on each node it works on (Drawn says
// which kind of bar); a stage that records no node of its own is drawn on the master.
type drawnStage interface {
	Drawn() timeline.Kind
}

// drawnKind is how the timeline draws a stage: its kind of bar, and whether the stage works on
// the master (which it may not record as a node of its own while it also works on others).
type drawnKind struct {
	kind     timeline.Kind
	onMaster bool
}

// drawnKinds maps the names of the stages the timeline draws to how it draws them, from the
// stage lists themselves.
func drawnKinds() map[string]drawnKind {
	out := map[string]drawnKind{}
	for _, st := range slices.Concat(Stages(), SyncStages(), []Stage{stopAll{}}) {
		if d, ok := st.(drawnStage); ok {
			out[st.Name()] = drawnKind{kind: d.Drawn(), onMaster: st.Where() == OnMaster}
		}
	}
	return out
}

// TimelineOf derives the timeline of run r from what its journal holds: a bar for each node's
// part of each stage the timeline draws (the stop, switch, start and verify of each node of
// a rolling run's batches from the steps the batch timed), when each node's daemons were down
// (its first stop and first start as the downtime's facts keep them, a restart, a stop of a
// later execution to the start after it), and the cluster's window, their union. A node's
// part recorded without times of its own (by a cutover before it kept them), a stage with
// no recorded end and a run that has not ended are drawn as far as the journal goes and
// named in the notes. master is the node a stage that records no node of its own ran on.
func TimelineOf(r journal.Run, master string, pending bool) *timeline.Timeline {
	tl := &timeline.Timeline{Span: timeline.Span{From: r.Started, To: lastRecord(r)}, Pending: pending, Downtime: r.Facts[factDowntime]}
	b := &timelineBuilder{tl: tl, run: r, master: master, kinds: drawnKinds(), rows: map[string]*timeline.Row{}}
	b.batches()
	b.stages()
	b.downtime()
	b.order()
	b.notes()
	return tl
}

// timelineBuilder derives one timeline.
type timelineBuilder struct {
	tl      *timeline.Timeline
	run     journal.Run
	master  string
	kinds   map[string]drawnKind
	rows    map[string]*timeline.Row
	batchOf map[string]int // a batch stage's name -> its index in tl.Batches

	untimed []string // stages whose nodes' parts have no times of their own
	unended []string // stages started and never ended
	bare    []string // batches whose nodes' parts have no steps
}

// lastRecord is when the run ended, or for a run that has not, the last time its journal
// records: an event, a node's end, a step's, a downtime fact.
func lastRecord(r journal.Run) time.Time {
	if !r.Ended.IsZero() {
		return r.Ended
	}
	last := r.Started
	later := func(t time.Time) {
		if t.After(last) {
			last = t
		}
	}
	for _, ev := range r.Events {
		later(ev.At)
		for _, n := range ev.Nodes {
			later(n.End)
			for _, st := range n.Steps {
				later(st.End)
			}
		}
	}
	for k, v := range r.Facts {
		if strings.HasPrefix(k, factDownPrefix) || strings.HasPrefix(k, factUpPrefix) {
			if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
				later(t)
			}
		}
	}
	return last
}

// row returns node's row, making it.
func (b *timelineBuilder) row(node string) *timeline.Row {
	if r, ok := b.rows[node]; ok {
		return r
	}
	r := &timeline.Row{Node: node}
	b.rows[node] = r
	return r
}

// batches takes a rolling run's batches from its facts.
func (b *timelineBuilder) batches() {
	v, ok := b.run.Facts[factBatches]
	if !ok {
		return
	}
	list, err := decodeBatches(v)
	if err != nil {
		b.tl.Notes = append(b.tl.Notes, fmt.Sprintf("the run's batches cannot be read (%v): its nodes are drawn without them", err))
		return
	}
	b.batchOf = map[string]int{}
	for i, bt := range list {
		st := batch{n: i + 1, of: len(list), canary: bt.Canary, nodes: bt.Nodes}
		b.batchOf[st.Name()] = i
		b.tl.Batches = append(b.tl.Batches, timeline.Batch{Name: st.label(), Nodes: bt.Nodes})
	}
}

// stages walks the run's events in order and draws each stage execution that ended, then
// those that did not.
func (b *timelineBuilder) stages() {
	open := map[string]journal.Event{}
	var last time.Time // the time of the record before the event at hand
	for _, ev := range b.run.Events {
		for _, n := range ev.Nodes {
			b.row(n.Node)
		}
		switch ev.State {
		case journal.Started:
			if prev, ok := open[ev.Stage]; ok {
				// Started again by a later execution: the earlier one died in the stage.
				b.unended = append(b.unended, ev.Stage)
				b.draw(prev, timeline.Span{From: prev.At, To: maxTime(prev.At, last)}, false, true)
			}
			open[ev.Stage] = ev
		case journal.Skipped:
			delete(open, ev.Stage)
		default:
			undo := ev.State == journal.Undone || ev.State == journal.UndoFailed
			span := timeline.Span{From: ev.At.Add(-ev.Duration), To: ev.At}
			if st, ok := open[ev.Stage]; ok && !undo {
				span.From = st.At
				delete(open, ev.Stage)
			}
			b.draw(ev, span, undo, false)
		}
		last = ev.At
	}
	var rest []journal.Event
	for _, ev := range open {
		rest = append(rest, ev)
	}
	sort.Slice(rest, func(i, j int) bool { return rest[i].Seq < rest[j].Seq })
	for _, ev := range rest {
		b.unended = append(b.unended, ev.Stage)
		b.draw(ev, timeline.Span{From: ev.At, To: b.tl.To}, false, true)
	}
}

// draw adds the bars of one stage execution that spans span: one per node it recorded (a
// batch's from its nodes' steps), or one on the master for a stage that recorded none.
func (b *timelineBuilder) draw(ev journal.Event, span timeline.Span, undo, open bool) {
	if i, ok := b.batchOf[ev.Stage]; ok {
		b.drawBatch(ev, &b.tl.Batches[i], span)
		return
	}
	dk, ok := b.kinds[ev.Stage]
	if !ok {
		return
	}
	bar := timeline.Bar{Kind: dk.kind, Stage: ev.Stage, Span: span, Undo: undo, Open: open, Failed: ev.State == journal.UndoFailed}
	onMaster := slices.ContainsFunc(ev.Nodes, func(n journal.NodeResult) bool { return n.Node == b.master })
	if b.master != "" && !onMaster && (len(ev.Nodes) == 0 || dk.onMaster) {
		// The stage ran on the master from its start to its end: a config migration that
		// records only the nodes it copied the config to, or a stage that records no node.
		mb := bar
		mb.Failed = mb.Failed || ev.State == journal.Failed
		if ev.State == journal.Failed || ev.State == journal.UndoFailed {
			mb.Error = ev.Message
		}
		r := b.row(b.master)
		r.Bars = append(r.Bars, mb)
	}
	for _, n := range ev.Nodes {
		nb := bar
		nb.Failed, nb.Error = bar.Failed || !n.OK, n.Error
		if n.Start.IsZero() {
			nb.Whole = true
			if !slices.Contains(b.untimed, ev.Stage) {
				b.untimed = append(b.untimed, ev.Stage)
			}
		} else {
			nb.Span = timeline.Span{From: n.Start, To: n.End}
		}
		r := b.row(n.Node)
		r.Bars = append(r.Bars, nb)
	}
}

// drawBatch adds a batch's span and the bars of its nodes' steps.
func (b *timelineBuilder) drawBatch(ev journal.Event, bt *timeline.Batch, span timeline.Span) {
	if bt.Span.From.IsZero() || span.From.Before(bt.Span.From) {
		bt.Span.From = span.From
	}
	bt.Span.To = maxTime(bt.Span.To, span.To)
	for _, n := range ev.Nodes {
		if len(n.Steps) == 0 {
			if !slices.Contains(b.bare, ev.Stage) {
				b.bare = append(b.bare, ev.Stage)
			}
			continue
		}
		r := b.row(n.Node)
		// The node failed in its last forward step; the steps after it switched it back.
		failed := -1
		for i, st := range n.Steps {
			if !n.OK && !strings.HasPrefix(st.Name, undoStep) {
				failed = i
			}
		}
		for i, st := range n.Steps {
			name, back := strings.CutPrefix(st.Name, undoStep)
			kind := timeline.Kind(name)
			if !kind.Valid() {
				continue
			}
			bar := timeline.Bar{Kind: kind, Stage: ev.Stage, Span: timeline.Span{From: st.Start, To: st.End},
				Undo: back || ev.State == journal.Undone || ev.State == journal.UndoFailed}
			if i == failed {
				bar.Failed, bar.Error = true, n.Error
			}
			r.Bars = append(r.Bars, bar)
		}
	}
}

// downtime draws when each node's daemons were down, and the cluster's window: their union.
func (b *timelineBuilder) downtime() {
	var all []timeline.Span
	for node, r := range b.rows {
		spans, still := b.nodeDown(node, r.Bars)
		r.Down, r.StillDown = timeline.Union(spans), still
		all = append(all, r.Down...)
	}
	b.tl.Down = timeline.Union(all)
}

// nodeDown returns when node's daemons were down: from its first stop to its first start as
// the downtime's facts keep them, during each restart, and from each stop after the first
// start (a later execution's), or each stop at all without the facts (a journal older than
// them), to the end of the start after it; still is true when they were not started again by
// the timeline's end.
func (b *timelineBuilder) nodeDown(node string, bars []timeline.Bar) (spans []timeline.Span, still bool) {
	fact := func(prefix string) (time.Time, bool) {
		t, err := time.Parse(time.RFC3339Nano, b.run.Facts[prefix+node])
		return t, err == nil
	}
	down, downOK := fact(factDownPrefix)
	up, upOK := fact(factUpPrefix)
	switch {
	case downOK && upOK && !up.Before(down):
		spans = append(spans, timeline.Span{From: down, To: up})
	case downOK:
		spans, still = append(spans, timeline.Span{From: down, To: b.tl.To}), true
	}
	bars = slices.Clone(bars)
	slices.SortStableFunc(bars, func(x, y timeline.Bar) int { return x.From.Compare(y.From) })
	for i, bar := range bars {
		switch {
		case bar.Kind == timeline.Restart && !bar.Undo:
			spans = append(spans, bar.Span)
		case b.stops(bar) && (!downOK || upOK && bar.From.After(up)):
			end := timeline.Span{From: bar.From, To: b.tl.To}
			j := slices.IndexFunc(bars[i+1:], b.starts)
			if j < 0 {
				still = true
			} else {
				end.To = bars[i+1+j].To
			}
			spans = append(spans, end)
		}
	}
	return spans, still
}

// stops reports whether bar stopped its node's daemons: a stop, but not the undo of a stop
// stage (which starts them), while a batch's switch back stops them as its switch did.
func (b *timelineBuilder) stops(bar timeline.Bar) bool {
	_, batch := b.batchOf[bar.Stage]
	return bar.Kind == timeline.Stop && (!bar.Undo || batch)
}

// starts reports whether bar started its node's daemons: a start, or the undo of a stop
// stage, that ended.
func (b *timelineBuilder) starts(bar timeline.Bar) bool {
	_, batch := b.batchOf[bar.Stage]
	return !bar.Open && (bar.Kind == timeline.Start || (bar.Kind == timeline.Stop && bar.Undo && !batch))
}

// order puts the rows in the timeline: the master first, then the others by name (a
// rolling run's batches draw theirs in batch order).
func (b *timelineBuilder) order() {
	for _, r := range b.rows {
		sort.SliceStable(r.Bars, func(i, j int) bool { return r.Bars[i].From.Before(r.Bars[j].From) })
		b.tl.Rows = append(b.tl.Rows, *r)
	}
	sort.Slice(b.tl.Rows, func(i, j int) bool {
		x, y := b.tl.Rows[i].Node, b.tl.Rows[j].Node
		if (x == b.master) != (y == b.master) {
			return x == b.master
		}
		return naturalLess(x, y)
	})
}

// naturalLess orders names with their numbers by value: node2 before node10.
func naturalLess(x, y string) bool {
	px, nx := splitNumber(x)
	py, ny := splitNumber(y)
	if px != py || len(nx) == len(ny) {
		return x < y
	}
	return len(nx) < len(ny)
}

// splitNumber splits the decimal digits off the end of s.
func splitNumber(s string) (prefix, number string) {
	i := len(s)
	for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
		i--
	}
	return s[:i], s[i:]
}

// notes say what the journal does not hold, and how the picture makes up for it.
func (b *timelineBuilder) notes() {
	add := func(format string, args ...any) { b.tl.Notes = append(b.tl.Notes, fmt.Sprintf(format, args...)) }
	if b.run.Ended.IsZero() {
		add("the run has not ended: the picture stops at its last record, %s", b.tl.To.UTC().Format(time.RFC3339Nano))
	}
	if len(b.untimed) > 0 {
		add("the journal holds no times of each node's own for %s (a cutover that did not record them ran it): those bars span the whole stage on each of its nodes", joinNames(b.untimed))
	}
	if len(b.bare) > 0 {
		add("the journal holds no steps of the nodes of %s (a cutover that did not record them ran it): only the batch's span is drawn", joinNames(b.bare))
	}
	for _, st := range b.unended {
		add("%s started and has no recorded end (the run stopped in it): its bars run to the next record, marked >", st)
	}
	var still []string
	for _, r := range b.tl.Rows {
		if r.StillDown {
			still = append(still, r.Node)
		}
	}
	if len(still) > 0 {
		add("the daemons of %s were not started again by the end of the picture", joinNames(still))
	}
	if !slices.ContainsFunc(b.tl.Rows, func(r timeline.Row) bool { return len(r.Bars) > 0 }) {
		add("the run has none of the stages the timeline draws (a stop, switch, config, start, restart or verify)")
	}
	if len(b.run.Offline) > 0 {
		add("offline, not in the run: %s", joinNames(b.run.Offline))
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
