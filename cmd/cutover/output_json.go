package main

import (
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/cutover/cutover/upgrade"
)

// The JSON convention of cutover, in one place: a run (upgrade, sync, stage, prune) prints one
// event object per line, ending with a "done" event; every other command prints one indented
// document with apiVersion and kind. Field names are lower_snake_case, times RFC 3339 in UTC,
// durations integer nanoseconds in fields ending in _ns, and a list is [] rather than null.
// Every type that reaches the output is defined in this file and covered by a golden file.

// docAPIVersion is the apiVersion of every JSON document.
const docAPIVersion = "cutover/v1"

// jsonOutput prints for programs.
type jsonOutput struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time // the time of a done event
}

// event prints one event on one line.
func (o *jsonOutput) event(e any) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	enc := json.NewEncoder(o.w)
	enc.SetEscapeHTML(false)
	return enc.Encode(e)
}

// doc prints one document, indented.
func (o *jsonOutput) doc(d any) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	enc := json.NewEncoder(o.w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(d)
}

// doneHead opens every run's done event: when it was printed, its type and cutover's exit
// code.
type doneHead struct {
	Time time.Time `json:"time"`
	Type string    `json:"type"`
	Exit int       `json:"exit"`
}

// head is the opening of the done event of a run that ended with err.
func (o *jsonOutput) head(err error) doneHead {
	return doneHead{Time: o.now(), Type: "done", Exit: exitCode(err)}
}

// Report prints a run's event.
func (o *jsonOutput) Report(e upgrade.Event) { _ = o.event(e) }

// upgradeDoneEvent is the last line of `cutover upgrade` (--to and --resume).
type upgradeDoneEvent struct {
	doneHead
	Run          uint64                   `json:"run"`
	From         string                   `json:"from"`
	To           string                   `json:"to"`
	Direction    string                   `json:"direction,omitempty"`
	Rolling      bool                     `json:"rolling,omitempty"`
	DryRun       bool                     `json:"dry_run,omitempty"`
	Backup       string                   `json:"backup"`
	Log          string                   `json:"log"`
	Duration     time.Duration            `json:"duration_ns"`
	Downtime     time.Duration            `json:"downtime_ns,omitempty"`
	NodeDowntime map[string]time.Duration `json:"node_downtime_ns,omitempty"`
	// Outage is the longest time a client of the application could not be served: the
	// cluster's downtime in an all-at-once run, the longest node's in a rolling run, whose
	// other nodes serve meanwhile.
	Outage time.Duration `json:"outage_ns,omitempty"`
	// RollbackRun is the run that took the cluster back after this one failed past its
	// point of no return ([policy] on_failure = "rollback").
	RollbackRun uint64 `json:"rollback_run,omitempty"`
	// Watched is true when the run watched the cluster after its finish (the watch stage).
	Watched bool   `json:"watched,omitempty"`
	Error   string `json:"error,omitempty"`
}

func (o *jsonOutput) upgradeDone(res *upgrade.Result, err error, dryRun bool) {
	e := upgradeDoneEvent{doneHead: o.head(err), DryRun: dryRun, Error: errorText(err)}
	if res != nil {
		e.Run, e.From, e.To, e.Backup, e.Log, e.Duration = res.Run, res.From, res.To, res.Backup, res.Log, res.Duration
		e.Direction, e.Rolling = string(res.Direction), res.Batches != nil
		e.Downtime, e.Outage = res.Downtime.Cluster, res.Downtime.Cluster
		if e.Rolling {
			e.Outage = res.Downtime.Longest()
		}
		if len(res.Downtime.Nodes) > 0 {
			e.NodeDowntime = res.Downtime.Nodes
		}
		if res.Rollback != nil {
			e.RollbackRun = res.Rollback.Run
		}
		e.Watched = res.Watched
	}
	_ = o.event(e)
}

// abortDoneEvent is the last line of `cutover upgrade --abort`.
type abortDoneEvent struct {
	doneHead
	Run  uint64 `json:"run"`
	From string `json:"from"`
	To   string `json:"to"`
	Log  string `json:"log"`
	// WatchEnded is true when the abort ended the run's watch early: the run is done at To.
	WatchEnded bool   `json:"watch_ended,omitempty"`
	Error      string `json:"error,omitempty"`
}

