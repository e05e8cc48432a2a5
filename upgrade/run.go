package upgrade

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/config"
)

// Direction says which way a run moves the cluster.
type Direction string

// The directions of a run.
const (
	Up   Direction = "upgrade"
	Down Direction = "downgrade"
	Same Direction = "same-minor"
)

// Conn is what the stages need of one node: commands and file operations. *nodes.Conn
// satisfies it, locally on the master and over SSH elsewhere.
type Conn interface {
	layout.FS
	RunShell(ctx context.Context, script string) (nodes.Result, error)
	RunInput(ctx context.Context, input io.Reader, argv ...string) (nodes.Result, error)
	ReadFile(name string) ([]byte, error)
	WriteFileAtomic(name string, data []byte, perm fs.FileMode) error
	MkdirAll(name string, perm fs.FileMode) error
}

// Dialer hands out the connection to a node, reusing it for the whole run.
type Dialer interface {
	Conn(ctx context.Context, node string) (Conn, error)
}

// Journal is the durable record a run writes; *journal.Store satisfies it.
type Journal interface {
	CreateRun(ctx context.Context, r journal.Run) (journal.Run, error)
	Record(ctx context.Context, runID uint64, ev journal.Event) (journal.Event, error)
	SetFacts(ctx context.Context, runID uint64, facts map[string]string) (map[string]string, error)
	SetOffline(ctx context.Context, runID uint64, nodes []string) error
	SetTravel(ctx context.Context, runID uint64, t journal.Travel) error
	SetPastPONR(ctx context.Context, runID uint64, past bool) error
	Finish(ctx context.Context, runID uint64, outcome journal.Outcome, at time.Time) error
}

// Run is one run of the stage machine: what every stage reads, and what stages learn on the way.
type Run struct {
	ID uint64
	// Kind is the workflow the run belongs to.
	Kind Kind
	// Target is where the run goes: its versions, their directories and the direction.
	Target
	Config    *config.Config
	Layout    *layout.Layout
	Inventory *nodes.Inventory
	Force     map[string]bool
	// Online are the nodes the run works on; Offline the ones it skips.
	Online, Offline []nodes.Node
	// Backup is the path of the archive the backup stage wrote.
	Backup string
	// Resumed is true when the run continues an interrupted one.
	Resumed bool
	// Batches are the batches of a rolling run; nil for an all-at-once run.
	Batches []Batch

	// watch is how the run watches the cluster after its finish; a zero Window watches not.
	watch watchPlan

	// list, title and details are the recipe's (begin.go): the stages, what the run does
	// and, for the confirmation, what it will change.
	list    []Stage
	title   string
	details func() []string

	dial    Dialer
	journal Journal
	report  Reporter
	log     *runLog
	// clock tells the time the run journals (stage and node times, the downtime's facts);
	// nil is time.Now. Tests set it to draw the same timeline at every run.
	clock func() time.Time

	// stage is the stage running now and what it did so far (stage_log.go).
	stage stageLog

	mu         sync.Mutex
	facts      map[string]string
	unsaved    map[string]string // facts remembered and not journaled yet (see Remember)
	failed     []string          // stages that failed past the point of no return
	tolerated  []string          // batches that failed within the failure budget, with their nodes
	undoFailed bool              // an undo step failed: the cluster is not as before
	watchWhy   string            // why the watch failed (watch.go)
	// history is what the executions of this run did with its stages (stage_history.go).
	history stageHistory
	// pastPONR is whether an execution of this run crossed its point of no return.
	pastPONR bool
	// perNode is what this execution knows about each node (node_state.go).
	perNode nodeState
	// planPending is the run pending while `cutover plan` looks at the cluster: its nodes
	// may be mixed on purpose.
	planPending *journal.Intent
	// metricsWarned is set once a failed metrics write was warned about.
	metricsWarned bool
}

// now is the time by the run's clock.
func (r *Run) now() time.Time {
	if r.clock != nil {
		return r.clock()
	}
	return time.Now()
}

// loadJournal takes over what the journal holds of an earlier execution of the run: its
// facts, the states its stages reached, which of them started, and whether it crossed its
// point of no return.
func (r *Run) loadJournal(jr journal.Run) {
	r.facts = jr.Facts
	r.pastPONR = jr.PastPONR
	r.history.load(jr.Events)
}

// setOffline moves the named nodes from the run's online nodes to its offline ones.
func (r *Run) setOffline(names []string) {
	var online []nodes.Node
	for _, n := range r.Online {
		if slices.Contains(names, n.Name) {
			if !slices.ContainsFunc(r.Offline, func(o nodes.Node) bool { return o.Name == n.Name }) {
				r.Offline = append(r.Offline, n)
			}
			continue
		}
		online = append(online, n)
	}
	r.Online = online
}

