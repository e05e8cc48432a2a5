package main

import "github.com/cutover/cutover/upgrade"

// The JSON form of `cutover status` (the convention is in output_json.go).

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