func (o *jsonOutput) abortDone(res *upgrade.Result, err error) {
	e := abortDoneEvent{doneHead: o.head(err), Error: errorText(err)}
	if res != nil {
		e.Run, e.From, e.To, e.Log, e.WatchEnded = res.Run, res.From, res.To, res.Log, res.WatchEnded
	}
	_ = o.event(e)
}

// syncDoneEvent is the last line of `cutover sync`.
type syncDoneEvent struct {
	doneHead
	DryRun   bool            `json:"dry_run,omitempty"`
	Run      uint64          `json:"run,omitempty"`
	To       string          `json:"to,omitempty"`
	Nodes    []syncNodeEntry `json:"nodes,omitempty"`
	Log      string          `json:"log,omitempty"`
	Duration time.Duration   `json:"duration_ns,omitempty"`
	// Watched is true when the sync watched the nodes after its verify (the watch stage).
	Watched bool   `json:"watched,omitempty"`
	Error   string `json:"error,omitempty"`
}

type syncNodeEntry struct {
	Name    string `json:"name"`
	From    string `json:"from"`
	Offline bool   `json:"offline"`
}

func (o *jsonOutput) syncDone(res *upgrade.SyncResult, err error, dryRun bool) {
	e := syncDoneEvent{doneHead: o.head(err), DryRun: dryRun, Error: errorText(err)}
	if res != nil {
		e.Run, e.To, e.Log, e.Duration, e.Watched = res.Run, res.To, res.Log, res.Duration, res.Watched
		for _, n := range res.Nodes {
			e.Nodes = append(e.Nodes, syncNodeEntry{Name: n.Name, From: n.From, Offline: n.Offline})
		}
	}
	_ = o.event(e)
}

// stageDoneEvent is the last line of `cutover stage`.
type stageDoneEvent struct {
	doneHead
	DryRun    bool          `json:"dry_run,omitempty"`
	Run       uint64        `json:"run,omitempty"`
	Version   string        `json:"version,omitempty"`
	Nodes     []string      `json:"nodes,omitempty"`
	Already   []string      `json:"already,omitempty"`
	TreeBytes int64         `json:"tree_bytes,omitempty"`
	Sent      int64         `json:"sent_bytes"`
	Log       string        `json:"log,omitempty"`
	Duration  time.Duration `json:"duration_ns,omitempty"`
	Error     string        `json:"error,omitempty"`
}

func (o *jsonOutput) stageDone(res *upgrade.StagingResult, err error, dryRun bool) {
	e := stageDoneEvent{doneHead: o.head(err), DryRun: dryRun, Error: errorText(err)}
	if res != nil {
		e.Run, e.Version, e.Nodes, e.Already, e.TreeBytes, e.Sent, e.Log, e.Duration = res.Run, res.Version, res.Nodes, res.Already, res.TreeBytes, res.Sent, res.Log, res.Duration
	}
	_ = o.event(e)
}

// pruneDoneEvent is the last line of `cutover prune`.
type pruneDoneEvent struct {
	doneHead
	DryRun   bool                `json:"dry_run,omitempty"`
	Run      uint64              `json:"run,omitempty"`
	Remove   map[string][]string `json:"remove"`
	Log      string              `json:"log,omitempty"`
	Duration time.Duration       `json:"duration_ns,omitempty"`
	Error    string              `json:"error,omitempty"`
}

func (o *jsonOutput) pruneDone(res *upgrade.PruneResult, err error, dryRun bool) {
	e := pruneDoneEvent{doneHead: o.head(err), DryRun: dryRun, Remove: map[string][]string{}, Error: errorText(err)}
	if res != nil {
		e.Run, e.Log, e.Duration = res.Run, res.Log, res.Duration
		if res.Remove != nil {
			e.Remove = res.Remove
		}
	}
	_ = o.event(e)
}

