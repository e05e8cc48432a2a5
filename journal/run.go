package journal

import (
	"fmt"
	"time"
)

// State is the state a stage reached in one transition.
type State string

// The states of a stage. A stage records Started before it runs, then Done or
// Failed; before the point of no return a completed stage may later be undone
// (Undone or UndoFailed). Skipped records a stage that did not apply to the
// run (for example config-downgrade in an upgrade).
const (
	Started    State = "started"
	Done       State = "done"
	Failed     State = "failed"
	Undone     State = "undone"
	UndoFailed State = "undo-failed"
	Skipped    State = "skipped"
)

// Valid reports whether s is one of the states above.
func (s State) Valid() bool {
	switch s {
	case Started, Done, Failed, Undone, UndoFailed, Skipped:
		return true
	}
	return false
}

// Outcome is how a run ended, or Running while it has not.
type Outcome string

// The outcomes of a run.
const (
	// Running is a run that has not ended: in progress, or interrupted and
	// waiting to be resumed or aborted.
	Running Outcome = "running"
	// Succeeded is a run that switched every online node.
	Succeeded Outcome = "done"
	// RolledBack is a run that failed or was interrupted before its point of
	// no return and was undone: the cluster is as it was.
	RolledBack Outcome = "rolled-back"
	// FailedPastPONR is a run that failed after its point of no return; it
	// keeps its intent and is finished by a resume.
	FailedPastPONR Outcome = "failed"
	// Aborted is a run that the operator aborted.
	Aborted Outcome = "aborted"
	// Archived is a run whose intent was set aside because another node is
	// the master now.
	Archived Outcome = "archived"
)

// Valid reports whether o is one of the outcomes above.
func (o Outcome) Valid() bool {
	switch o {
	case Running, Succeeded, RolledBack, FailedPastPONR, Aborted, Archived:
		return true
	}
	return false
}

// Travel is the direction a run is travelling: forward to its target, or back to where it
// came from after a failure, a signal or an abort. A crash never changes it: a run that was
// rolling back is finished by rolling back.
type Travel string

// The directions of travel. The empty Travel of a run that never set one is Forward.
const (
	Forward     Travel = "forward"
	RollingBack Travel = "rolling-back" // undoing after a failure or a signal before the PONR
	Aborting    Travel = "aborting"     // undoing because the operator asked (upgrade --abort)
)

// Valid reports whether t is one of the directions above.
func (t Travel) Valid() bool {
	switch t {
	case Forward, RollingBack, Aborting:
		return true
	}
	return false
}

// NodeResult is one node's part of a stage.
type NodeResult struct {
	Node       string
	OK         bool
	ExitCode   int
	Error      string
	StderrTail string
	Duration   time.Duration
	// Start and End are when the stage's work on the node began and ended (the first began
	// and the last ended when the stage worked on the node more than once); zero in a journal
	// written before cutover recorded them.
	Start, End time.Time
	// Steps are the named parts of the node's work that the stage times on their own, such
	// as the stop, switch, start and verify of a node in a rolling run's batch.
	Steps []Step
}

// Step is one named part of a node's work in a stage, with when it began and ended.
type Step struct {
	Name       string
	Start, End time.Time
}

// Event is one stage transition.
type Event struct {
	Seq      uint64        // assigned by the store, increasing per run
	Stage    string        // stage name, e.g. "drain"
	Index    int           // the stage's 1-based position in the run's stage list
	State    State         // the state the stage reached
	At       time.Time     // when the transition was recorded
	Duration time.Duration // for done/failed/undone: how long the stage (or undo) took
	Nodes    []NodeResult  // per-node results, for stages that ran on nodes
	Message  string        // summary line or error text
}

// Run is one run as the journal holds it.
type Run struct {
	ID        uint64            // assigned by the store, increasing
	Kind      string            // "upgrade", "sync", ... (free text)
	From, To  string            // the versions switched from and to
	Direction string            // "upgrade", "downgrade", "same-minor"
	Host      string            // the host the run was started on
	PID       int               // the process that started the run
	Started   time.Time         // when the run was created
	Ended     time.Time         // zero while running
	Outcome   Outcome           // Running until the run is finished
	Offline   []string          // nodes skipped as offline
	Travel    Travel            // forward, or rolling back (never turned forward again)
	PastPONR  bool              // set durably before the point-of-no-return stage changes anything
	Facts     map[string]string // what stages learned on their first execution (never overwritten)
	Events    []Event           // in Seq order
}

// LastEvent returns the last recorded transition of stage, and false if the
// stage has none.
func (r Run) LastEvent(stage string) (Event, bool) {
	for i := len(r.Events) - 1; i >= 0; i-- {
		if r.Events[i].Stage == stage {
			return r.Events[i], true
		}
	}
	return Event{}, false
}

// StageState returns the state of stage's last transition, and false if the
// stage has none.
func (r Run) StageState(stage string) (State, bool) {
	ev, ok := r.LastEvent(stage)
	return ev.State, ok
}

// Reached reports whether stage recorded any transition in this run. Since a
// stage records Started before it runs, a run that reached its
// point-of-no-return stage may have passed that point, even if the stage
// failed or the process died in it.
func (r Run) Reached(stage string) bool {
	_, ok := r.LastEvent(stage)
	return ok
}

// Pending reports whether the run has not ended (its outcome is Running).
func (r Run) Pending() bool { return r.Outcome == Running }

