package upgrade

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/config"
)

// StatusOptions are what `cutover status` needs besides the config.
type StatusOptions struct {
	// Hostname is the local host's name; "" asks the system.
	Hostname string
	// NoVerify leaves out the application's verify command.
	NoVerify bool
	// VerifyTimeout bounds the verify command; zero means DefaultStatusVerifyTimeout.
	VerifyTimeout time.Duration
}

// DefaultStatusVerifyTimeout bounds the verify command that `cutover status` runs.
const DefaultStatusVerifyTimeout = time.Minute

// StatusReport is the state of a cluster as `cutover status` shows it: every node's links and
// installed versions, what the application's verify says, the pending run and who holds the
// run lock.
type StatusReport struct {
	App    string
	Master string
	// Version is the cluster's version, read on the master as a run reads it; "" when it
	// cannot be read, and VersionError says why.
	Version      string
	VersionError string
	Nodes        []NodeStatus
	// Verify is what the application's verify command said; nil when none is configured.
	Verify *VerifyStatus
	// Pending is the run the intent file names; nil when no run is pending.
	Pending *PendingRun
	// Lock is who holds the run lock; nil when no run holds it.
	Lock *journal.Holder
	// LastRun is the newest run in the journal; nil when the journal has none.
	LastRun *RunSummary
	// Behind are the reachable nodes whose links point at another version than the
	// cluster's, when no run is pending, with the command that brings each to it.
	Behind []BehindNode
	// Resume is how this host, the master, finishes an interrupted run when it boots.
	Resume BootResume
	// ResumeProblems say what keeps Resume from running at boot (no cron daemon, systemd not
	// running), each with what to do; none when it would run.
	ResumeProblems []string
	// Problems are what could not be read (the journal, the intent), shown as warnings.
	Problems []string
	// Metrics are the cluster's metrics in Prometheus's text format (docs/metrics.md), as
	// status writes them to [metrics] textfile; `status --output prometheus` prints them.
	Metrics []byte

	unconfirmed map[string]uint64 // nodes done runs left unconfirmed (unconfirmedNodes)
}

// NodeStatus is what one node looks like.
type NodeStatus struct {
	Name    string
	Address string
	// Offline is true for a node the node list marks offline: runs skip it.
	Offline bool
	// Reachable is false when the node could not be reached; Error says why.
	Reachable bool
	// Lib and Share are the VERSIONDIRs the two links point at, or the raw link target when
	// it is not a version directory; "" when the link cannot be read.
	Lib, Share string
	// Live is the VERSIONDIR both links agree on; "" when they do not (LinkError says why).
	Live      string
	LinkError string
	// Installed are the VERSIONDIRs whose two trees are both installed, oldest first.
	Installed []string
	// Error says what could not be read on the node.
	Error string

	booted bool // the node booted since the pending run stopped its daemons
}

// VerifyStatus is the outcome of the application's verify command on the master.
type VerifyStatus struct {
	// Ran is false when verify was not run; Skipped says why.
	Ran      bool
	Skipped  string
	OK       bool
	ExitCode int
	// Output are the lines verify printed, standard output then standard error.
	Output []string
	// Error says why verify failed, when it did.
	Error string
}

// PendingRun is the run an intent file names: interrupted, or in progress when the lock is
// held.
type PendingRun struct {
	Run uint64
	// Kind is the pending run's kind: upgrade, or restore.
	Kind      string
	From, To  string
	Direction string
	Created   time.Time // when the intent was written
	Host      string
	PID       int
	// Outcome is the run's outcome in the journal: running, or failed past the point of no
	// return.
	Outcome string
	// Stage is the stage of the run's last journal event, State what it reached and At when.
	Stage string
	State string
	At    time.Time
	// PastPONR is true when the run reached its point of no return: it can only go forward.
	PastPONR bool
	// Error says why the journal record could not be read.
	Error string
	// Batches are a rolling run's batches and how far each got; nil for an all-at-once run.
	Batches []BatchStatus
	// Rebooted are the nodes that booted since the run first stopped their daemons: a
	// resumed run stops them again and redoes their steps.
	Rebooted []string
	// Watch is how the run's watch stands; nil for a run that does not watch.
	Watch *WatchStatus

	boots map[string]string // each node's boot identity when the run first stopped it
}