// planDoc is the JSON form of a plan: `cutover --output json plan`.
type planDoc struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	App        string         `json:"app"`
	From       string         `json:"from"`
	To         string         `json:"to"`
	Direction  string         `json:"direction"`
	Master     string         `json:"master"`
	Nodes      []string       `json:"nodes"`
	Offline    []string       `json:"offline"`
	Checks     []planCheckDoc `json:"checks"`
	Migrations []planStepDoc  `json:"migrations"`
	Stages     []planStageDoc `json:"stages"`
	Nothing    bool           `json:"nothing"`
	Proceed    bool           `json:"proceed"`
	Refusals   []string       `json:"refusals"`
}

type planCheckDoc struct {
	Name    string `json:"name"`
	Node    string `json:"node"`
	OK      bool   `json:"ok"`
	Warning bool   `json:"warning"`
	Message string `json:"message"`
	// NotInstalled marks a refusal because the target is not installed on the node.
	NotInstalled bool `json:"not_installed,omitempty"`
}

// planStepDoc is one minor hop of the config's migration; File is "" when no file describes
// it (the config does not change there).
type planStepDoc struct {
	From string   `json:"from"`
	To   string   `json:"to"`
	File string   `json:"file"`
	Ops  []string `json:"ops"`
}

type planStageDoc struct {
	Index   int      `json:"index"`
	Name    string   `json:"name"`
	Where   string   `json:"where"`
	Nodes   []string `json:"nodes"`
	Skipped bool     `json:"skipped"`
	PONR    bool     `json:"ponr"`
}

func (o *jsonOutput) plan(p *upgrade.PlanReport) error {
	d := planDoc{
		APIVersion: docAPIVersion, Kind: "Plan",
		App: p.App, From: p.From, To: p.To, Direction: string(p.Direction), Master: p.Master,
		Nodes: docStrings(p.Nodes), Offline: docStrings(p.Offline),
		Checks: []planCheckDoc{}, Migrations: []planStepDoc{}, Stages: []planStageDoc{},
		Nothing: p.Nothing, Proceed: p.Proceed, Refusals: docStrings(p.Refusals),
	}
	for _, c := range p.Checks {
		d.Checks = append(d.Checks, planCheckDoc{Name: c.Name, Node: c.Node, OK: c.OK, Warning: c.Warning, Message: c.Message, NotInstalled: c.NotInstalled})
	}
	for _, m := range p.Migrations {
		d.Migrations = append(d.Migrations, planStepDoc{From: m.From, To: m.To, File: m.File, Ops: docStrings(m.Ops)})
	}
	for _, s := range p.Stages {
		d.Stages = append(d.Stages, planStageDoc{Index: s.Index, Name: s.Name, Where: s.Where, Nodes: docStrings(s.Nodes), Skipped: s.Skipped, PONR: s.PONR})
	}
	return o.doc(d)
}

// statusDoc is the JSON form of a status: `cutover --output json status`.
type statusDoc struct {
	APIVersion   string            `json:"apiVersion"`
	Kind         string            `json:"kind"`
	App          string            `json:"app"`
	Master       string            `json:"master"`
	Version      string            `json:"version"`
	VersionError string            `json:"version_error,omitempty"`
	Nodes        []statusNodeDoc   `json:"nodes"`
	Verify       *statusVerifyDoc  `json:"verify"`
	Pending      *statusPendingDoc `json:"pending"`
	Lock         *statusLockDoc    `json:"lock"`
	LastRun      *statusRunDoc     `json:"last_run"`
	Behind       []statusBehindDoc `json:"behind"`
	BootResume   statusResumeDoc   `json:"boot_resume"`
	Problems     []string          `json:"problems"`
}

type statusNodeDoc struct {
	Name      string   `json:"name"`
	Address   string   `json:"address"`
	Offline   bool     `json:"offline"`
	Reachable bool     `json:"reachable"`
	Lib       string   `json:"lib"`
	Share     string   `json:"share"`
	Live      string   `json:"live"`
	LinkError string   `json:"link_error,omitempty"`
	Installed []string `json:"installed"`
	Error     string   `json:"error,omitempty"`
}