// runRecord is the stored form of a run's header (the "run" key).
type runRecord struct {
	Kind      string    `json:"kind"`
	From      string    `json:"from"`
	To        string    `json:"to"`
	Direction string    `json:"direction"`
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	Started   time.Time `json:"started"`
	Ended     time.Time `json:"ended,omitzero"`
	Outcome   Outcome   `json:"outcome"`
	Offline   []string  `json:"offline,omitempty"`
	Travel    Travel    `json:"travel,omitempty"`
	PastPONR  bool      `json:"past_ponr,omitempty"`
}

// eventRecord is the stored form of an event; its seq is the key.
type eventRecord struct {
	Stage      string       `json:"stage"`
	Index      int          `json:"index"`
	State      State        `json:"state"`
	At         time.Time    `json:"at"`
	DurationNS int64        `json:"duration_ns,omitempty"`
	Nodes      []nodeRecord `json:"nodes,omitempty"`
	Message    string       `json:"message,omitempty"`
}

// nodeRecord is the stored form of a NodeResult.
type nodeRecord struct {
	Node       string `json:"node"`
	OK         bool   `json:"ok"`
	ExitCode   int    `json:"exit_code"`
	Error      string `json:"error,omitempty"`
	StderrTail string `json:"stderr_tail,omitempty"`
	DurationNS int64  `json:"duration_ns,omitempty"`
	// Start, End and Steps were added without a schema change: a journal without them
	// reads as before (zero times, no steps), and an older cutover ignores them.
	Start time.Time    `json:"start,omitzero"`
	End   time.Time    `json:"end,omitzero"`
	Steps []stepRecord `json:"steps,omitempty"`
}

// stepRecord is the stored form of a Step.
type stepRecord struct {
	Name  string    `json:"name"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

func toRunRecord(r Run) runRecord {
	return runRecord{
		Kind: r.Kind, From: r.From, To: r.To, Direction: r.Direction,
		Host: r.Host, PID: r.PID, Started: r.Started, Ended: r.Ended,
		Outcome: r.Outcome, Offline: r.Offline, Travel: r.Travel, PastPONR: r.PastPONR,
	}
}

func (rec runRecord) run(id uint64) Run {
	r := Run{
		ID: id, Kind: rec.Kind, From: rec.From, To: rec.To, Direction: rec.Direction,
		Host: rec.Host, PID: rec.PID, Started: rec.Started, Ended: rec.Ended,
		Outcome: rec.Outcome, Offline: rec.Offline, Travel: rec.Travel, PastPONR: rec.PastPONR, Facts: map[string]string{},
	}
	if r.Travel == "" {
		r.Travel = Forward
	}
	return r
}

func toEventRecord(ev Event) eventRecord {
	rec := eventRecord{
		Stage: ev.Stage, Index: ev.Index, State: ev.State, At: ev.At,
		DurationNS: int64(ev.Duration), Message: ev.Message,
	}
	for _, n := range ev.Nodes {
		nr := nodeRecord{
			Node: n.Node, OK: n.OK, ExitCode: n.ExitCode, Error: n.Error,
			StderrTail: n.StderrTail, DurationNS: int64(n.Duration), Start: n.Start, End: n.End,
		}
		for _, st := range n.Steps {
			nr.Steps = append(nr.Steps, stepRecord{Name: st.Name, Start: st.Start, End: st.End})
		}
		rec.Nodes = append(rec.Nodes, nr)
	}
	return rec
}

func (rec eventRecord) event(seq uint64) Event {
	ev := Event{
		Seq: seq, Stage: rec.Stage, Index: rec.Index, State: rec.State, At: rec.At,
		Duration: time.Duration(rec.DurationNS), Message: rec.Message,
	}
	for _, n := range rec.Nodes {
		nr := NodeResult{
			Node: n.Node, OK: n.OK, ExitCode: n.ExitCode, Error: n.Error,
			StderrTail: n.StderrTail, Duration: time.Duration(n.DurationNS), Start: n.Start, End: n.End,
		}
		for _, st := range n.Steps {
			nr.Steps = append(nr.Steps, Step{Name: st.Name, Start: st.Start, End: st.End})
		}
		ev.Nodes = append(ev.Nodes, nr)
	}
	return ev
}

// validEvent checks an event before it is recorded.
func validEvent(ev Event) error {
	switch {
	case ev.Stage == "":
		return fmt.Errorf("event has no stage name")
	case !ev.State.Valid():
		return fmt.Errorf("stage %s: unknown state %q", ev.Stage, ev.State)
	case ev.Index < 0:
		return fmt.Errorf("stage %s: negative index %d", ev.Stage, ev.Index)
	case ev.Duration < 0:
		return fmt.Errorf("stage %s: negative duration %s", ev.Stage, ev.Duration)
	}
	for _, n := range ev.Nodes {
		if n.Node == "" {
			return fmt.Errorf("stage %s: node result without a node name", ev.Stage)
		}
		if !n.Start.IsZero() && n.End.Before(n.Start) {
			return fmt.Errorf("stage %s: node %s ends before it starts", ev.Stage, n.Node)
		}
		for _, st := range n.Steps {
			if st.Name == "" || st.End.Before(st.Start) {
				return fmt.Errorf("stage %s: node %s: step %q without a name or ending before it starts", ev.Stage, n.Node, st.Name)
			}
		}
	}
	return nil
}
