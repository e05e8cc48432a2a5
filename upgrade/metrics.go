package upgrade

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/upgrade/config"
	"github.com/cutover/cutover/upgrade/metrics"
)

// The metrics ([metrics] textfile, docs/metrics.md) are rewritten from the journal, the intent
// and the last look at the nodes: by a run as it enters the journal and at every stage
// transition and its end (Runner.record, Runner.finish), and by `cutover status`. What a run
// sees of the nodes on the way (who answered, which version their links name, what it switched
// them to) is merged into the look kept in the state directory, so that nodes a run does not
// touch (offline ones) keep the version they were last seen at.

// LookPath is where the last look at the nodes is kept for the metrics.
func LookPath(c *config.Config) string {
	return filepath.Join(c.Paths.StateDir, "metrics-look.json")
}

// publishMetrics rewrites the metrics file when [metrics] textfile is set and the run is in
// the journal. A failure is a warning, once per run: the metrics never stop a run.
func (r *Run) publishMetrics(ctx context.Context) {
	if r.Config == nil || r.Config.Metrics.Textfile == "" || r.ID == 0 {
		return
	}
	if err := publishMetrics(context.WithoutCancel(ctx), r.Config, r.perNode.seenNodes(), time.Now()); err != nil {
		r.mu.Lock()
		warned := r.metricsWarned
		r.metricsWarned = true
		r.mu.Unlock()
		if !warned {
			r.Warn("metrics: %v (the run goes on; later failures are in the run log only)", err)
		} else {
			r.log.Printf("warning: metrics: %v", err)
		}
	}
}

// publishMetrics merges seen into the kept look, reads the journal and the intent, and writes
// the metrics file; it returns the snapshot it wrote.
func publishMetrics(ctx context.Context, cfg *config.Config, seen []metrics.Node, at time.Time) error {
	s, err := readSnapshot(ctx, cfg, seen, at, true)
	if err != nil {
		return err
	}
	return metrics.WriteFile(cfg.Metrics.Textfile, metrics.Render(s), metrics.TextfileMode)
}

// readSnapshot merges seen into the kept look (saving it, with keep, when a node changed) and
// builds the snapshot from it, the journal and the intent.
func readSnapshot(ctx context.Context, cfg *config.Config, seen []metrics.Node, at time.Time, keep bool) (metrics.Snapshot, error) {
	look, err := metrics.LoadLook(LookPath(cfg))
	if err != nil {
		return metrics.Snapshot{}, err
	}
	if len(seen) > 0 {
		merged := look.Merge(seen, at)
		// Saved only when a node changed: a run merges what it saw at every stage end. The
		// state directory is made on first use, as the journal makes it.
		if keep && !slices.Equal(merged.Nodes, look.Nodes) {
			err := metrics.SaveLook(LookPath(cfg), merged)
			if errors.Is(err, fs.ErrNotExist) {
				if err = journal.MkdirAllDurable(cfg.Paths.StateDir, 0o700); err == nil {
					err = metrics.SaveLook(LookPath(cfg), merged)
				}
			}
			if err != nil {
				return metrics.Snapshot{}, err
			}
		}
		look = merged
	}
	runs, err := journal.NewStore(JournalPath(cfg)).Runs(ctx)
	if err != nil {
		return metrics.Snapshot{}, err
	}
	var intent *journal.Intent
	if in, err := journal.ReadIntent(IntentPath(cfg)); err == nil {
		intent = &in
	} else if !journal.NoIntent(err) {
		return metrics.Snapshot{}, err
	}
	return snapshotOf(cfg.App, runs, intent, look), nil
}

