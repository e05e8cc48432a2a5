package upgrade

import (
	"slices"
	"sync"
	"time"

	"github.com/cutover/cutover/journal"
)

// stageState collects what one stage did, for the journal and the report.
type stageState struct {
	name    string
	index   int
	total   int
	nodes   []journal.NodeResult
	steps   map[string][]journal.Step // the timed steps of each node's work not yet in nodes
	note    string
	warned  []string // the warnings given during the stage, journaled with its end
	lastRpt time.Time
}

// stageLog is the stage of a run that runs now, as the runner began it, and what it did so
// far: each node's result and timed steps, its note and its warnings, which the runner
// journals with the stage's end. Without a stage (before the first one) it records nothing.
// Its methods are safe for concurrent use by a fan-out's goroutines.
type stageLog struct {
	mu  sync.Mutex
	cur *stageState
}

// begin starts the log of stage name, the index-th of total.
func (l *stageLog) begin(name string, index, total int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cur = &stageState{name: name, index: index, total: total}
}

// take hands over what stage name did so far, for the journal: its nodes' results, its note
// and its warnings, the results and warnings then forgotten. It hands over nothing when name
// is not the stage being logged.
func (l *stageLog) take(name string) (nodes []journal.NodeResult, note string, warned []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur == nil || l.cur.name != name {
		return nil, "", nil
	}
	nodes, note, warned = l.cur.nodes, l.cur.note, l.cur.warned
	l.cur.nodes, l.cur.warned = nil, nil
	return nodes, note, warned
}

// name names the stage running now; "" before the first.
func (l *stageLog) name() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur == nil {
		return ""
	}
	return l.cur.name
}

// note sets the stage's summary.
func (l *stageLog) note(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur != nil {
		l.cur.note = msg
	}
}

// warn keeps a warning given during the stage, journaled with its end.
func (l *stageLog) warn(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur != nil {
		l.cur.warned = append(l.cur.warned, msg)
	}
}

// wait decides whether a wait reported now is shown, at most every waitReportEvery per stage,
// and names the stage in e when there is one.
func (l *stageLog) wait(e *Event) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.cur
	if st == nil {
		return true
	}
	if time.Since(st.lastRpt) < waitReportEvery {
		return false
	}
	st.lastRpt = time.Now()
	e.Stage, e.Index, e.Total = st.name, st.index, st.total
	return true
}

// timeStep records that step of node's work in the stage ran from start to end; the node's
// result carries it into the journal with the stage's end.
func (l *stageLog) timeStep(node, step string, start, end time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur == nil {
		return
	}
	if l.cur.steps == nil {
		l.cur.steps = map[string][]journal.Step{}
	}
	l.cur.steps[node] = append(l.cur.steps[node], journal.Step{Name: step, Start: start, End: end})
}

// result records one node's outcome in the stage, with the steps timed meanwhile. A stage
// that works on a node twice (a start, then the check of the daemons) reports it once: from
// the first start to the last end.
func (l *stageLog) result(nr journal.NodeResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur == nil {
		return
	}
	nr.Steps = l.cur.steps[nr.Node]
	delete(l.cur.steps, nr.Node)
	for i, prev := range l.cur.nodes {
		if prev.Node == nr.Node {
			merged := nr
			if !prev.OK {
				merged = prev
			}
			merged.Duration = prev.Duration + nr.Duration
			merged.Start, merged.End = prev.Start, nr.End
			if nr.Start.Before(prev.Start) {
				merged.Start = nr.Start
			}
			if prev.End.After(nr.End) {
				merged.End = prev.End
			}
			merged.Steps = append(slices.Clip(prev.Steps), nr.Steps...)
			l.cur.nodes[i] = merged
			return
		}
	}
	l.cur.nodes = append(l.cur.nodes, nr)
}

// forgetResults drops the nodes' results recorded so far: a stage that repeats its work (the
// watch's checks) journals the last round's.
func (l *stageLog) forgetResults() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur != nil {
		l.cur.nodes = nil
	}
}
