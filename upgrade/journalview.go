package upgrade

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/upgrade/config"
	"github.com/cutover/cutover/upgrade/timeline"
)

// JournalOptions say what `cutover journal` shows.
type JournalOptions struct {
	// Run is a run id as the operator typed it; "" lists every run.
	Run string
	// Timeline derives the run's timeline too (JournalReport.Timeline); it needs Run.
	Timeline bool
}

// JournalReport is what `cutover journal` shows: every run, oldest first, or the one run
// asked for with its facts and stage transitions.
type JournalReport struct {
	// Path is the journal file.
	Path string `json:"journal"`
	// Runs are the runs, oldest first; with JournalOptions.Run, exactly that run.
	Runs []RunReport `json:"runs"`
	// Detail is true when Runs holds the one run asked for, with its facts and events.
	Detail bool `json:"-"`
	// Timeline is the run's timeline when JournalOptions.Timeline asked for it.
	Timeline *timeline.Timeline `json:"-"`
}

// RunReport is one run as the journal holds it.
type RunReport struct {
	ID        uint64    `json:"id"`
	Kind      string    `json:"kind"`
	From      string    `json:"from"`
	To        string    `json:"to"`
	Direction string    `json:"direction"`
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	Started   time.Time `json:"started"`
	Ended     time.Time `json:"ended,omitzero"`
	// config.Duration is how long the run took; zero while it has not ended.
	Duration time.Duration `json:"duration_ns"`
	// Outcome is how the run ended (done, rolled-back, failed, aborted, archived), or
	// "running" while a cutover process holds the run lock, or "interrupted" for a run that
	// has not ended while no process holds the lock.
	Outcome string `json:"outcome"`
	// Pending is true when the intent file names the run: it waits for
	// 'cutover upgrade --resume' or '--abort'.
	Pending bool `json:"pending"`
	// Offline are the nodes the run skipped as offline.
	Offline []string `json:"offline"`
	// Watch is how the run's watch stands or ended; nil for a run that does not watch.
	Watch *WatchStatus `json:"watch,omitempty"`
	// Facts are what the run's stages learned on their first execution (detail only).
	Facts map[string]string `json:"facts,omitzero"`
	// Events are the run's stage transitions in the order they were recorded (detail only).
	Events []StageEvent `json:"events,omitzero"`
}

// StageEvent is one stage transition of a run.
type StageEvent struct {
	Seq   uint64 `json:"seq"`
	Stage string `json:"stage"`
	// Index is the stage's position in the run's stage list (1-based); 0 for a step that runs
	// before the list, such as the stop of every daemon when a run resumes past its point of
	// no return.
	Index    int           `json:"index"`
	State    string        `json:"state"`
	At       time.Time     `json:"at"`
	Duration time.Duration `json:"duration_ns"`
	Message  string        `json:"message,omitempty"`
	Nodes    []NodeReport  `json:"nodes,omitempty"`
}

// NodeReport is one node's part of a stage transition.
type NodeReport struct {
	Node       string        `json:"node"`
	OK         bool          `json:"ok"`
	ExitCode   int           `json:"exit_code"`
	Error      string        `json:"error,omitempty"`
	StderrTail string        `json:"stderr_tail,omitempty"`
	Duration   time.Duration `json:"duration_ns"`
	// Start and End are when the stage's work on the node began and ended; absent from a
	// journal written before cutover recorded them.
	Start time.Time `json:"start,omitzero"`
	End   time.Time `json:"end,omitzero"`
	// Steps are the parts of the node's work timed on their own: the stop, switch, start and
	// verify of a node in a rolling run's batch.
	Steps []StepReport `json:"steps,omitempty"`
}

