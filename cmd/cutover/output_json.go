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
// Every type that reaches the output is defined in this file or beside it in output_json_*.go
// (status, plan) and covered by a golden file.

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
