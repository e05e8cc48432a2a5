package upgrade

import (
	"time"

	"github.com/cutover/cutover/journal"
)

// Event is one thing a run reports as it goes: a stage starting or ending, a long wait, a
// warning, the end of the run. The text printer shows it as a line; the JSON printer as one
// object per line.
type Event struct {
	Time     time.Time     `json:"time"`
	Type     string        `json:"type"` // "run", "stage", "undo", "batch", "wait", "warn", "done"
	Run      uint64        `json:"run,omitempty"`
	Stage    string        `json:"stage,omitempty"`
	Index    int           `json:"index,omitempty"`
	Total    int           `json:"total,omitempty"`
	Where    string        `json:"where,omitempty"` // master, all or others: where the stage works
	State    string        `json:"state,omitempty"` // started, ok, failed, skipped, undone, undo-failed
	OK       int           `json:"ok,omitempty"`    // nodes that succeeded, for fan-out stages
	Of       int           `json:"of,omitempty"`    // nodes worked on, for fan-out stages
	Duration time.Duration `json:"duration_ns,omitempty"`
	PONR     bool          `json:"ponr,omitempty"`
	Message  string        `json:"message,omitempty"`
	Nodes    []NodeReport  `json:"nodes,omitempty"`
	// Batch and Batches place a rolling run's batch event ("batch"): its number and how many
	// there are; Canary marks a canary's batch.
	Batch   int  `json:"batch,omitempty"`
	Batches int  `json:"batches,omitempty"`
	Canary  bool `json:"canary,omitempty"`
	// Watch is how the watch stands, on its progress events ("wait" of stage "watch").
	Watch *WatchStatus `json:"watch,omitempty"`
}

// nodeReports converts the journal's node results for an event.
func nodeReports(in []journal.NodeResult) []NodeReport {
	var out []NodeReport
	for _, n := range in {
		nr := NodeReport{Node: n.Node, OK: n.OK, ExitCode: n.ExitCode, Error: n.Error, StderrTail: n.StderrTail, Duration: n.Duration,
			Start: n.Start, End: n.End}
		for _, st := range n.Steps {
			nr.Steps = append(nr.Steps, StepReport{Name: st.Name, Start: st.Start, End: st.End})
		}
		out = append(out, nr)
	}
	return out
}

// Reporter receives a run's events. Implementations must be safe for concurrent use.
type Reporter interface {
	Report(Event)
}

// ReporterFunc adapts a function to a Reporter.
type ReporterFunc func(Event)

// Report calls f(e).
func (f ReporterFunc) Report(e Event) { f(e) }

type discard struct{}

func (discard) Report(Event) {}
