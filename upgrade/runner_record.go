package upgrade

import (
	"context"
	"fmt"
	"time"

	"github.com/cutover/cutover/journal"
)

// journalEarly journals the stage records made before the run was in the journal, once it
// is, with the facts learned meanwhile. A journal that cannot take them stops the run before
// it changes anything.
func (rn *Runner) journalEarly(ctx context.Context, r *Run) error {
	rn.mu.Lock()
	early := rn.early
	rn.early = nil
	rn.mu.Unlock()
	if r.journal == nil || r.ID == 0 {
		return nil
	}
	r.mu.Lock()
	facts := make(map[string]string, len(r.facts))
	for k, v := range r.facts {
		facts[k] = v
	}
	r.unsaved = nil
	r.mu.Unlock()
	if len(facts) > 0 {
		if _, err := r.journal.SetFacts(context.WithoutCancel(ctx), r.ID, facts); err != nil {
			err = fmt.Errorf("journal: %w", err)
			rn.finish(ctx, r, journal.Aborted)
			return err
		}
	}
	for _, ev := range early {
		if _, err := r.journal.Record(context.WithoutCancel(ctx), r.ID, ev); err != nil {
			err = fmt.Errorf("journal: record %s %s: %w", ev.Stage, ev.State, err)
			rn.finish(ctx, r, journal.Aborted)
			return err
		}
	}
	r.publishMetrics(ctx)
	return nil
}

// saveFacts journals the facts r remembered since the last call (Run.Remember), in one write;
// the values the journal already held for them (an earlier execution's) win.
func (rn *Runner) saveFacts(ctx context.Context, r *Run) error {
	r.mu.Lock()
	facts := r.unsaved
	r.unsaved = nil
	r.mu.Unlock()
	if len(facts) == 0 || r.journal == nil || r.ID == 0 {
		return nil
	}
	stored, err := r.journal.SetFacts(ctx, r.ID, facts)
	if err != nil {
		return fmt.Errorf("journal: record %d facts: %w", len(facts), err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range facts {
		if v, ok := stored[k]; ok {
			r.facts[k] = v
		}
	}
	return nil
}

func (rn *Runner) index(st Stage) int {
	for i, s := range rn.Stages {
		if s.Name() == st.Name() {
			return i
		}
	}
	return -1
}

func (rn *Runner) beginStage(r *Run, i int, st Stage) {
	r.stage.begin(st.Name(), i+1, len(rn.Stages))
}

// record journals one stage transition and reports it. The error says the journal could not
// record it; the transition is reported anyway.
func (rn *Runner) record(ctx context.Context, r *Run, i int, st Stage, state journal.State, d time.Duration, msg string) error {
	var nodeResults []journal.NodeResult
	var warned []string
	note := ""
	if state != journal.Started {
		nodeResults, note, warned = r.stage.take(st.Name())
	}
	if msg == "" {
		msg = note
	}
	// The journal keeps the stage's warnings with its end: what happened on the way (a node
	// that rebooted, a daemon of another version) stays on record, not only in the log.
	jmsg := msg
	for _, w := range warned {
		if jmsg != "" {
			jmsg += "; "
		}
		jmsg += "warning: " + w
	}
	ev := journal.Event{Stage: st.Name(), Index: i + 1, State: state, At: r.now(), Duration: d, Nodes: nodeResults, Message: jmsg}
	r.log.Printf("[%d/%d] %s %s %s %s", i+1, len(rn.Stages), st.Name(), state, d.Round(time.Millisecond), msg)
	var jerr error
	if state != journal.Started {
		if err := rn.saveFacts(context.WithoutCancel(ctx), r); err != nil {
			r.Warn("%v", err)
		}
	}
	if r.journal != nil && r.ID != 0 {
		if _, err := r.journal.Record(context.WithoutCancel(ctx), r.ID, ev); err != nil {
			jerr = fmt.Errorf("journal: record %s %s: %w", st.Name(), state, err)
			r.Warn("%v", jerr)
		}
	} else {
		rn.mu.Lock()
		rn.early = append(rn.early, ev)
		rn.mu.Unlock()
	}
	e := Event{Time: time.Now(), Type: "stage", Run: r.ID, Stage: st.Name(), Index: i + 1, Total: len(rn.Stages),
		Where: string(st.Where()), State: string(state), Duration: d, Message: msg, Nodes: nodeReports(nodeResults)}
	if state == journal.Done {
		e.State = "ok"
	}
	if state == journal.Undone || state == journal.UndoFailed {
		e.Type = "undo"
	}
	if p, ok := st.(ponrStage); ok && p.PONR(r.Direction) {
		e.PONR = true
	}
	for _, n := range nodeResults {
		e.Of++
		if n.OK {
			e.OK++
		}
	}
	r.report.Report(e)
	if state != journal.Started {
		r.publishMetrics(ctx)
	}
	return jerr
}

func (rn *Runner) finish(ctx context.Context, r *Run, outcome journal.Outcome) {
	r.log.Printf("run %d: %s", r.ID, outcome)
	if d := r.perNode.downtime(r.factsCopy()); d.Cluster > 0 && outcome != journal.Running && outcome != journal.FailedPastPONR {
		r.log.Printf("run %d: downtime %s", r.ID, d)
		if _, err := r.Learn(context.WithoutCancel(ctx), factDowntime, d.String()); err != nil {
			r.Warn("%v", err)
		}
	}
	if r.journal != nil && r.ID != 0 {
		if err := r.journal.Finish(context.WithoutCancel(ctx), r.ID, outcome, r.now()); err != nil {
			r.Warn("journal: finish run %d: %v", r.ID, err)
		}
	}
	r.publishMetrics(ctx)
}
