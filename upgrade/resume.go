package upgrade

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/config"
)

// ResumeOptions are what `cutover upgrade --resume` needs besides the config.
type ResumeOptions struct {
	Reporter Reporter
	// Hostname is the local host's name; "" asks the system.
	Hostname string
	// MasterWait bounds how long the master check retries while nodes come up after a boot.
	MasterWait time.Duration
	// SkipNodes are nodes declared gone for the rest of the run (--skip-node).
	SkipNodes []string
}

// DefaultMasterWait is how long a resume waits for a majority of nodes to answer.
const DefaultMasterWait = 5 * time.Minute

// masterRetry is the pause between two rounds of the master check.
var masterRetry = 2 * time.Second

// Resume continues the run the intent file names. Without an intent it does nothing and
// returns a Result with Nothing set: it runs at every boot. It goes on only if more than half
// of all nodes name this host as master; if a majority names another host, the intent is
// archived in the journal and removed (IsNotMaster). A run that was rolling back finishes its
// undo and is never pushed forward. A run travelling forward before its point of no return
// has everything every execution did undone, then is run again from the drain; past it, the
// daemons are stopped everywhere first and the run goes on from the switch, every stage
// checking the real state.
func Resume(ctx context.Context, cfg *config.Config, opts ResumeOptions) (*Result, error) {
	s, err := openSession(ctx, cfg, modePending, sessionOptions{Reporter: opts.Reporter, Hostname: opts.Hostname})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if s.intent == nil {
		if len(opts.SkipNodes) > 0 {
			return nil, badInput(fmt.Errorf("--skip-node: no run is pending; nothing was touched"))
		}
		return &Result{App: cfg.App, Nothing: true}, nil
	}
	if err := s.skipNodes(ctx, opts.SkipNodes); err != nil {
		return nil, err
	}
	wait := opts.MasterWait
	if wait == 0 {
		wait = DefaultMasterWait
	}
	return resume(ctx, s, opts.Hostname, wait)
}

// resume continues the pending run of s, which holds the run lock.
func resume(ctx context.Context, s *session, hostname string, wait time.Duration) (*Result, error) {
	start := time.Now()
	r, jr := s.r, s.jr
	res := r.summary()
	if done, err := leftIntent(ctx, r, jr); done {
		return res, err
	}
	if err := confirmMaster(ctx, r, s.intent.Host, hostname, wait); err != nil {
		if IsNotMaster(err) {
			r.log.Printf("run %d: %v: archived", r.ID, err)
			if ferr := r.journal.Finish(ctx, r.ID, journal.Archived, time.Now()); ferr != nil {
				return res, errors.Join(err, ferr)
			}
			if rerr := releaseIntent(r); rerr != nil {
				return res, errors.Join(err, rerr)
			}
			err = fmt.Errorf("%w; run %d was archived in the journal and its intent removed", err, r.ID)
		}
		return res, err
	}
	stages, err := s.pendingStages()
	if err != nil && jr.Travel == journal.Forward {
		return res, pastPONR(fmt.Errorf("%w; the run stays pending", err))
	}
	rn := &Runner{Stages: stages}
	if jr.Travel != journal.Forward {
		r.log.Printf("run %d resumed while %s: finishing the undo", r.ID, jr.Travel)
		r.report.Report(Event{Time: time.Now(), Type: "run", Run: r.ID, Message: fmt.Sprintf("resuming run %d (%s -> %s): it was %s, the undo is finished", r.ID, r.From, r.To, jr.Travel)})
		err := rn.Abort(ctx, r, jr.Travel)
		res.Duration = time.Since(start)
		return res, err
	}
	if jr.Outcome != journal.Running {
		// A run that failed past the point of no return is taken up again.
		if err := r.journal.Finish(ctx, r.ID, journal.Running, time.Time{}); err != nil {
			return res, fmt.Errorf("journal: %w", err)
		}
	}
	r.log.Printf("run %d resumed: %s -> %s (%s), past the point of no return: %v", r.ID, r.From, r.To, r.Direction, r.pastPONR)
	r.report.Report(Event{Time: time.Now(), Type: "run", Run: r.ID, Message: fmt.Sprintf("resuming run %d: %s %s -> %s", r.ID, r.Config.App, r.From, r.To)})
	switch plan := r.Kind.traits().pending.resume; {
	case plan != nil && plan(r, rn):
		// The run's kind planned its resume.
	case r.history.doneBefore((finish{}).Name()) && r.watch.Window > 0:
		// The run is watched: the watch goes on, with the cluster as it is.
		rn.Start = slices.IndexFunc(stages, func(st Stage) bool { _, ok := st.(leaver); return ok })
	case r.Batches != nil:
		// A rolling run keeps its switched batches and goes on from the first stage no
		// execution completed: the cluster serves meanwhile, mixed.
		rn.Start = firstNotDone(stages, r)
	case r.pastPONR:
		rn.Prelude = []Stage{stopAll{}}
		rn.Start = restartIndex(stages, r.Direction, r.pastPONR)
	default:
		rn.Redo = true
		rn.Start = restartIndex(stages, r.Direction, r.pastPONR)
	}
	err = rn.Execute(ctx, r)
	res.Backup = r.factValue("backup")
	res.Duration = time.Since(start)
	res.Downtime = r.perNode.downtime(r.factsCopy())
	res.Batches = r.Batches
	res.Watched = r.watch.Window > 0
	if rollbackApplies(r, err) {
		res.Rollback, err = rollBackFailed(ctx, r, err)
	}
	return res, err
}