// BatchStatus is one batch of a pending rolling run.
type BatchStatus struct {
	Stage  string // the batch's stage name, "batch-2"
	Nodes  []string
	Canary bool
	// State is the batch's last journal state ("started", "done", "failed", "undone"), or ""
	// when it has not started.
	State string
}

// RunSummary is one run of the journal in brief.
type RunSummary struct {
	Run       uint64
	Kind      string
	From, To  string
	Outcome   string
	Started   time.Time
	Ended     time.Time
	LastStage string
	LastState string
	// Offline are the nodes the run skipped as offline.
	Offline []string
	// Watch is how the run's watch stands or ended; nil for a run that does not watch.
	Watch *WatchStatus
}

// BehindNode is a node whose links point at another version than the cluster's, or one that
// a done run left in a state it could not confirm and no sync has covered since.
type BehindNode struct {
	Node    string
	Version string
	// Command brings the node to the cluster's version.
	Command string
	// Unconfirmed is the run that left the node in a state it could not confirm (a rolling
	// node cut off after its switch or start, which may run the target on the source's
	// config); 0 for a node whose links alone say it is behind.
	Unconfirmed uint64
}

// Status reads the state of the cluster: every node's links and installed versions, the
// application's verify, the pending run from the intent and the journal, and the lock holder.
// It changes nothing on the nodes and never takes or waits for the run lock, so it answers
// while a run is going; the journal is opened read-only. What it read of the nodes is kept as
// the last look for the metrics, which it renders (Metrics) and, with [metrics] textfile,
// writes; a failure there is one of Problems. While a run holds the lock, verify is not run (the
// run is stopping and starting daemons). An unreachable node is shown as such, not an error.
//
// An error means the status could not be read at all: a bad config (IsBadInput), not on the
// master (IsNotMaster), a node list that cannot be loaded.
func Status(ctx context.Context, cfg *config.Config, opts StatusOptions) (*StatusReport, error) {
	s, err := openSession(ctx, cfg, modeLook, sessionOptions{Hostname: opts.Hostname, HostCheck: true})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	r := s.r
	st := &StatusReport{App: cfg.App, Master: r.Inventory.Master, Resume: findBootResume(cfg.Paths)}
	st.ResumeProblems = hostBootProbe(cfg.Paths).problems(st.Resume)

	if h, held, err := journal.ReadHolder(LockPath(cfg)); err != nil {
		st.Problems = append(st.Problems, err.Error())
	} else if held {
		st.Lock = &h
	}
	st.readJournal(ctx, cfg)
	if lr := st.LastRun; lr != nil && lr.Outcome == string(journal.Running) && st.Lock == nil {
		// No process holds the run lock: the run's process died. It is interrupted, not
		// running, whatever its journal record last said.
		lr.Outcome = OutcomeInterrupted
	}

	// The nodes and the master's version are read at the same time as verify runs.
	verifyDone := make(chan *VerifyStatus, 1)
	go func() { verifyDone <- runVerify(ctx, r, st.Lock, opts) }()
	if st.Version, err = liveVersion(ctx, r); err != nil {
		st.VersionError = strings.TrimPrefix(err.Error(), r.Inventory.Master+": ")
	}
	var boots map[string]string
	if st.Pending != nil {
		boots = st.Pending.boots
	}
	st.Nodes = nodeStatuses(ctx, r, boots)
	st.Verify = <-verifyDone
	if st.Pending != nil {
		for _, n := range st.Nodes {
			if n.booted {
				st.Pending.Rebooted = append(st.Pending.Rebooted, n.Name)
			}
		}
	}

	if st.Version != "" && st.Pending == nil {
		if v, err := layout.ParseVersion(st.Version); err == nil {
			st.Behind = behindNodes(r.Layout.DirOf(v), st.Nodes)
		}
		for _, n := range st.Nodes {
			id, ok := st.unconfirmed[n.Name]
			if !ok || slices.ContainsFunc(st.Behind, func(b BehindNode) bool { return b.Node == n.Name }) {
				continue
			}
			st.Behind = append(st.Behind, BehindNode{Node: n.Name, Version: n.Live, Command: "cutover sync " + n.Name, Unconfirmed: id})
		}
	}
	text, err := st.statusMetrics(ctx, cfg, time.Now())
	st.Metrics = text
	if err != nil {
		st.Problems = append(st.Problems, err.Error())
	}
	return st, nil
}

