package upgrade

import (
	"bytes"
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/upgrade/config"
	"github.com/cutover/cutover/upgrade/timeline"
	"github.com/cutover/cutover/upgrade/upgradetest"
)

// timelineStart is when the runs of the timeline tests start, by their fake clock.
var timelineStart = time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)

// clocked is a run for the timeline tests: its kind, its versions, its config, its stages and
// how it differs from an upgrade of every online node.
type clocked struct {
	kind      Kind
	from, to  string
	configure func(*config.Config)
	stages    func(r *Run) []Stage
	prepare   func(r *Run)
}

// clockedRun is run c on w, journaled as a real run is, with the World's fake clock as its
// clock and one node at a time, so that its journal holds the same times at every test run.
// It returns the run's journal once the stages ran.
func clockedRun(t *testing.T, w *upgradetest.World, c clocked) (journal.Run, error) {
	t.Helper()
	from, to, configure := c.from, c.to, c.configure
	clock := w.UseClock(timelineStart)
	clock.Takes("stop", 2*time.Second)
	clock.Takes("start", 3*time.Second)
	clock.Takes("verify", 500*time.Millisecond)
	cfg := w.Config()
	cfg.SSH.Parallel = 1
	if configure != nil {
		configure(cfg)
	}
	lay, err := Layout(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tg, err := newTarget(lay, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(cfg.Paths.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	inv := w.Inventory()
	r := &Run{Kind: KindUpgrade, Target: tg, Config: cfg, Layout: lay, Inventory: inv, Force: map[string]bool{},
		Online: inv.Online(), Offline: inv.Offline(), dial: worldDialer{w}, report: discard{}, clock: clock.Now}
	if err := r.planRolling(); err != nil {
		t.Fatal(err)
	}
	if c.prepare != nil {
		c.prepare(r)
	}
	facts := map[string]string{}
	if r.Batches != nil {
		facts[factBatches] = encodeBatches(r.Batches)
	}
	store := journal.NewStore(JournalPath(cfg))
	r.Kind = c.kind
	jr, err := store.CreateRun(context.Background(), journal.Run{Kind: string(c.kind), From: from, To: to,
		Direction: string(tg.Direction), Host: w.Master, PID: 4242, Started: clock.Now(), Facts: facts})
	if err != nil {
		t.Fatal(err)
	}
	r.ID, r.journal, r.facts = jr.ID, store, jr.Facts
	runErr := (&Runner{Stages: c.stages(r)}).Execute(context.Background(), r)
	jr, err = store.Run(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	return jr, runErr
}

// rollingWith makes a run rolling: node2 a canary, then batches of two.
func rollingWith(c *config.Config) {
	c.Strategy = config.StrategyConfig{Mode: config.Rolling, BatchSize: 2, Canaries: []string{"node2"}, BatchTimeout: config.Duration{Duration: time.Minute}}
	c.Commands.NodeVerify = "node-verify {node}"
}

// drawText draws tl as `cutover journal --timeline` does on a terminal 100 columns wide.
func drawText(t *testing.T, tl *timeline.Timeline) string {
	t.Helper()
	var buf bytes.Buffer
	if err := timeline.WriteText(&buf, tl, timeline.TextOptions{Width: 100, Escape: EscapeControls}); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestTimelineOfRuns draws the timeline of real runs on a fake cluster whose clock moves
// only with the nodes' work: an upgrade all at once (with a restart after redist-conf), a
// rolling upgrade with a canary, the same with a node that fails its start within the failure
// budget and is switched back, an upgrade left pending past its point of no return by a node
// whose daemons do not start, and a sync of a node left behind. The pictures are golden files
// (-update rewrites them); the test also checks what they must show whatever the layout:
// every node's row, the batches, the downtime window and the note of a pending run.
func TestTimelineOfRuns(t *testing.T) {
	upgradeAll := clocked{kind: KindUpgrade, from: "1.0.0", to: "1.1.0", stages: func(*Run) []Stage { return Stages() }}
	rolling := upgradeAll
	rolling.configure, rolling.stages = rollingWith, func(r *Run) []Stage { return RollingStages(r.Batches) }
	restarting := upgradeAll
	restarting.configure = func(c *config.Config) { c.Commands.RedistConf = "redist" }
	sync := clocked{kind: KindSync, from: "1.0.0", to: "1.1.0", stages: func(*Run) []Stage { return SyncStages() },
		prepare: func(r *Run) { r.Online = r.Online[2:] }}
	tests := []struct {
		name      string
		golden    string
		run       clocked
		configure func(*config.Config) // instead of the run's
		live      string               // the version the master runs before the run
		setup     func(t *testing.T, w *upgradetest.World)
		wantErr   bool
		want      []string // lines (or parts of lines) the picture must hold
	}{
		{name: "all at once", golden: "timeline-all-at-once.golden", run: restarting,
			want: []string{"\nnode1 ", "\nnode2 ", "\nnode3 ", "\ndowntime ", "downtime: "}},
		{name: "rolling", golden: "timeline-rolling.golden", run: rolling,
			setup: func(t *testing.T, w *upgradetest.World) {
				w.WriteFile(t, w.Master, "/usr/share/app/1.1.0/cutover/upgrade-policy.json", `{"rolling_from": ">= 1.0, < 1.2"}`)
			},
			want: []string{"\nbatch 1 (canary) ", "\n  node2 ", "\nbatch 2 ", "\n  node3 ", "\n  node1 ", "\ndowntime "}},
		{name: "rolling with a node left behind", golden: "timeline-rolling-failed.golden", run: rolling,
			setup: func(t *testing.T, w *upgradetest.World) {
				w.WriteFile(t, w.Master, "/usr/share/app/1.1.0/cutover/upgrade-policy.json", `{"rolling_from": ">= 1.0, < 1.2"}`)
				w.FailOnce("node3", "start")
			},
			configure: func(c *config.Config) { rollingWith(c); c.Strategy.MaxFailed = 1 },
			wantErr:   true,
			want:      []string{"\n  node3 ", "UX", "u"}},
		{name: "pending past its point of no return", golden: "timeline-pending.golden", run: upgradeAll,
			setup:   func(t *testing.T, w *upgradetest.World) { w.Fail("node3", "start") },
			wantErr: true,
			want:    []string{"\nnode1 ", "\nnode3 ", "pending", "node3 were not started again"}},
		{name: "sync of a node left behind", golden: "timeline-sync.golden", run: sync, live: "1.1.0",
			setup: func(t *testing.T, w *upgradetest.World) {
				w.Link(t, "node1", "1.1.0")
				w.Link(t, "node2", "1.1.0")
			},
			want: []string{"\nnode1 ", "\nnode3 ", "\ndowntime "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := upgradetest.New(t, upgradetest.Options{Rooted: true})
			withMigration(cmp.Or(tt.live, "1.0.0"))(t, w)
			if tt.setup != nil {
				tt.setup(t, w)
			}
			if tt.configure != nil {
				tt.run.configure = tt.configure
			}
			jr, err := clockedRun(t, w, tt.run)
			if (err != nil) != tt.wantErr {
				t.Fatalf("run: %v, want an error: %v", err, tt.wantErr)
			}
			in, ierr := journal.ReadIntent(IntentPath(w.Config()))
			tl := TimelineOf(jr, w.Master, ierr == nil && in.RunID == jr.ID)
			tl.Title = "run 1: " + string(tt.run.kind) + " 1.0.0 -> 1.1.0"
			got := drawText(t, tl)
			golden(t, tt.golden, []byte(got))
			for _, s := range tt.want {
				if !strings.Contains(got, s) {
					t.Errorf("the timeline lacks %q:\n%s", s, got)
				}
			}
			if len(tl.Down) == 0 {
				t.Errorf("the timeline marks no downtime window:\n%s", got)
			}
		})
	}
}

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites the file with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (-update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestTimelineOfInterrupted derives the timeline of a journal that a crash cut short and a
// resume went on from: the stop that the first execution died in is drawn open to the record
// before the resume's, the start that never ended runs to the last record, the restart and the
// resume's stop count as downtime after the first start, a stop without the downtime's facts
// counts from the stop on, and the notes say so.
func TestTimelineOfInterrupted(t *testing.T) {
	at := func(s int) time.Time { return timelineStart.Add(time.Duration(s) * time.Second) }
	rfc := func(s int) string { return at(s).Format(time.RFC3339Nano) }
	node := func(n string, from, to int) journal.NodeResult {
		return journal.NodeResult{Node: n, OK: true, Start: at(from), End: at(to)}
	}
	r := journal.Run{ID: 4, Kind: "upgrade", Started: at(0), Outcome: journal.Running,
		Facts: map[string]string{"down.node1": rfc(1), "up.node1": rfc(4)},
		Events: []journal.Event{
			{Seq: 1, Stage: "stop-nodes", State: journal.Started, At: at(1)},
			{Seq: 2, Stage: "drain", State: journal.Done, At: at(2)}, // the last record of the first execution
			{Seq: 3, Stage: "stop-nodes", State: journal.Started, At: at(3)},
			{Seq: 4, Stage: "stop-nodes", State: journal.Done, At: at(4), Nodes: []journal.NodeResult{node("node2", 3, 4)}},
			{Seq: 5, Stage: "restart", State: journal.Started, At: at(5)},
			{Seq: 6, Stage: "restart", State: journal.Done, At: at(7), Nodes: []journal.NodeResult{node("node1", 5, 7)}},
			{Seq: 7, Stage: "stop-all", State: journal.Started, At: at(8)},
			{Seq: 8, Stage: "stop-all", State: journal.Done, At: at(9), Nodes: []journal.NodeResult{node("node1", 8, 9)}},
			{Seq: 9, Stage: "start", State: journal.Started, At: at(10)},
		}}
	tl := TimelineOf(r, "node1", true)
	if !tl.To.Equal(at(10)) || !tl.Pending {
		t.Errorf("axis to %s, pending %v; want the last record, %s, and pending", tl.To, tl.Pending, at(10))
	}
	bars := map[string][]string{}
	for _, row := range tl.Rows {
		for _, b := range row.Bars {
			bars[row.Node] = append(bars[row.Node], fmt.Sprintf("%s %s %d-%d open=%v", b.Kind, b.Stage,
				int(b.From.Sub(at(0))/time.Second), int(b.To.Sub(at(0))/time.Second), b.Open))
		}
	}
	want := map[string][]string{
		"node1": {"stop stop-nodes 1-2 open=true", "restart restart 5-7 open=false", "stop stop-all 8-9 open=false", "start start 10-10 open=true"},
		"node2": {"stop stop-nodes 3-4 open=false"},
	}
	if fmt.Sprint(bars) != fmt.Sprint(want) {
		t.Errorf("bars = %v, want %v", bars, want)
	}
	var node1 timeline.Row
	for _, row := range tl.Rows {
		if row.Node == "node1" {
			node1 = row
		}
	}
	if got := fmt.Sprint(node1.Down); got != fmt.Sprint([]timeline.Span{{From: at(1), To: at(4)}, {From: at(5), To: at(7)}, {From: at(8), To: at(10)}}) || !node1.StillDown {
		t.Errorf("node1 down %s, still %v; want 1s-4s (first stop to first start), 5s-7s (the restart) and 8s to the end, still down", got, node1.StillDown)
	}
	if got := fmt.Sprint(tl.Down); got != fmt.Sprint([]timeline.Span{{From: at(1), To: at(10)}}) {
		t.Errorf("cluster window %s, want 1s to the end: node2, without the downtime's facts, is down from its stop on", got)
	}
	notes := strings.Join(tl.Notes, "\n")
	for _, w := range []string{"has not ended", "stop-nodes started and has no recorded end", "start started and has no recorded end", "daemons of node1 and node2 were not started again"} {
		if !strings.Contains(notes, w) {
			t.Errorf("notes lack %q:\n%s", w, notes)
		}
	}
}

// TestTimelineOfStaging derives the timeline of a run that draws nothing, a staging: its nodes
// get their rows, and a note says why they are empty.
func TestTimelineOfStaging(t *testing.T) {
	r := journal.Run{ID: 2, Kind: "stage", Started: timelineStart, Ended: timelineStart.Add(time.Minute), Outcome: journal.Succeeded,
		Events: []journal.Event{{Seq: 1, Stage: "send", State: journal.Done, At: timelineStart.Add(time.Minute),
			Nodes: []journal.NodeResult{{Node: "node2", OK: true, Start: timelineStart, End: timelineStart.Add(time.Minute)}}}}}
	tl := TimelineOf(r, "node1", false)
	if len(tl.Rows) != 1 || tl.Rows[0].Node != "node2" || len(tl.Rows[0].Bars) != 0 || len(tl.Down) != 0 {
		t.Errorf("rows %+v, window %v; want node2's row, empty, and no window", tl.Rows, tl.Down)
	}
	if notes := strings.Join(tl.Notes, "\n"); !strings.Contains(notes, "none of the stages the timeline draws") {
		t.Errorf("notes %q, want one saying the run draws nothing", notes)
	}
}