// StepReport is one timed part of a node's work in a stage.
type StepReport struct {
	Name  string    `json:"name"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// Outcomes a RunReport shows for a run that has not ended.
const (
	OutcomeRunning     = "running"
	OutcomeInterrupted = "interrupted"
)

// ReadJournal reads the journal of the cluster cfg describes, without taking the run lock
// and without writing anything, so it works while a run is going. A journal that does not
// exist yet has no runs. A malformed run id, or one the journal does not hold, is refused
// as bad input (IsBadInput).
func ReadJournal(ctx context.Context, cfg *config.Config, opts JournalOptions) (*JournalReport, error) {
	rep := &JournalReport{Path: JournalPath(cfg), Runs: []RunReport{}}
	store := journal.NewStore(rep.Path)
	pending, running := runState(cfg)
	if opts.Run == "" && opts.Timeline {
		return nil, badInput(errors.New("a timeline is of one run: name it ('cutover journal --timeline RUN')"))
	}
	if opts.Run == "" {
		runs, err := store.Runs(ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range runs {
			rep.Runs = append(rep.Runs, runReport(r, pending, running, false))
		}
		return rep, nil
	}
	id, err := ParseRunID(opts.Run)
	if err != nil {
		return nil, err
	}
	r, err := store.Run(ctx, id)
	if journal.IsNotFound(err) {
		return nil, badInput(fmt.Errorf("no run %d in the journal %s (see 'cutover journal')", id, rep.Path))
	}
	if err != nil {
		return nil, err
	}
	rep.Runs = append(rep.Runs, runReport(r, pending, running, true))
	rep.Detail = true
	if opts.Timeline {
		rep.Timeline = TimelineOf(r, cfg.Cluster.Master, r.ID == pending)
	}
	return rep, nil
}

// ParseRunID parses a run id as the operator typed it: a positive decimal number without
// sign, spaces or leading zeros. Anything else is bad input (IsBadInput).
func ParseRunID(s string) (uint64, error) {
	bad := badInput(fmt.Errorf("run %q: not a run id (a positive number, as 'cutover journal' lists them)", s))
	if s == "" || len(s) > 20 || s[0] == '0' || strings.Trim(s, "0123456789") != "" {
		return 0, bad
	}
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, bad
	}
	return id, nil
}

// runState returns the run the intent names (0 for none) and whether a process holds the
// run lock. Neither is an error: what they cannot tell is shown as not pending, not running.
func runState(cfg *config.Config) (pending uint64, running bool) {
	if in, err := journal.ReadIntent(IntentPath(cfg)); err == nil {
		pending = in.RunID
	}
	if _, held, err := journal.ReadHolder(LockPath(cfg)); err == nil {
		running = held
	}
	return pending, running
}

func runReport(r journal.Run, pending uint64, running, detail bool) RunReport {
	rr := RunReport{
		ID: r.ID, Kind: r.Kind, From: r.From, To: r.To, Direction: r.Direction,
		Host: r.Host, PID: r.PID, Started: r.Started, Ended: r.Ended,
		Outcome: string(r.Outcome), Pending: r.ID == pending, Offline: append([]string{}, r.Offline...),
		Watch: watchStatusOf(r.Facts),
	}
	if !r.Ended.IsZero() && r.Ended.After(r.Started) {
		rr.Duration = r.Ended.Sub(r.Started)
	}
	if r.Outcome == journal.Running {
		rr.Outcome = OutcomeInterrupted
		if running {
			rr.Outcome = OutcomeRunning
		}
	}
	if !detail {
		return rr
	}
	rr.Facts = map[string]string{}
	for k, v := range r.Facts {
		rr.Facts[k] = v
	}
	rr.Events = []StageEvent{}
	for _, ev := range r.Events {
		se := StageEvent{
			Seq: ev.Seq, Stage: ev.Stage, Index: ev.Index, State: string(ev.State),
			At: ev.At, Duration: ev.Duration, Message: ev.Message,
		}
		se.Nodes = append(se.Nodes, nodeReports(ev.Nodes)...)
		rr.Events = append(rr.Events, se)
	}
	sort.SliceStable(rr.Events, func(i, j int) bool { return rr.Events[i].Seq < rr.Events[j].Seq })
	return rr
}