// unconfirmedNodes are the nodes that a done run left in a state it could not confirm, each
// with that run, less those a done sync covered since, from the journal's runs in order.
func unconfirmedNodes(runs []journal.Run) map[string]uint64 {
	out := map[string]uint64{}
	for _, jr := range runs {
		if jr.Outcome != journal.Succeeded {
			continue
		}
		if kindOf(jr.Kind).traits().catchesUp {
			for _, ev := range jr.Events {
				if ev.Stage != (syncSwitch{}).Name() || ev.State != journal.Done {
					continue
				}
				for _, nr := range ev.Nodes {
					if nr.OK {
						delete(out, nr.Node)
					}
				}
			}
		} else {
			for k := range jr.Facts {
				if n, ok := strings.CutPrefix(k, factUnknownPrefix); ok {
					out[n] = jr.ID
				}
			}
		}
	}
	return out
}

// behindNodes lists the nodes whose links agree on another VERSIONDIR than the cluster's dir,
// with the command that brings each to the cluster's version. Nodes that could not be read
// or whose links are broken are shown as such, not listed here.
func behindNodes(dir string, list []NodeStatus) []BehindNode {
	var out []BehindNode
	for _, n := range list {
		if n.Live != "" && n.Live != dir {
			out = append(out, BehindNode{Node: n.Name, Version: n.Live, Command: "cutover sync " + n.Name})
		}
	}
	return out
}

// readJournal reads the intent and the journal, read-only: the pending run and the last run.
func (st *StatusReport) readJournal(ctx context.Context, cfg *config.Config) {
	in, err := journal.ReadIntent(IntentPath(cfg))
	switch {
	case journal.NoIntent(err):
	case err != nil:
		st.Problems = append(st.Problems, err.Error())
	default:
		st.Pending = &PendingRun{Run: in.RunID, Kind: string(kindOf(in.Kind)), From: in.From, To: in.To, Direction: in.Direction, Created: in.Created, Host: in.Host, PID: in.PID}
	}
	runs, err := journal.NewStore(JournalPath(cfg)).Runs(ctx)
	if err != nil {
		if st.Pending != nil {
			st.Pending.Error = err.Error()
		} else {
			st.Problems = append(st.Problems, err.Error())
		}
		return
	}
	st.unconfirmed = unconfirmedNodes(runs)
	if len(runs) > 0 {
		last := runs[len(runs)-1]
		sum := &RunSummary{Run: last.ID, Kind: last.Kind, From: last.From, To: last.To, Outcome: string(last.Outcome),
			Started: last.Started, Ended: last.Ended, Offline: last.Offline, Watch: watchStatusOf(last.Facts)}
		if n := len(last.Events); n > 0 {
			sum.LastStage, sum.LastState = last.Events[n-1].Stage, string(last.Events[n-1].State)
		}
		st.LastRun = sum
	}
	if st.Pending == nil {
		return
	}
	for _, jr := range runs {
		if jr.ID != st.Pending.Run {
			continue
		}
		st.Pending.Outcome = string(jr.Outcome)
		if n := len(jr.Events); n > 0 {
			ev := jr.Events[n-1]
			st.Pending.Stage, st.Pending.State, st.Pending.At = ev.Stage, string(ev.State), ev.At
		}
		st.Pending.PastPONR = jr.PastPONR && jr.Travel == journal.Forward
		for k, v := range jr.Facts {
			if node, ok := strings.CutPrefix(k, factBootPrefix); ok && v != "" {
				if st.Pending.boots == nil {
					st.Pending.boots = map[string]string{}
				}
				st.Pending.boots[node] = v
			}
		}
		st.Pending.Batches = batchStatuses(jr)
		st.Pending.Watch = watchStatusOf(jr.Facts)
		return
	}
	st.Pending.Error = fmt.Sprintf("the intent names run %d, which is not in the journal %s", st.Pending.Run, JournalPath(cfg))
}

