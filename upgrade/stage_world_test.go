package upgrade

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/upgrade/upgradetest"
)

// worldDialer hands a World's nodes to a run.
type worldDialer struct{ w *upgradetest.World }

func (d worldDialer) Conn(_ context.Context, node string) (Conn, error) {
	n, err := d.w.Node(node)
	if err != nil {
		return nil, err
	}
	return n, nil
}

// worldRun is an upgrade run from -> to on w, in a journal of its own, with every stage's
// record and fact going there as in a real run.
func worldRun(t *testing.T, w *upgradetest.World, from, to string) *Run {
	t.Helper()
	cfg := w.Config()
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
	store := journal.NewStore(JournalPath(cfg))
	jr, err := store.CreateRun(context.Background(), journal.Run{Kind: string(KindUpgrade), From: from, To: to, Direction: string(tg.Direction)})
	if err != nil {
		t.Fatal(err)
	}
	inv := w.Inventory()
	return &Run{ID: jr.ID, Kind: KindUpgrade, Target: tg, Config: cfg, Layout: lay, Inventory: inv, Force: map[string]bool{},
		Online: inv.Online(), Offline: inv.Offline(), dial: worldDialer{w}, journal: store, report: discard{}}
}

// TestStagesOnAWorld is the unit form of the crash model, a stage at a time: each stage runs
// alone on a fake cluster through the Runner, and the test compares the world before with the
// journal (the stage's state, its facts) and the world after (links, the commands each node
// ran, files), then, for a stage that can be undone, what its undo leaves.
func TestStagesOnAWorld(t *testing.T) {
	type want struct {
		state journal.State
		err   string            // part of the stage's error; "" for none
		links map[string]string // node -> version its links name
		calls []string          // "node: command", by node then in order
		facts map[string]string
	}
	tests := []struct {
		name     string
		from, to string
		setup    func(w *upgradetest.World)
		facts    map[string]string // what an earlier stage of the run learned
		stage    Stage
		run      want
		undo     *want // the world after Undo, when the stage has one
	}{
		{name: "stop-master stops the master's daemons; its undo starts them",
			from: "1.0.0", to: "1.1.0", stage: stopMaster{},
			run:  want{state: journal.Done, calls: []string{"node1: stop"}},
			undo: &want{calls: []string{"node1: stop", "node1: start"}}},
		{name: "stop-nodes stops the other nodes' daemons",
			from: "1.0.0", to: "1.1.0", stage: stopNodes{},
			run: want{state: journal.Done, calls: []string{"node2: stop", "node3: stop"}}},
		{name: "stop-nodes records each node's boot identity as its stop's result carries it, reading no file",
			from: "1.0.0", to: "1.1.0", setup: func(w *upgradetest.World) {
				w.SetBoot("node2", "b2/17")
				w.SetBoot("node3", "b3/19")
			}, stage: stopNodes{},
			run: want{state: journal.Done, calls: []string{"node2: stop", "node3: stop"},
				facts: map[string]string{factBootPrefix + "node2": "b2/17", factBootPrefix + "node3": "b3/19"}}},
		{name: "stop-nodes fails on a node whose stop fails, and the runner starts the daemons again",
			from: "1.0.0", to: "1.1.0", setup: func(w *upgradetest.World) { w.Fail("node3", "stop") }, stage: stopNodes{},
			run: want{state: journal.Undone, err: "node3", calls: []string{"node2: stop", "node2: start", "node3: stop", "node3: start"}}},
		{name: "switch points every node at the target, the master last; its undo switches back",
			from: "1.0.0", to: "1.1.0", stage: switchLinks{},
			run:  want{state: journal.Done, links: map[string]string{"node1": "1.1.0", "node2": "1.1.0", "node3": "1.1.0"}},
			undo: &want{links: map[string]string{"node1": "1.0.0", "node2": "1.0.0", "node3": "1.0.0"}}},
		{name: "switch refuses a node without the target's trees; the runner switches the others back",
			from: "1.0.0", to: "1.2.0", setup: func(w *upgradetest.World) {
				for _, n := range []string{"node1", "node2"} {
					w.Install(t, n, "1.2.0")
				}
			}, stage: switchLinks{},
			run: want{state: journal.Undone, err: "node3", links: map[string]string{"node1": "1.0.0", "node2": "1.0.0", "node3": "1.0.0"}}},
		{name: "switch of a downgrade is not undone (it follows the point of no return)",
			from: "1.1.0", to: "1.0.0", setup: func(w *upgradetest.World) {
				for _, n := range []string{"node1", "node2", "node3"} {
					w.Link(t, n, "1.1.0")
				}
			}, stage: switchLinks{},
			run:  want{state: journal.Done, links: map[string]string{"node1": "1.0.0", "node2": "1.0.0", "node3": "1.0.0"}},
			undo: &want{links: map[string]string{"node1": "1.0.0", "node2": "1.0.0", "node3": "1.0.0"}}},
		{name: "ensure-dirs runs on every node",
			from: "1.0.0", to: "1.1.0", stage: ensureDirs{},
			run: want{state: journal.Done, calls: []string{"node1: ensure-dirs", "node2: ensure-dirs", "node3: ensure-dirs"}}},
		{name: "drain learns the queue was open, drains it and waits; its undo opens it",
			from: "1.0.0", to: "1.1.0", stage: drain{},
			run:  want{state: journal.Done, calls: []string{"node1: drain", "node1: busy"}, facts: map[string]string{factQueueDrained: "no"}},
			undo: &want{calls: []string{"node1: drain", "node1: busy", "node1: undrain"}}},
		{name: "drain gives up after drain_timeout while jobs remain, and the runner opens the queue again",
			from: "1.0.0", to: "1.1.0", setup: func(w *upgradetest.World) { w.Answer("node1", "busy", "2\n") }, stage: drain{},
			run: want{state: journal.Undone, err: "still has 2 jobs after drain_timeout", calls: []string{"node1: drain", "node1: busy", "node1: undrain"},
				facts: map[string]string{factQueueDrained: "no"}}},
		{name: "undrain opens the queue the run drained",
			from: "1.0.0", to: "1.1.0", facts: map[string]string{factQueueDrained: "no"}, stage: undrain{},
			run: want{state: journal.Done, calls: []string{"node1: undrain"}}},
		{name: "undrain leaves drained a queue that was drained before the run",
			from: "1.0.0", to: "1.1.0", facts: map[string]string{factQueueDrained: "yes"}, stage: undrain{},
			run: want{state: journal.Done}},
		{name: "post-upgrade runs the hook on the master",
			from: "1.0.0", to: "1.1.0", stage: postUpgrade{},
			run: want{state: journal.Done, calls: []string{"node1: post-upgrade"}}},
		{name: "reverify passes when the nodes and trees are as checked",
			from: "1.0.0", to: "1.1.0", stage: reverify{},
			run: want{state: journal.Done}},
		{name: "reverify stops the run when a node lost the target's trees",
			from: "1.0.0", to: "1.1.0", setup: func(w *upgradetest.World) {
				if err := os.RemoveAll(w.Dir + "/node2/usr/share/app/1.1.0"); err != nil {
					t.Fatal(err)
				}
			}, stage: reverify{},
			run: want{state: journal.Failed, err: "node2"}},
		{name: "intent writes the intent file naming the run; its undo removes it",
			from: "1.0.0", to: "1.1.0", stage: intent{},
			run:  want{state: journal.Done},
			undo: &want{}},
		{name: "the sync's switch points every node at the live version and is not undone",
			from: "1.0.0", to: "1.1.0", stage: syncSwitch{},
			run: want{state: journal.Done, links: map[string]string{"node1": "1.1.0", "node2": "1.1.0", "node3": "1.1.0"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := upgradetest.New(t, upgradetest.Options{Versions: []string{"1.0.0", "1.1.0"}, Live: tt.from})
			if tt.setup != nil {
				tt.setup(w)
			}
			r := worldRun(t, w, tt.from, tt.to)
			r.Config.Policy.DrainTimeout.Duration = 1
			ctx := context.Background()
			for k, v := range tt.facts {
				if _, err := r.Learn(ctx, k, v); err != nil {
					t.Fatal(err)
				}
			}
			var err error
			if _, isIntent := tt.stage.(intent); isIntent {
				// The runner releases the intent at the end of a run: the stage runs alone.
				err = tt.stage.Run(ctx, r)
				if _, jerr := r.journal.Record(ctx, r.ID, journal.Event{Stage: tt.stage.Name(), State: journal.Done}); jerr != nil {
					t.Fatal(jerr)
				}
			} else {
				err = (&Runner{Stages: []Stage{tt.stage}}).Execute(ctx, r)
			}
			check := func(when string, wt want, err error) {
				t.Helper()
				switch {
				case wt.err == "" && err != nil:
					t.Errorf("%s: %v", when, err)
				case wt.err != "" && (err == nil || !strings.Contains(err.Error(), wt.err)):
					t.Errorf("%s: error %v, want one naming %q", when, err, wt.err)
				}
				for node, v := range wt.links {
					if got := w.Links(node); got != w.At(v) {
						t.Errorf("%s: %s links %s, want %s", when, node, got, w.At(v))
					}
				}
				if got := w.AllCalls(); !slices.Equal(got, wt.calls) && !(len(got) == 0 && len(wt.calls) == 0) {
					t.Errorf("%s: commands %q, want %q", when, got, wt.calls)
				}
			}
			check("run", tt.run, err)
			jr, jerr := journal.NewStore(JournalPath(r.Config)).Run(ctx, r.ID)
			if jerr != nil {
				t.Fatal(jerr)
			}
			if ev, ok := jr.LastEvent(tt.stage.Name()); !ok || ev.State != tt.run.state {
				t.Errorf("journal: %s %s, want %s", tt.stage.Name(), ev.State, tt.run.state)
			}
			for k, v := range tt.run.facts {
				if jr.Facts[k] != v {
					t.Errorf("journal fact %s = %q, want %q", k, jr.Facts[k], v)
				}
			}
			if _, isIntent := tt.stage.(intent); isIntent {
				in, err := journal.ReadIntent(IntentPath(r.Config))
				if err != nil || in.RunID != r.ID || in.Kind != string(KindUpgrade) || in.To != tt.to {
					t.Errorf("intent %+v, %v; want run %d to %s", in, err, r.ID, tt.to)
				}
			}
			if tt.undo == nil {
				return
			}
			u, ok := tt.stage.(undoer)
			if !ok {
				t.Fatalf("%s has no undo", tt.stage.Name())
			}
			check("undo", *tt.undo, u.Undo(ctx, r))
			if _, isIntent := tt.stage.(intent); isIntent {
				if _, err := journal.ReadIntent(IntentPath(r.Config)); !journal.NoIntent(err) {
					t.Errorf("undo: the intent is still there (%v)", err)
				}
			}
		})
	}
}
