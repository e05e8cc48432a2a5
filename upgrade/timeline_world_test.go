package upgrade

import (
	"bytes"
	"cmp"
	"context"
	"flag"
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
// rolling upgrade with a canary, and an upgrade left pending past its point of no return by a
// node whose daemons do not start. The pictures are golden files (-update rewrites them); the
// test also checks what they must show whatever the layout: every node's row, the batches,
// the downtime window and the note of a pending run.
func TestTimelineOfRuns(t *testing.T) {
	upgradeAll := clocked{kind: KindUpgrade, from: "1.0.0", to: "1.1.0", stages: func(*Run) []Stage { return Stages() }}
	rolling := upgradeAll
	rolling.configure, rolling.stages = rollingWith, func(r *Run) []Stage { return RollingStages(r.Batches) }
	restarting := upgradeAll
	restarting.configure = func(c *config.Config) { c.Commands.RedistConf = "redist" }
	sync := clocked{kind: KindSync, from: "1.0.0", to: "1.1.0", stages: func(*Run) []Stage { return SyncStages() },
		prepare: func(r *Run) { r.Online = r.Online[2:] }}
	tests := []struct {
		name    string
		golden  string
		run     clocked
		live    string // the version the master runs before the run
		setup   func(t *testing.T, w *upgradetest.World)
		wantErr bool
		want    []string // lines (or parts of lines) the picture must hold
	}{
		{name: "all at once", golden: "timeline-all-at-once.golden", run: restarting,
			want: []string{"\nnode1 ", "\nnode2 ", "\nnode3 ", "\ndowntime ", "downtime: "}},
		{name: "rolling", golden: "timeline-rolling.golden", run: rolling,
			setup: func(t *testing.T, w *upgradetest.World) {
				w.WriteFile(t, w.Master, "/usr/share/app/1.1.0/cutover/upgrade-policy.json", `{"rolling_from": ">= 1.0, < 1.2"}`)
			},
			want: []string{"\nbatch 1 (canary) ", "\n  node2 ", "\nbatch 2 ", "\n  node3 ", "\n  node1 ", "\ndowntime "}},
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
			jr, err := clockedRun(t, w, tt.run)
			if (err != nil) != tt.wantErr {
				t.Fatalf("run: %v, want an error: %v", err, tt.wantErr)
			}
			tl := TimelineOf(jr, w.Master, tt.wantErr)
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