type statusVerifyDoc struct {
	Ran      bool     `json:"ran"`
	Skipped  string   `json:"skipped,omitempty"`
	OK       bool     `json:"ok"`
	ExitCode int      `json:"exit_code"`
	Output   []string `json:"output"`
	Error    string   `json:"error,omitempty"`
}

type statusPendingDoc struct {
	Run       uint64 `json:"run"`
	Kind      string `json:"kind,omitempty"`
	From      string `json:"from"`
	To        string `json:"to"`
	Direction string `json:"direction"`
	Created   string `json:"created"`
	Host      string `json:"host"`
	PID       int    `json:"pid"`
	Outcome   string `json:"outcome"`
	Stage     string `json:"stage"`
	State     string `json:"state"`
	At        string `json:"at,omitempty"`
	PastPONR  bool   `json:"past_ponr"`
	Error     string `json:"error,omitempty"`
	// Rebooted are the nodes that booted since the run stopped their daemons.
	Rebooted []string `json:"rebooted,omitempty"`
	// Batches are a rolling run's batches.
	Batches []statusBatchDoc `json:"batches,omitempty"`
	// Watch is how the run's watch stands.
	Watch *upgrade.WatchStatus `json:"watch,omitempty"`
}

// statusBatchDoc is one batch of a pending rolling run in the status document.
type statusBatchDoc struct {
	Stage  string   `json:"stage"`
	Nodes  []string `json:"nodes"`
	Canary bool     `json:"canary"`
	State  string   `json:"state"`
}

// batchDocs are a pending rolling run's batches; a batch not started is "waiting".
func batchDocs(batches []upgrade.BatchStatus) []statusBatchDoc {
	var out []statusBatchDoc
	for _, b := range batches {
		state := b.State
		if state == "" {
			state = "waiting"
		}
		out = append(out, statusBatchDoc{Stage: b.Stage, Nodes: docStrings(b.Nodes), Canary: b.Canary, State: state})
	}
	return out
}

type statusLockDoc struct {
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Started string `json:"started"`
	Command string `json:"command"`
}

type statusRunDoc struct {
	Run       uint64   `json:"run"`
	Kind      string   `json:"kind"`
	From      string   `json:"from"`
	To        string   `json:"to"`
	Outcome   string   `json:"outcome"`
	Started   string   `json:"started"`
	Ended     string   `json:"ended,omitempty"`
	LastStage string   `json:"last_stage"`
	LastState string   `json:"last_state"`
	Offline   []string `json:"offline"`
	// Watch is how the run's watch stands or ended.
	Watch *upgrade.WatchStatus `json:"watch,omitempty"`
}

type statusBehindDoc struct {
	Node    string `json:"node"`
	Version string `json:"version"`
	Command string `json:"command"`
	// UnconfirmedRun is the run that left the node in a state it could not confirm.
	UnconfirmedRun uint64 `json:"unconfirmed_run,omitempty"`
}

// statusResumeDoc says how the master resumes an interrupted run at boot.
type statusResumeDoc struct {
	Unit string   `json:"unit"` // the enabled systemd unit, "" when none
	Cron []string `json:"cron"` // crontab files with the @reboot line
	// Problems say what keeps the unit or the @reboot line from running at boot; empty when
	// it would run.
	Problems []string `json:"problems"`
}

