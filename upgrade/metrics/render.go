package metrics

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Snapshot is everything the metrics say at one moment.
type Snapshot struct {
	// App is the application of cutover.toml, the label app of every metric.
	App string
	// Look is the last look at the nodes: each node's version and whether it answered.
	Look Look
	// Pending is the run that has not ended (in progress, or interrupted and waiting for a
	// resume, an abort or a run of the same command); nil when none.
	Pending *Pending
	// Last are the newest ended run of each kind, in any order.
	Last []LastRun
	// Watch is the watch of the newest run that has one; nil when no run watched.
	Watch *Watch
}

// Look is what cutover saw of the nodes the last time it looked at them (a run's checks and
// switches, or `cutover status`).
type Look struct {
	// At is when the nodes were last looked at; zero when they never were.
	At time.Time `json:"at"`
	// Nodes are the nodes seen, in any order.
	Nodes []Node `json:"nodes"`
}

// Node is one node at the last look.
type Node struct {
	Name string `json:"name"`
	// Version is the version directory both of the node's links named; "" when it is not
	// known (the node did not answer, or its links disagree).
	Version string `json:"version,omitempty"`
	// Reachable is whether the node answered.
	Reachable bool `json:"reachable"`
}

// Pending is a run that has not ended.
type Pending struct {
	Run       uint64
	Kind      string
	Direction string
	// Stage is the stage of the run's last journal record.
	Stage string
	// PastPONR is true when the run crossed its point of no return: it can only go forward.
	PastPONR bool
	Started  time.Time
}

// LastRun is the newest ended run of one kind.
type LastRun struct {
	Kind string
	Run  uint64
	// Result is how it ended: one of Results.
	Result           string
	Started, Ended   time.Time
	Downtime         time.Duration
	DowntimeRecorded bool // the run journaled its downtime (a run that stopped no daemons did not)
	// LastSuccess is when the newest done run of this kind ended; zero when none did.
	LastSuccess time.Time
}

// Results are the values the label result of cutover_last_run_result takes: the journal's
// outcomes of an ended run.
var Results = []string{"done", "rolled-back", "failed", "aborted", "archived"}

// Watch is the watch of a run ([policy] watch): after its finish, the run repeats its verify
// until a window ends.
type Watch struct {
	Run  uint64
	Kind string
	// State is one of WatchStates.
	State string
	// Ends is when the window ends; zero before the watch began.
	Ends time.Time
	// Failures is how many of the last checks failed in a row.
	Failures int
}

// WatchStates are the values the label state of cutover_watch_state takes: waiting (the run
// has not reached its watch), watching, passed, failed, and ended-early ('cutover upgrade
// --abort', or a signal during a sync's watch).
var WatchStates = []string{"waiting", "watching", "passed", "failed", "ended-early"}

// Render writes s in the Prometheus text exposition format, every family with its HELP and
// TYPE, series in a stable order.
func Render(s Snapshot) []byte {
	w := &writer{app: s.App}
	w.look(s.Look)
	w.pending(s.Pending)
	w.last(s.Last)
	w.watch(s.Watch)
	return w.buf.Bytes()
}

// writer accumulates the exposition text.
type writer struct {
	buf bytes.Buffer
	app string
}

// family starts a metric family: its HELP and TYPE lines.
func (w *writer) family(name, help string) {
	fmt.Fprintf(&w.buf, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name)
}

// sample writes one series of name with the label app first, then labels as name, value
// pairs.
func (w *writer) sample(name string, value float64, labels ...string) {
	w.buf.WriteString(name)
	w.buf.WriteString(`{app="`)
	w.buf.WriteString(escape(w.app))
	w.buf.WriteByte('"')
	for i := 0; i+1 < len(labels); i += 2 {
		fmt.Fprintf(&w.buf, `,%s="%s"`, labels[i], escape(labels[i+1]))
	}
	w.buf.WriteString("} ")
	w.buf.WriteString(strconv.FormatFloat(value, 'f', -1, 64))
	w.buf.WriteByte('\n')
}