// leftIntent recognises a run the journal already calls finished whose intent a crash left
// behind (the journal records the end before the intent goes): it removes the intent and
// reports how the run ended. done is false for a run that is still pending.
func leftIntent(ctx context.Context, r *Run, jr journal.Run) (done bool, err error) {
	switch jr.Outcome {
	case journal.Running, journal.FailedPastPONR:
		return false, nil
	}
	r.log.Printf("run %d ended %s; removing the intent it left", r.ID, jr.Outcome)
	if err := releaseIntent(r); err != nil {
		return true, err
	}
	switch jr.Outcome {
	case journal.Succeeded, journal.Aborted:
		r.report.Report(Event{Time: time.Now(), Type: "run", Run: r.ID, Message: fmt.Sprintf("run %d was %s; its intent is removed", r.ID, jr.Outcome)})
		if jr.Outcome == journal.Succeeded {
			// A rolling run done with nodes left behind says so, as it did when it ended.
			return true, r.toleratedErr()
		}
		return true, nil
	case journal.Archived:
		return true, notMaster(fmt.Errorf("run %d was archived: another host is the master", r.ID))
	}
	return true, fmt.Errorf("run %d had %s: %s is at %s; its intent is removed", r.ID, jr.Outcome, r.Config.App, r.From)
}

// summary is the Result of a run so far.
func (r *Run) summary() *Result {
	res := &Result{Run: r.ID, App: r.Config.App, From: r.From, To: r.To, Direction: r.Direction,
		Nodes: len(r.Online), Log: r.log.Path(), Backup: r.factValue("backup")}
	for _, n := range r.Offline {
		res.Offline = append(res.Offline, n.Name)
	}
	return res
}

// factValue returns the fact learned under key, or "".
func (r *Run) factValue(key string) string {
	v, _ := r.Fact(key)
	return v
}

