package upgrade

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

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
	watching := watchPlan{Window: time.Nanosecond, Interval: time.Millisecond, Failures: 3, Boots: 3}
	all := func(v string) map[string]string { return map[string]string{"node1": v, "node2": v, "node3": v} }
	runWorldCases(t, []worldCase{
		{name: "stop-master stops the master's daemons; its undo starts them",
			from: "1.0.0", to: "1.1.0", stage: stopMaster{},
			state: journal.Done, calls: []string{"node1: stop"},
			undo: &worldUndo{calls: []string{"node1: stop", "node1: start"}}},
		{name: "stop-nodes stops the other nodes' daemons",
			from: "1.0.0", to: "1.1.0", stage: stopNodes{},
			state: journal.Done, calls: []string{"node2: stop", "node3: stop"}},
		{name: "stop-nodes records each node's boot identity as its stop's result carries it, reading no file",
			from: "1.0.0", to: "1.1.0", setup: func(t *testing.T, w *upgradetest.World) {
				w.SetBoot("node2", "b2/17")
				w.SetBoot("node3", "b3/19")
			}, stage: stopNodes{},
			state: journal.Done, calls: []string{"node2: stop", "node3: stop"},
			learned: map[string]string{factBootPrefix + "node2": "b2/17", factBootPrefix + "node3": "b3/19"}},
		{name: "stop-nodes fails on a node whose stop fails, and the runner starts the daemons again",
			from: "1.0.0", to: "1.1.0", setup: func(t *testing.T, w *upgradetest.World) { w.Fail("node3", "stop") }, stage: stopNodes{},
			state: journal.Undone, err: "node3", calls: []string{"node2: stop", "node2: start", "node3: stop", "node3: start"}},
		{name: "stop-all stops the daemons on every online node, the master's too, and records each node's boot",
			opts: upgradetest.Options{Offline: []string{"node3"}}, from: "1.0.0", to: "1.1.0", setup: func(t *testing.T, w *upgradetest.World) {
				w.SetBoot("node1", "b1/5")
				w.SetBoot("node2", "b2/17")
			}, stage: stopAll{},
			state: journal.Done, calls: []string{"node1: stop", "node2: stop"},
			learned: map[string]string{factBootPrefix + "node1": "b1/5", factBootPrefix + "node2": "b2/17"}},
		{name: "stop-all fails on a node whose stop fails, naming it, and starts nothing again",
			from: "1.0.0", to: "1.1.0", setup: func(t *testing.T, w *upgradetest.World) { w.Fail("node2", "stop") }, stage: stopAll{},
			state: journal.Failed, err: "node2", calls: []string{"node1: stop", "node2: stop", "node3: stop"}},
		{name: "switch points every node at the target, the master last; its undo switches back",
			from: "1.0.0", to: "1.1.0", stage: switchLinks{},
			state: journal.Done, links: all("1.1.0"),
			undo: &worldUndo{links: all("1.0.0")}},
		{name: "switch refuses a node without the target's trees; the runner switches the others back",
			from: "1.0.0", to: "1.2.0", setup: func(t *testing.T, w *upgradetest.World) {
				for _, n := range []string{"node1", "node2"} {
					w.Install(t, n, "1.2.0")
				}
			}, stage: switchLinks{},
			state: journal.Undone, err: "node3", links: all("1.0.0")},
		{name: "switch of a downgrade is not undone (it follows the point of no return)",
			from: "1.1.0", to: "1.0.0", setup: func(t *testing.T, w *upgradetest.World) {
				for _, n := range []string{"node1", "node2", "node3"} {
					w.Link(t, n, "1.1.0")
				}
			}, stage: switchLinks{},
			state: journal.Done, links: all("1.0.0"),
			undo: &worldUndo{links: all("1.0.0")}},
		{name: "ensure-dirs runs on every node",
			from: "1.0.0", to: "1.1.0", stage: ensureDirs{},
			state: journal.Done, calls: []string{"node1: ensure-dirs", "node2: ensure-dirs", "node3: ensure-dirs"}},
		{name: "drain learns the queue was open, drains it and waits; its undo opens it",
			from: "1.0.0", to: "1.1.0", stage: drain{},
			state: journal.Done, calls: []string{"node1: drain", "node1: busy"}, learned: map[string]string{factQueueDrained: "no"},
			undo: &worldUndo{calls: []string{"node1: drain", "node1: busy", "node1: undrain"}}},
		{name: "drain gives up after drain_timeout while jobs remain, and the runner opens the queue again",
			from: "1.0.0", to: "1.1.0", setup: func(t *testing.T, w *upgradetest.World) { w.Answer("node1", "busy", "2\n") }, stage: drain{},
			state: journal.Undone, err: "still has 2 jobs after drain_timeout", calls: []string{"node1: drain", "node1: busy", "node1: undrain"},
			learned: map[string]string{factQueueDrained: "no"}},
		{name: "undrain opens the queue the run drained",
			from: "1.0.0", to: "1.1.0", facts: map[string]string{factQueueDrained: "no"}, stage: undrain{},
			state: journal.Done, calls: []string{"node1: undrain"}},
		{name: "undrain leaves drained a queue that was drained before the run",
			from: "1.0.0", to: "1.1.0", facts: map[string]string{factQueueDrained: "yes"}, stage: undrain{},
			state: journal.Done},
		{name: "post-upgrade runs the hook on the master",
			from: "1.0.0", to: "1.1.0", stage: postUpgrade{},
			state: journal.Done, calls: []string{"node1: post-upgrade"}},
		{name: "reverify passes when the nodes and trees are as checked",
			from: "1.0.0", to: "1.1.0", stage: reverify{},
			state: journal.Done},
		{name: "reverify stops the run when a node lost the target's trees",
			from: "1.0.0", to: "1.1.0", setup: func(t *testing.T, w *upgradetest.World) { removeTree(t, w, "node2", "usr/share/app/1.1.0") },
			stage: reverify{},
			state: journal.Failed, err: "node2"},
		{name: "intent writes the intent file naming the run; its undo removes it",
			from: "1.0.0", to: "1.1.0", stage: intent{}, alone: true,
			state: journal.Done,
			check: func(t *testing.T, w *upgradetest.World, r *Run) {
				in, err := journal.ReadIntent(IntentPath(r.Config))
				if err != nil || in.RunID != r.ID || in.Kind != string(KindUpgrade) || in.To != "1.1.0" {
					t.Errorf("intent %+v, %v; want run %d to 1.1.0", in, err, r.ID)
				}
			},
			undo: &worldUndo{check: func(t *testing.T, w *upgradetest.World, r *Run) {
				if _, err := journal.ReadIntent(IntentPath(r.Config)); !journal.NoIntent(err) {
					t.Errorf("undo: the intent is still there (%v)", err)
				}
			}}},
		{name: "watch is skipped by a run without a watch window",
			from: "1.0.0", to: "1.1.0", past: true, stage: watchWindow{}, state: journal.Skipped},
		{name: "watch checks every node's daemons and the verify until its window passed, and journals the round",
			opts: upgradetest.Options{Live: "1.1.0"}, from: "1.0.0", to: "1.1.0", past: true,
			facts: map[string]string{factWatch: watching.String()}, prepare: func(t *testing.T, w *upgradetest.World, r *Run) { r.watch = watching },
			stage: watchWindow{},
			state: journal.Done, calls: []string{"node1: verify"},
			check: func(t *testing.T, w *upgradetest.World, r *Run) {
				if got := w.Sequence(); !slices.Contains(got, "node2: check") || !slices.Contains(got, "node3: check") {
					t.Errorf("the commands ran %q, want every node's daemons checked", got)
				}
				if end, _ := r.Fact("watch.1.end"); !strings.HasPrefix(end, "passed: 1 of 1 checks passed") {
					t.Errorf("the round's end %q, want 1 of 1 checks passed", end)
				}
			}},
		{name: "the sync's switch points every node at the live version and is not undone",
			from: "1.0.0", to: "1.1.0", stage: syncSwitch{},
			state: journal.Done, links: all("1.1.0")},
	})
}