// nodeStatuses reads every node, offline ones included, in parallel. boots are the boot
// identities a pending run recorded when it stopped the nodes' daemons.
func nodeStatuses(ctx context.Context, r *Run, boots map[string]string) []NodeStatus {
	all := r.Inventory.Nodes
	out := make([]NodeStatus, len(all))
	index := make(map[string]int, len(all))
	for i, n := range all {
		out[i] = NodeStatus{Name: n.Name, Address: n.Address, Offline: n.Offline}
		index[n.Name] = i
	}
	_, _ = nodes.Each(ctx, all, r.Config.SSH.Parallel, "", func(ctx context.Context, n nodes.Node) error {
		ns := &out[index[n.Name]]
		readNode(ctx, r, ns)
		if was, ok := boots[n.Name]; ok && ns.Reachable {
			if c, err := r.dial.Conn(ctx, n.Name); err == nil {
				if now, _ := nodeBoot(c); now != "" {
					ns.booted = now != was
				}
			}
		}
		return nil
	})
	return out
}

// readNode fills in what one node's links and trees say.
func readNode(ctx context.Context, r *Run, ns *NodeStatus) {
	c, err := r.dial.Conn(ctx, ns.Name)
	if err != nil {
		ns.Error = strings.TrimPrefix(err.Error(), ns.Name+": ")
		return
	}
	ns.Reachable = true
	ns.Lib = linkVersion(c, r.Layout, r.Layout.LibLink(), true)
	ns.Share = linkVersion(c, r.Layout, r.Layout.ShareLink(), false)
	if live, err := r.Layout.Live(ctx, c); err != nil {
		ns.LinkError = strings.TrimPrefix(err.Error(), ns.Name+": ")
	} else {
		ns.Live = live
	}
	if ns.Installed, err = r.Layout.Installed(ctx, c); err != nil {
		ns.Error = strings.TrimPrefix(err.Error(), ns.Name+": ")
	}
	checkInstalledManifests(ctx, r, c, ns)
	if ns.Installed == nil {
		ns.Installed = []string{}
	}
}

// linkVersion reads one of the two links: the VERSIONDIR it points at, or its raw target
// when that is not one of a version's trees; "" when the link cannot be read (Live says why).
func linkVersion(fsys layout.FS, lay *layout.Layout, link string, lib bool) string {
	target, err := fsys.Readlink(link)
	if err != nil {
		return ""
	}
	resolved := target
	if !path.IsAbs(resolved) {
		resolved = path.Join(path.Dir(link), resolved)
	}
	resolved = path.Clean(resolved)
	dir := path.Base(resolved)
	v, err := layout.ParseVersion(dir)
	if err != nil {
		return target
	}
	libTree, shareTree := lay.Trees(v)
	want := shareTree
	if lib {
		want = libTree
	}
	if resolved != want {
		return target
	}
	return dir
}

// runVerify runs the application's verify command on the master, unless none is configured,
// the operator asked not to, or a run holds the lock.
func runVerify(ctx context.Context, r *Run, lock *journal.Holder, opts StatusOptions) *VerifyStatus {
	cmd := r.Config.Commands.Verify
	switch {
	case cmd == "":
		return nil
	case opts.NoVerify:
		return &VerifyStatus{Skipped: "not run (--no-verify)"}
	case lock != nil:
		return &VerifyStatus{Skipped: fmt.Sprintf("not run while a run holds the lock (pid %d on %s)", lock.PID, lock.Host)}
	}
	timeout := opts.VerifyTimeout
	if timeout <= 0 {
		timeout = DefaultStatusVerifyTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v := &VerifyStatus{Ran: true}
	c, err := r.dial.Conn(ctx, r.Inventory.Master)
	if err != nil {
		v.ExitCode, v.Error = -1, err.Error()
		return v
	}
	res, err := c.RunShell(ctx, r.expand(cmd, r.Inventory.Master))
	v.ExitCode = res.ExitCode
	v.OK = err == nil
	if err != nil {
		v.Error = strings.TrimPrefix(err.Error(), r.Inventory.Master+": ")
		if ctx.Err() != nil {
			v.Error = fmt.Sprintf("verify did not finish within %s", timeout)
		}
	}
	v.Output = []string{}
	for _, out := range [][]byte{res.Stdout, res.Stderr} {
		for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
			if strings.TrimSpace(line) != "" {
				v.Output = append(v.Output, line)
			}
		}
	}
	return v
}