// confirmMaster asks the nodes that vote which host is the master, until more than half of
// them name this host or wait runs out. Every node of the inventory votes, offline ones
// included, except the nodes declared gone for the run (--skip-node, journaled): a cluster
// that lost nodes past its point of no return can be finished by declaring them gone, and a
// two-node cluster that lost one is finished by the one it has. The run is archived (an
// IsNotMaster error) only when a majority positively names another host: one that is neither
// this host's name, nor the host that wrote the intent (intentHost), nor the configured master,
// so that a host name not yet set at boot never archives a run. Anything else keeps the run
// pending: the error is IsPastPONR (exit 3), names every node asked and its answer, and the
// next boot tries again. SIGINT and SIGTERM end the wait the same way. Who decided is written
// to the run log and reported.
func confirmMaster(ctx context.Context, r *Run, intentHost, hostname string, wait time.Duration) error {
	if hostname == "" {
		h, err := os.Hostname()
		if err != nil {
			return pastPONR(fmt.Errorf("host name: %w; run %d stays pending", err, r.ID))
		}
		hostname = h
	}
	me := shortName(hostname)
	if r.Config.Cluster.MasterCommand == "" {
		if me == shortName(r.Config.Cluster.Master) {
			return nil
		}
		return pastPONR(fmt.Errorf("this host is %s, not the configured master %s, and no master_command can ask the nodes: run %d stays pending; run 'cutover upgrade --resume' on the master", hostname, r.Config.Cluster.Master, r.ID))
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	maybeMe := map[string]bool{me: true, shortName(intentHost): true, shortName(r.Config.Cluster.Master): true}
	skipped := factNodes(r.factsCopy(), factSkippedPrefix)
	var voters []nodes.Node
	for _, n := range r.Inventory.Nodes {
		if !slices.Contains(skipped, n.Name) {
			voters = append(voters, n)
		}
	}
	half := len(voters) / 2
	deadline := time.Now().Add(wait)
	for {
		votes := map[string]int{}
		answers := map[string]string{}
		_, _ = nodes.Each(ctx, voters, r.Config.SSH.Parallel, "", func(ctx context.Context, n nodes.Node) error {
			answer, err := askMaster(ctx, r, n.Name)
			r.mu.Lock()
			defer r.mu.Unlock()
			if err != nil {
				answers[n.Name] = "did not answer: " + EscapeControls(err.Error())
				return err
			}
			votes[answer]++
			answers[n.Name] = "names " + strconv.Quote(answer)
			return nil
		})
		tally := masterTally(voters, skipped, answers)
		if votes[me] > half {
			msg := fmt.Sprintf("master check: %d of %d voting nodes name this host %s (%s)", votes[me], len(voters), me, tally)
			r.log.Printf("%s", msg)
			if len(skipped) > 0 {
				r.Warn("%s", msg)
			}
			// Who decided is on record: one fact per execution that passed the check.
			if _, err := r.Learn(ctx, factMasterCheckPrefix+time.Now().UTC().Format(time.RFC3339Nano), msg); err != nil {
				return pastPONR(fmt.Errorf("journal: %w; run %d stays pending", err, r.ID))
			}
			return nil
		}
		for host, n := range votes {
			if !maybeMe[host] && n > half {
				return notMaster(fmt.Errorf("%d of %d voting nodes name %s as the master, not this host %s (%s)", n, len(voters), host, hostname, tally))
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			why := ""
			if ctx.Err() != nil {
				why = "interrupted; "
			}
			hint := "declare a node that stays gone with 'cutover upgrade --resume --skip-node=NODE': it then leaves the vote"
			return pastPONR(fmt.Errorf("no majority of the %d voting nodes confirms this host %s as the master (%s%d of them do, %d needed: %s); run %d stays pending; %s",
				len(voters), hostname, why, votes[me], half+1, tally, r.ID, hint))
		}
		r.Wait("master check: %d of %d voting nodes name this host, waiting for more to answer", votes[me], len(voters))
		select {
		case <-ctx.Done():
		case <-time.After(masterRetry):
		}
	}
}

// factMasterCheckPrefix keys the journal's record of each master check a resume passed: who
// voted and what each answered.
const factMasterCheckPrefix = "master-check."

// askMaster runs master_command on node and returns the short name it prints: one line of a
// host name, bounded; anything else is no answer.
func askMaster(ctx context.Context, r *Run, node string) (string, error) {
	c, err := r.dial.Conn(ctx, node)
	if err != nil {
		return "", err
	}
	res, err := c.RunShell(ctx, r.Config.Cluster.MasterCommand)
	if err != nil {
		return "", err
	}
	name := strings.TrimSpace(string(res.Stdout))
	if name == "" || len(name) > 253 || strings.ContainsFunc(name, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_')
	}) {
		return "", fmt.Errorf("master_command printed %s, not a host name", escapeShort(name))
	}
	return shortName(name), nil
}

// masterTally says, in the inventory's order, what each voter answered and which nodes were
// declared gone.
func masterTally(voters []nodes.Node, skipped []string, answers map[string]string) string {
	var parts []string
	for _, n := range voters {
		a := answers[n.Name]
		if a == "" {
			a = "was not asked"
		}
		parts = append(parts, n.Name+" "+a)
	}
	for _, n := range skipped {
		parts = append(parts, n+" declared gone (--skip-node), not asked")
	}
	return strings.Join(parts, "; ")
}

func shortName(s string) string { return strings.SplitN(s, ".", 2)[0] }