func (w *writer) look(l Look) {
	nodes := slices.Clone(l.Nodes)
	slices.SortFunc(nodes, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	w.family("cutover_node_version_info", "The version directory a node's links named at cutover's last look at it (1 per node whose version is known).")
	for _, n := range nodes {
		if n.Version != "" {
			w.sample("cutover_node_version_info", 1, "node", n.Name, "version", n.Version)
		}
	}
	w.family("cutover_node_reachable", "Whether a node answered at cutover's last look at it (1) or not (0).")
	unreachable := 0
	for _, n := range nodes {
		w.sample("cutover_node_reachable", boolValue(n.Reachable), "node", n.Name)
		if !n.Reachable {
			unreachable++
		}
	}
	w.family("cutover_nodes_unreachable", "The number of nodes that did not answer at cutover's last look at them.")
	w.sample("cutover_nodes_unreachable", float64(unreachable))
	if !l.At.IsZero() {
		w.family("cutover_nodes_look_timestamp_seconds", "When cutover last looked at the nodes, in seconds since the epoch.")
		w.sample("cutover_nodes_look_timestamp_seconds", seconds(l.At))
	}
}

func (w *writer) pending(p *Pending) {
	w.family("cutover_run_pending", "Whether a run is pending or interrupted (1, labelled with the run, its kind, direction, last stage and whether it crossed its point of no return) or not (0).")
	if p == nil {
		w.sample("cutover_run_pending", 0)
		return
	}
	run := strconv.FormatUint(p.Run, 10)
	w.sample("cutover_run_pending", 1, "run", run, "kind", p.Kind, "direction", p.Direction,
		"stage", p.Stage, "past_ponr", strconv.FormatBool(p.PastPONR))
	if !p.Started.IsZero() {
		w.family("cutover_run_pending_start_timestamp_seconds", "When the pending run started, in seconds since the epoch.")
		w.sample("cutover_run_pending_start_timestamp_seconds", seconds(p.Started), "run", run, "kind", p.Kind)
	}
}

func (w *writer) last(runs []LastRun) {
	if len(runs) == 0 {
		return
	}
	runs = slices.Clone(runs)
	slices.SortFunc(runs, func(a, b LastRun) int { return strings.Compare(a.Kind, b.Kind) })
	each := func(name, help string, value func(LastRun) (float64, bool)) {
		w.family(name, help)
		for _, r := range runs {
			if v, ok := value(r); ok {
				w.sample(name, v, "kind", r.Kind)
			}
		}
	}
	each("cutover_last_run_id", "The id of the newest ended run of each kind, as 'cutover journal' lists it.",
		func(r LastRun) (float64, bool) { return float64(r.Run), true })
	each("cutover_last_run_start_timestamp_seconds", "When the newest ended run of each kind started, in seconds since the epoch.",
		func(r LastRun) (float64, bool) { return seconds(r.Started), !r.Started.IsZero() })
	each("cutover_last_run_end_timestamp_seconds", "When the newest ended run of each kind ended, in seconds since the epoch.",
		func(r LastRun) (float64, bool) { return seconds(r.Ended), !r.Ended.IsZero() })
	each("cutover_last_run_duration_seconds", "How long the newest ended run of each kind took, in seconds.",
		func(r LastRun) (float64, bool) {
			return r.Ended.Sub(r.Started).Seconds(), !r.Started.IsZero() && !r.Ended.Before(r.Started)
		})
	each("cutover_last_run_downtime_seconds", "How long some node's daemons were down in the newest ended run of each kind, in seconds.",
		func(r LastRun) (float64, bool) { return r.Downtime.Seconds(), r.DowntimeRecorded })
	w.family("cutover_last_run_result", "How the newest ended run of each kind ended: 1 for its result, 0 for the others.")
	for _, r := range runs {
		for _, res := range Results {
			w.sample("cutover_last_run_result", boolValue(r.Result == res), "kind", r.Kind, "result", res)
		}
	}
	each("cutover_last_success_timestamp_seconds", "When the newest run of each kind that ended done ended, in seconds since the epoch.",
		func(r LastRun) (float64, bool) { return seconds(r.LastSuccess), !r.LastSuccess.IsZero() })
}

func (w *writer) watch(wt *Watch) {
	if wt == nil {
		return
	}
	run := strconv.FormatUint(wt.Run, 10)
	w.family("cutover_watch_state", "The watch of the newest run that watches the cluster after its finish: 1 for its state, 0 for the others.")
	for _, st := range WatchStates {
		w.sample("cutover_watch_state", boolValue(wt.State == st), "run", run, "kind", wt.Kind, "state", st)
	}
	w.family("cutover_watch_check_failures", "How many of the watch's last checks failed in a row.")
	w.sample("cutover_watch_check_failures", float64(wt.Failures), "run", run, "kind", wt.Kind)
	if !wt.Ends.IsZero() {
		w.family("cutover_watch_end_timestamp_seconds", "When the watch's window ends, in seconds since the epoch.")
		w.sample("cutover_watch_end_timestamp_seconds", seconds(wt.Ends), "run", run, "kind", wt.Kind)
	}
}

// escape writes a label value as the text format wants it: backslash, double quote and
// newline escaped.
func escape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// seconds is t in seconds since the epoch, to the millisecond.
func seconds(t time.Time) float64 {
	return float64(t.UnixMilli()) / 1000
}