func (o *jsonOutput) status(st *upgrade.StatusReport) error {
	d := statusDoc{
		APIVersion: docAPIVersion, Kind: "Status",
		App: st.App, Master: st.Master, Version: st.Version, VersionError: st.VersionError,
		Nodes: []statusNodeDoc{}, Behind: []statusBehindDoc{}, Problems: docStrings(st.Problems),
		BootResume: statusResumeDoc{Cron: docStrings(st.Resume.Cron), Problems: docStrings(st.ResumeProblems)},
	}
	if st.Resume.Unit {
		d.BootResume.Unit = upgrade.ResumeUnit
	}
	for _, n := range st.Nodes {
		d.Nodes = append(d.Nodes, statusNodeDoc{
			Name: n.Name, Address: n.Address, Offline: n.Offline, Reachable: n.Reachable,
			Lib: n.Lib, Share: n.Share, Live: n.Live, LinkError: n.LinkError,
			Installed: docStrings(n.Installed), Error: n.Error,
		})
	}
	if v := st.Verify; v != nil {
		d.Verify = &statusVerifyDoc{Ran: v.Ran, Skipped: v.Skipped, OK: v.OK, ExitCode: v.ExitCode, Output: docStrings(v.Output), Error: v.Error}
	}
	if p := st.Pending; p != nil {
		d.Pending = &statusPendingDoc{
			Run: p.Run, Kind: p.Kind, From: p.From, To: p.To, Direction: p.Direction, Created: docTime(p.Created), Host: p.Host, PID: p.PID,
			Outcome: p.Outcome, Stage: p.Stage, State: p.State, At: docTime(p.At), PastPONR: p.PastPONR, Error: p.Error,
			Rebooted: p.Rebooted, Batches: batchDocs(p.Batches), Watch: p.Watch,
		}
	}
	if h := st.Lock; h != nil {
		d.Lock = &statusLockDoc{Host: h.Host, PID: h.PID, Started: docTime(h.Started), Command: h.Command}
	}
	if r := st.LastRun; r != nil {
		d.LastRun = &statusRunDoc{
			Run: r.Run, Kind: r.Kind, From: r.From, To: r.To, Outcome: r.Outcome, Started: docTime(r.Started), Ended: docTime(r.Ended),
			LastStage: r.LastStage, LastState: r.LastState, Offline: docStrings(r.Offline), Watch: r.Watch,
		}
	}
	for _, b := range st.Behind {
		d.Behind = append(d.Behind, statusBehindDoc{Node: b.Node, Version: b.Version, Command: b.Command, UnconfirmedRun: b.Unconfirmed})
	}
	return o.doc(d)
}

// journalDoc is the JSON form of `cutover journal`.
type journalDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	*upgrade.JournalReport
}

func (o *jsonOutput) journal(rep *upgrade.JournalReport) error {
	return o.doc(journalDoc{APIVersion: docAPIVersion, Kind: "Journal", JournalReport: rep})
}

// backupListDoc and backupRestoreDoc are the JSON forms of `cutover backup`.
type backupListDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	*upgrade.BackupList
}

type backupRestoreDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	*upgrade.RestoreReport
}

func (o *jsonOutput) backupList(list *upgrade.BackupList) error {
	return o.doc(backupListDoc{docAPIVersion, "BackupList", list})
}

func (o *jsonOutput) backupRestore(rep *upgrade.RestoreReport) error {
	return o.doc(backupRestoreDoc{docAPIVersion, "BackupRestore", rep})
}

// cfgupgradeDoc is the JSON form of `cutover cfgupgrade`.
type cfgupgradeDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	File       string `json:"file"`
	From       string `json:"from"`
	To         string `json:"to"`
	DryRun     bool   `json:"dry_run"`
	Changed    bool   `json:"changed"` // the config was (or, in a dry run, would be) rewritten
	Backup     string `json:"backup"`  // the previous config's copy, "" when nothing was written
	Diff       string `json:"diff"`
}

func (o *jsonOutput) cfgupgrade(rep *upgrade.CfgupgradeReport, dryRun bool) error {
	return o.doc(cfgupgradeDoc{
		APIVersion: docAPIVersion, Kind: "Cfgupgrade",
		File: rep.File, From: rep.From, To: rep.To, DryRun: dryRun, Changed: rep.From != rep.To, Backup: rep.Backup, Diff: rep.Diff,
	})
}

// versionDoc is the JSON form of `cutover version`.
type versionDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Version    string `json:"version"`
}

func (o *jsonOutput) version(v string) error {
	return o.doc(versionDoc{docAPIVersion, "Version", v})
}

// errorText is err's message, "" for none.
func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// docStrings keeps a list a list in JSON: nil becomes [], not null.
func docStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// docTime formats a time for JSON documents: RFC 3339 in UTC, "" for none.
func docTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