// snapshotOf builds the metrics of app from the journal's runs (oldest first), the intent
// (nil when none) and the last look at the nodes.
//
// The pending run is the one the intent names unless the journal says it ended done, rolled
// back or aborted (its intent is removed right after that), else the newest run the journal
// has not ended (a run in progress, or one whose process died: a sync, stage or prune is ended
// by running it again). The last run of each kind is its newest ended one.
func snapshotOf(app string, runs []journal.Run, intent *journal.Intent, look metrics.Look) metrics.Snapshot {
	s := metrics.Snapshot{App: app, Look: look}
	byID := map[uint64]journal.Run{}
	for _, jr := range runs {
		byID[jr.ID] = jr
	}
	if intent != nil {
		jr, ok := byID[intent.RunID]
		switch {
		case !ok:
			s.Pending = &metrics.Pending{Run: intent.RunID, Kind: string(kindOf(intent.Kind)), Direction: intent.Direction, Started: intent.Created}
		case jr.Outcome == journal.Running || jr.Outcome == journal.FailedPastPONR:
			s.Pending = pendingOf(jr)
		}
	}
	last := map[Kind]*metrics.LastRun{}
	var order []Kind
	for i := len(runs) - 1; i >= 0; i-- {
		jr := runs[i]
		kind := kindOf(jr.Kind)
		if jr.Outcome == journal.Running {
			if s.Pending == nil {
				s.Pending = pendingOf(jr)
			}
			continue
		}
		lr, ok := last[kind]
		if !ok {
			lr = &metrics.LastRun{Kind: string(kind), Run: jr.ID, Result: string(jr.Outcome), Started: jr.Started, Ended: jr.Ended}
			lr.Downtime, lr.DowntimeRecorded = recordedDowntime(jr)
			last[kind] = lr
			order = append(order, kind)
		}
		if lr.LastSuccess.IsZero() && jr.Outcome == journal.Succeeded {
			lr.LastSuccess = jr.Ended
		}
	}
	for _, k := range order {
		s.Last = append(s.Last, *last[k])
	}
	s.Watch = watchOf(runs)
	return s
}

// pendingOf describes a run that has not ended.
func pendingOf(jr journal.Run) *metrics.Pending {
	p := &metrics.Pending{Run: jr.ID, Kind: string(kindOf(jr.Kind)), Direction: jr.Direction, Started: jr.Started,
		PastPONR: jr.PastPONR && jr.Travel == journal.Forward}
	if n := len(jr.Events); n > 0 {
		p.Stage = jr.Events[n-1].Stage
	}
	return p
}

// recordedDowntime is the cluster's downtime a run journaled as it ended ("12.1s (node1 ...)").
func recordedDowntime(jr journal.Run) (time.Duration, bool) {
	v, ok := jr.Facts[factDowntime]
	if !ok {
		return 0, false
	}
	first, _, _ := strings.Cut(v, " ")
	d, err := time.ParseDuration(first)
	if err != nil || d < 0 {
		return 0, false
	}
	return d, true
}

// watchOf is the watch of the newest run that watches (its facts hold a watch plan); nil when
// none does.
func watchOf(runs []journal.Run) *metrics.Watch {
	for i := len(runs) - 1; i >= 0; i-- {
		ws := watchStatusOf(runs[i].Facts)
		if ws == nil {
			continue
		}
		return &metrics.Watch{Run: runs[i].ID, Kind: string(kindOf(runs[i].Kind)), State: ws.State, Ends: ws.Ends, Failures: ws.Failures}
	}
	return nil
}

// statusMetrics renders the metrics of what status read of every node. When [metrics]
// textfile is set, it also keeps that as the last look and writes the file; otherwise status
// writes nothing.
func (st *StatusReport) statusMetrics(ctx context.Context, cfg *config.Config, at time.Time) ([]byte, error) {
	seen := make([]metrics.Node, 0, len(st.Nodes))
	for _, n := range st.Nodes {
		seen = append(seen, metrics.Node{Name: n.Name, Version: n.Live, Reachable: n.Reachable})
	}
	s, err := readSnapshot(ctx, cfg, seen, at, cfg.Metrics.Textfile != "")
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	text := metrics.Render(s)
	if cfg.Metrics.Textfile != "" {
		if err := metrics.WriteFile(cfg.Metrics.Textfile, text, metrics.TextfileMode); err != nil {
			return text, fmt.Errorf("metrics: %w", err)
		}
	}
	return text, nil
}