// setPastPONR records durably whether the run crossed its point of no return.
func (r *Run) setPastPONR(ctx context.Context, past bool) error {
	if r.journal == nil || r.ID == 0 {
		return nil
	}
	return r.journal.SetPastPONR(context.WithoutCancel(ctx), r.ID, past)
}

// setTravel records durably the direction the run travels in.
func (r *Run) setTravel(ctx context.Context, t journal.Travel) error {
	if r.journal == nil || r.ID == 0 {
		return nil
	}
	return r.journal.SetTravel(context.WithoutCancel(ctx), r.ID, t)
}

// Failed lists the stages that failed past the point of no return so far.
func (r *Run) Failed() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.failed...)
}

// Tolerated lists the batches that failed within the failure budget so far, with their nodes.
func (r *Run) Tolerated() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.tolerated...)
}

// UndoFailed reports whether an undo step failed, so that the intent must be kept.
func (r *Run) UndoFailed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.undoFailed
}

// MasterNode is the node cutover runs on.
func (r *Run) MasterNode() nodes.Node {
	n, _ := r.Inventory.Lookup(r.Inventory.Master)
	return n
}

// Others are the online nodes other than the master.
func (r *Run) Others() []nodes.Node {
	var out []nodes.Node
	for _, n := range r.Online {
		if n.Name != r.Inventory.Master {
			out = append(out, n)
		}
	}
	return out
}

// Conn returns the connection to node.
func (r *Run) Conn(ctx context.Context, node string) (Conn, error) {
	c, err := r.dial.Conn(ctx, node)
	if err != nil {
		if ctx.Err() == nil {
			r.perNode.saw(node, "", false)
		}
		return nil, err
	}
	r.perNode.saw(node, "", true)
	return &loggedConn{Conn: c, node: node, log: r.log}, nil
}

// Fact returns what a stage learned under key, on this run's first execution of it.
func (r *Run) Fact(key string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.facts[key]
	return v, ok
}

// Learn records value under key unless an earlier execution of the run already learned it,
// and returns the value that holds: the first one. A resumed run therefore never mistakes
// its own earlier actions (its own drain, its own pause) for the operator's.
func (r *Run) Learn(ctx context.Context, key, value string) (string, error) {
	if v, ok := r.Fact(key); ok {
		return v, nil
	}
	facts := map[string]string{key: value}
	if r.journal != nil && r.ID != 0 {
		stored, err := r.journal.SetFacts(ctx, r.ID, facts)
		if err != nil {
			return "", fmt.Errorf("journal: record %s: %w", key, err)
		}
		facts = stored
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.facts == nil {
		r.facts = map[string]string{}
	}
	for k, v := range facts {
		if _, ok := r.facts[k]; !ok {
			r.facts[k] = v
		}
	}
	return r.facts[key], nil
}

// Remember records value under key unless an earlier execution (or this one) already has,
// like Learn, but leaves the journal write to the runner, which stores every remembered fact
// in one write as the stage ends. It is for facts a fan-out learns on every node, such as
// the moment each node's daemons stopped, where a journal write (an fsync) per node would
// cost more than the facts are worth; a crash before the stage ends loses them.
func (r *Run) Remember(key, value string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.facts[key]; ok {
		return
	}
	if r.facts == nil {
		r.facts = map[string]string{}
	}
	if r.unsaved == nil {
		r.unsaved = map[string]string{}
	}
	r.facts[key] = value
	r.unsaved[key] = value
}

// factsCopy is a copy of the run's facts.
func (r *Run) factsCopy() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]string, len(r.facts))
	for k, v := range r.facts {
		out[k] = v
	}
	return out
}

// Note sets the short summary shown on the stage's line, such as "waited for 3 jobs".
func (r *Run) Note(format string, args ...any) {
	r.stage.note(fmt.Sprintf(format, args...))
}

// Wait reports a long wait: what the stage waits for. It is shown at most every few seconds.
func (r *Run) Wait(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.log.Printf("wait: %s", msg)
	e := Event{Time: time.Now(), Type: "wait", Run: r.ID, Message: msg}
	if r.stage.wait(&e) {
		r.report.Report(e)
	}
}

// Warn reports something the operator should know that does not stop the run.
func (r *Run) Warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.log.Printf("warning: %s", msg)
	r.stage.warn(msg)
	r.report.Report(Event{Time: time.Now(), Type: "warn", Run: r.ID, Message: msg})
}

var waitReportEvery = 5 * time.Second

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// errSkipped is returned by a stage that has nothing to do in this run.
var errSkipped = errors.New("skipped")
