package upgrade

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/cutover/cutover/journal"
)

// recipe is one kind of run as execute, the one path every new run takes, runs it: its
// stages, what the journal records of it when it begins, and how it is announced and
// confirmed. A new command is a recipe (see doc.go).
type recipe struct {
	kind   Kind
	stages []Stage
	// what says what the run does, for its events and its log: "sync demoapp 1.0.0 ->
	// 1.1.0"; where says on which nodes: "on node2 (master node1)".
	what, where string
	// facts are journaled with the run when it begins.
	facts map[string]string
	// dryRun runs only the read-only stages at the head of the list and journals nothing.
	dryRun bool
	// confirm, when set, is asked once the read-only stages passed, before the first change;
	// an error ends the command with nothing changed and no run in the journal.
	confirm func(ctx context.Context, r *Run) error
	// begun, when set, runs once the run is in the journal, before its first change.
	begun func(ctx context.Context, r *Run) error
	// details, when set, says what the run will change as its checks found it, a line each,
	// for the confirmation (Run.Details).
	details func() []string
}

// Title says what the run does and where, as its first event says it.
func (r *Run) Title() string { return r.title }

// Details says what the run will change, as its checks found it, a line each: what the
// operator confirms besides the stages.
func (r *Run) Details() []string {
	if r.details == nil {
		return nil
	}
	return r.details()
}

// execute runs a new run of rc on r, which an open session prepared. A dry run runs the
// read-only stages at the head of the list (the checks) and nothing else. Otherwise the run
// is announced, its checks run, the operator confirms, and only then does the run enter the
// journal (beginRun), so that a refusal or a declined prompt leaves no run behind; the
// stages then run under the Runner, which journals, undoes and reports.
func execute(ctx context.Context, r *Run, rc recipe) error {
	r.Kind, r.list, r.title, r.details = rc.kind, rc.stages, rc.what+" "+rc.where, rc.details
	if rc.dryRun {
		return (&Runner{Stages: rc.stages[:readOnlyHead(rc.stages)]}).Execute(ctx, r)
	}
	r.report.Report(Event{Time: time.Now(), Type: "run", Message: r.title})
	rn := &Runner{Stages: rc.stages, Confirm: func(ctx context.Context, r *Run) error {
		if rc.confirm != nil {
			if err := rc.confirm(ctx, r); err != nil {
				return err
			}
		}
		return beginRun(ctx, r, rc)
	}}
	return rn.Execute(ctx, r)
}

// beginRun enters r in the journal as a new run of rc: it ends the runs an earlier process
// left marked running, records the run with its facts, tags its commands so that a later
// execution can end what this one leaves running on a node, and opens its log.
func beginRun(ctx context.Context, r *Run, rc recipe) error {
	cfg := r.Config
	store := journal.NewStore(JournalPath(cfg))
	closeOrphans(ctx, store, r)
	j := crashJournal{store}
	host, _ := os.Hostname()
	var offline []string
	for _, n := range r.Offline {
		offline = append(offline, n.Name)
	}
	jr, err := j.CreateRun(ctx, journal.Run{Kind: string(rc.kind), From: r.From, To: r.To, Direction: string(r.Direction),
		Host: host, PID: os.Getpid(), Offline: offline, Facts: rc.facts})
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	r.ID, r.journal = jr.ID, j
	r.mu.Lock()
	if r.facts == nil {
		r.facts = map[string]string{}
	}
	for k, v := range jr.Facts {
		if _, ok := r.facts[k]; !ok {
			r.facts[k] = v
		}
	}
	r.mu.Unlock()
	if err := r.tagCommands(); err != nil {
		return err
	}
	if r.log, err = openRunLog(cfg.Paths.StateDir, r.ID); err != nil {
		return err
	}
	r.log.Printf("run %d: %s %s, offline: %s", r.ID, rc.what, rc.where, listOrNone(offline))
	r.report.Report(Event{Time: time.Now(), Type: "run", Run: r.ID, Message: fmt.Sprintf("run %d: %s", r.ID, rc.what)})
	if rc.begun != nil {
		return rc.begun(ctx, r)
	}
	return nil
}

// closeOrphans ends the journal's runs that are still marked running although no intent names
// them (the caller holds the lock and found no intent): an upgrade killed before it wrote its
// intent, which changed nothing, or an interrupted sync, stage or prune, each finished by
// running it again.
func closeOrphans(ctx context.Context, store *journal.Store, r *Run) {
	runs, err := store.Runs(ctx)
	if err != nil {
		return
	}
	for _, old := range runs {
		if old.Outcome != journal.Running {
			continue
		}
		if err := (crashJournal{store}).Finish(ctx, old.ID, journal.Aborted, time.Now()); err != nil {
			continue
		}
		if k := kindOf(old.Kind); k.traits().rerun != "" {
			r.Warn("%s was interrupted; it is marked aborted in the journal: run %s to finish it", k.runName(old.ID), k.traits().rerun)
		} else {
			r.Warn("run %d was interrupted before it changed anything; it is marked aborted in the journal", old.ID)
		}
	}
}
