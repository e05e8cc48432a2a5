package upgrade

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/config"
	"github.com/cutover/cutover/upgrade/upgradetest"
)

// syncCluster runs syncs on an upgradetest.World and records what they report. Its World
// (newSyncCluster): node1 (the master) at 1.1.0, node2 at 1.0.0, node3 marked offline at
// 1.0.0, node4 freshly installed without links; every node has both versions installed, and
// the master's application config is a real file that redistribute copies.
type syncCluster struct {
	w   *upgradetest.World
	cfg *config.Config

	mu     sync.Mutex
	events []Event
	// onEvent, when set, is called with every event after it is recorded, without mu held.
	onEvent func(Event)
	// watch is the watch of the cluster's syncs, as Sync plans it from the policy.
	watch watchPlan
}

// newSimCluster builds a syncCluster on a World of the named nodes (the master first, offline
// ones marked), 1.0.0 and 1.1.0 installed on each, every node's links on 1.0.0, and the World's
// config.
func newSimCluster(t *testing.T, names []string, offline ...string) *syncCluster {
	t.Helper()
	w := upgradetest.New(t, upgradetest.Options{Nodes: names, Offline: offline, Versions: []string{"1.0.0", "1.1.0"}, Live: "1.0.0"})
	return &syncCluster{w: w, cfg: w.Config()}
}

func newSyncCluster(t *testing.T) *syncCluster {
	t.Helper()
	sc := newSimCluster(t, []string{"node1", "node2", "node3", "node4"}, "node3")
	sc.w.Link(t, "node1", "1.1.0")
	for _, l := range []string{"lib", "share"} {
		if err := os.Remove(filepath.Join(sc.w.Dir, "node4/etc/app", l)); err != nil {
			t.Fatal(err)
		}
	}
	sc.w.WriteFile(t, sc.w.Master, sc.w.ConfigFile(), `{"version": "1.1.0"}`)
	return sc
}

// fail makes each "node command" pair fail from now on.
func (sc *syncCluster) fail(pairs ...string) {
	for _, f := range pairs {
		node, command, _ := strings.Cut(f, " ")
		sc.w.Fail(node, command)
	}
}

func (sc *syncCluster) Report(e Event) {
	sc.mu.Lock()
	sc.events = append(sc.events, e)
	hook := sc.onEvent
	sc.mu.Unlock()
	if hook != nil {
		hook(e)
	}
}

// sync runs a sync of names on the cluster the way Sync does after its setup.
func (sc *syncCluster) sync(t *testing.T, dryRun bool, names ...string) (*SyncResult, error) {
	t.Helper()
	return sc.syncConfirm(t, dryRun, nil, names...)
}

// syncConfirm is sync with the operator's confirmation.
func (sc *syncCluster) syncConfirm(t *testing.T, dryRun bool, confirm func(context.Context, *Run) error, names ...string) (*SyncResult, error) {
	t.Helper()
	lay, err := Layout(sc.cfg)
	if err != nil {
		t.Fatal(err)
	}
	inv := sc.w.Inventory()
	r := &Run{Config: sc.cfg, Layout: lay, Inventory: inv, Force: map[string]bool{},
		Online: inv.Online(), Offline: inv.Offline(), dial: worldDialer{sc.w}, report: sc, watch: sc.watch}
	targets, err := syncTargets(inv, names)
	if err != nil {
		t.Fatalf("syncTargets(%q) = %v", names, err)
	}
	return syncNodes(context.Background(), r, targets, dryRun, confirm)
}

// journalRuns returns the cluster's journal.
func (sc *syncCluster) journalRuns(t *testing.T) []journal.Run {
	t.Helper()
	runs, err := journal.NewStore(JournalPath(sc.cfg)).Runs(context.Background())
	if err != nil && !os.IsNotExist(err) {
		t.Fatalf("journal: %v", err)
	}
	return runs
}

const (
	at100 = "/usr/lib/app/1.0.0 /usr/share/app/1.0.0"
	at110 = "/usr/lib/app/1.1.0 /usr/share/app/1.1.0"
)

func TestSyncTargets(t *testing.T) {
	t.Parallel()
	inv, err := nodes.NewInventory("node1", []nodes.Node{{Name: "node1"}, {Name: "node2"}, {Name: "node3", Offline: true}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		want    []string
		wantErr []string
	}{
		{"one node", []string{"node2"}, []string{"node2"}, nil},
		{"offline node may be named", []string{"node3", "node2"}, []string{"node3", "node2"}, nil},
		{"duplicates once", []string{"node2", "node2"}, []string{"node2"}, nil},
		{"unknown node", []string{"node9"}, nil, []string{`unknown node "node9"`}},
		{"the master", []string{"node1"}, nil, []string{"node1 is the master"}},
		{"hostile name", []string{"node2; touch /tmp/pwned"}, nil, []string{`unknown node "node2; touch /tmp/pwned"`}},
		{"every refusal listed", []string{"node9", "node2", "node1", ""}, nil, []string{`"node9"`, "node1 is the master", `unknown node ""`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := syncTargets(inv, tt.args)
			if tt.wantErr != nil {
				if !IsBadInput(err) {
					t.Fatalf("syncTargets(%q) = %v, want bad input", tt.args, err)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("syncTargets(%q) error %q lacks %q", tt.args, err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("syncTargets(%q) = %v", tt.args, err)
			}
			var names []string
			for _, n := range got {
				names = append(names, n.Name)
			}
			if !slices.Equal(names, tt.want) {
				t.Errorf("syncTargets(%q) = %q, want %q", tt.args, names, tt.want)
			}
		})
	}
}

func TestSyncBringsNodesToTheLiveVersion(t *testing.T) {
	t.Parallel()
	sc := newSyncCluster(t)
	res, err := sc.sync(t, false, "node2", "node3", "node4")
	if err != nil {
		t.Fatalf("sync = %v", err)
	}
	for _, node := range []string{"node2", "node3", "node4"} {
		if got := sc.w.Links(node); got != at110 {
			t.Errorf("%s links = %s, want %s", node, got, at110)
		}
		data, err := os.ReadFile(filepath.Join(sc.w.Dir, node, "var/lib/app/config.json"))
		if err != nil || string(data) != `{"version": "1.1.0"}` {
			t.Errorf("%s config = %q, %v; want the master's", node, data, err)
		}
		if got, want := sc.w.Calls(node), []string{"stop", "ensure-dirs", "start"}; !slices.Equal(got, want) {
			t.Errorf("%s ran %q, want %q", node, got, want)
		}
	}
	if got := sc.w.Links("node1"); got != at110 {
		t.Errorf("master links = %s", got)
	}
	if got := sc.w.Calls("node1"); !slices.Equal(got, []string{"verify"}) {
		t.Errorf("master ran %q, want only verify", got)
	}
	wantNodes := []SyncNode{{"node2", "1.0.0", false}, {"node3", "1.0.0", true}, {"node4", noLinks, false}}
	if res.To != "1.1.0" || !slices.Equal(res.Nodes, wantNodes) || res.Run == 0 || res.Log == "" {
		t.Errorf("result = %+v, want to 1.1.0 with nodes %+v", res, wantNodes)
	}
	runs := sc.journalRuns(t)
	if len(runs) != 1 {
		t.Fatalf("journal has %d runs, want 1", len(runs))
	}
	r := runs[0]
	if r.Kind != "sync" || r.From != "1.0.0,none" || r.To != "1.1.0" || r.Outcome != journal.Succeeded {
		t.Errorf("journal run = %s %s -> %s %s, want sync 1.0.0,none -> 1.1.0 done", r.Kind, r.From, r.To, r.Outcome)
	}
	if r.Facts["nodes"] != "node2,node3,node4" || r.Facts["from.node4"] != noLinks {
		t.Errorf("journal facts = %v", r.Facts)
	}
	want := map[string]journal.State{
		"verify-installed": journal.Done, "stop-nodes": journal.Done, "switch": journal.Done, "ensure-dirs": journal.Done,
		"redistribute": journal.Done, "start": journal.Done, "redist-conf": journal.Skipped, "restart": journal.Skipped, "verify": journal.Done,
	}
	for stage, st := range want {
		if got, _ := r.StageState(stage); got != st {
			t.Errorf("journal stage %s = %q, want %q", stage, got, st)
		}
	}
	var warned bool
	for _, e := range sc.events {
		if e.Type == "warn" && strings.Contains(e.Message, "node3") && strings.Contains(e.Message, "marked offline") {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no warning that node3 is still marked offline: %+v", sc.events)
	}

	// A second sync finds the nodes at the live version and changes nothing but runs every stage.
	if _, err := sc.sync(t, false, "node2"); err != nil {
		t.Fatalf("second sync = %v", err)
	}
	if got := sc.w.Links("node2"); got != at110 {
		t.Errorf("node2 links after a second sync = %s", got)
	}
}

func TestSyncWithRedistConf(t *testing.T) {
	t.Parallel()
	sc := newSyncCluster(t)
	sc.cfg.Commands.RedistConf = "redist-conf"
	if _, err := sc.sync(t, false, "node2"); err != nil {
		t.Fatalf("sync = %v", err)
	}
	sync := nodes.QuoteArgs([]string{"sh", "-c", syncFSScript, "cutover-sync", "/var/lib/app", "/etc/app"})
	if got, want := sc.w.Calls("node2"), []string{"stop", "ensure-dirs", "start", sync, "stop", "start"}; !slices.Equal(got, want) {
		t.Errorf("node2 ran %q, want %q", got, want)
	}
	if got, want := sc.w.Calls("node1"), []string{"redist-conf", sync, "verify"}; !slices.Equal(got, want) {
		t.Errorf("master ran %q, want %q", got, want)
	}
	if _, err := os.Stat(filepath.Join(sc.w.Dir, "node2", "var/lib/app/config.json")); !os.IsNotExist(err) {
		t.Errorf("cutover copied the config although redist_conf is set: %v", err)
	}
}

// TestSyncRefusals: every check fails before anything changes on any node.
func TestSyncRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		setup       func(t *testing.T, sc *syncCluster)
		wantErr     string
		wantJournal journal.Outcome // "" when no run is journaled
	}{
		{"live version missing on a node", func(t *testing.T, sc *syncCluster) {
			if err := os.RemoveAll(filepath.Join(sc.w.Dir, "node4/usr/share/app/1.1.0")); err != nil {
				t.Fatal(err)
			}
		}, "node4: app 1.1.0 is not installed: missing /usr/share/app/1.1.0", ""},
		{"node unreachable", func(t *testing.T, sc *syncCluster) { sc.w.Down("node4") }, "node4: dial", ""},
		{"not side by side", func(t *testing.T, sc *syncCluster) {
			if err := os.MkdirAll(filepath.Join(sc.w.Dir, "node4/etc/app/lib"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, "node4: /etc/app/lib is a directory", ""},
		{"one link missing", func(t *testing.T, sc *syncCluster) {
			sc.w.Link(t, "node4", "1.0.0")
			if err := os.Remove(filepath.Join(sc.w.Dir, "node4/etc/app/share")); err != nil {
				t.Fatal(err)
			}
		}, "node4: /etc/app/share is missing", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sc := newSyncCluster(t)
			tt.setup(t, sc)
			before := sc.w.Links("node2") + "|" + sc.w.Links("node4")
			_, err := sc.sync(t, false, "node2", "node4")
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || IsBadInput(err) || IsPastPONR(err) {
				t.Fatalf("sync = %v, want a refusal with %q", err, tt.wantErr)
			}
			if after := sc.w.Links("node2") + "|" + sc.w.Links("node4"); after != before {
				t.Errorf("links changed: %s, want %s", after, before)
			}
			for _, node := range []string{"node1", "node2", "node4"} {
				if calls := sc.w.Calls(node); len(calls) > 0 {
					t.Errorf("%s ran %q, want nothing", node, calls)
				}
			}
			runs := sc.journalRuns(t)
			switch {
			case tt.wantJournal == "" && len(runs) > 0:
				t.Errorf("journal has %d runs, want none", len(runs))
			case tt.wantJournal != "" && (len(runs) != 1 || runs[0].Outcome != tt.wantJournal):
				t.Errorf("journal = %+v, want one %s run", runs, tt.wantJournal)
			}
		})
	}
}

// TestSyncFailures: a failure before the switch starts the daemons again and changes nothing
// else; a failure after it pushes through and asks for the sync to be run again.
func TestSyncFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		fail        string
		wantPast    bool
		wantLinks   string
		wantCalls   []string // node2's
		wantOutcome journal.Outcome
	}{
		{"stop fails on one node", "node4 stop", false, at100, []string{"stop", "start"}, journal.RolledBack},
		{"undo fails too", "node4 stop|node2 start", true, at100, []string{"stop", "start"}, journal.FailedPastPONR},
		{"start fails after the switch", "node4 start", true, at110, []string{"stop", "ensure-dirs", "start"}, journal.FailedPastPONR},
		{"verify fails", "node1 verify", true, at110, []string{"stop", "ensure-dirs", "start"}, journal.FailedPastPONR},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sc := newSyncCluster(t)
			for _, f := range strings.Split(tt.fail, "|") {
				sc.fail(f)
			}
			_, err := sc.sync(t, false, "node2", "node4")
			if err == nil || IsPastPONR(err) != tt.wantPast {
				t.Fatalf("sync = %v, want an error with IsPastPONR %v", err, tt.wantPast)
			}
			if tt.wantPast && !strings.Contains(err.Error(), "'cutover sync node2 node4' again") {
				t.Errorf("error %q does not say to run the sync again", err)
			}
			if got := sc.w.Links("node2"); got != tt.wantLinks {
				t.Errorf("node2 links = %s, want %s", got, tt.wantLinks)
			}
			if got := sc.w.Calls("node2"); !slices.Equal(got, tt.wantCalls) {
				t.Errorf("node2 ran %q, want %q", got, tt.wantCalls)
			}
			if runs := sc.journalRuns(t); len(runs) != 1 || runs[0].Outcome != tt.wantOutcome {
				t.Errorf("journal = %+v, want one %s run", runs, tt.wantOutcome)
			}
		})
	}
}

func TestSyncDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	sc := newSyncCluster(t)
	res, err := sc.sync(t, true, "node2", "node4")
	if err != nil {
		t.Fatalf("dry run = %v", err)
	}
	if len(res.Nodes) != 2 || res.Nodes[0].From != "1.0.0" || res.To != "1.1.0" {
		t.Errorf("dry run result = %+v", res)
	}
	if got := sc.w.Links("node2"); got != at100 {
		t.Errorf("node2 links = %s after a dry run", got)
	}
	for _, node := range []string{"node1", "node2", "node4"} {
		if calls := sc.w.Calls(node); len(calls) > 0 {
			t.Errorf("%s ran %q in a dry run", node, calls)
		}
	}
	if _, err := os.Stat(JournalPath(sc.cfg)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a dry run wrote the journal: %v", err)
	}
}

// TestCheckNodeDuringPendingRun: a node at another version than the cluster's is advised a
// sync, unless a run is pending: then it is that run's, and the check says so instead.
func TestCheckNodeDuringPendingRun(t *testing.T) {
	sc := newSyncCluster(t)
	lay, err := Layout(sc.cfg)
	if err != nil {
		t.Fatal(err)
	}
	n2, _ := sc.w.Inventory().Lookup("node2")
	c, err := sc.w.Node("node2")
	if err != nil {
		t.Fatal(err)
	}
	for _, pending := range []*journal.Intent{nil, {RunID: 7, From: "1.1.0", To: "1.0.0"}} {
		r := &Run{Config: sc.cfg, Layout: lay, Inventory: sc.w.Inventory(), Target: Target{From: "1.1.0", To: "1.1.0"}, planPending: pending}
		err := checkNode(context.Background(), r, c, n2, "1.1.0", "1.1.0")
		switch {
		case err == nil:
			t.Fatalf("pending %v: node2 at 1.0.0 passed the check", pending)
		case pending == nil && !strings.Contains(err.Error(), "cutover sync node2"):
			t.Errorf("no pending run: %v, want the sync advised", err)
		case pending != nil && (strings.Contains(err.Error(), "sync") || !strings.Contains(err.Error(), "pending run 7")):
			t.Errorf("pending run: %v, want it named and no sync advised", err)
		}
	}
}

// TestSyncConfirmation: the operator is asked once the checks passed, with what the sync will
// do on each node; a declined sync changes nothing and leaves no run in the journal.
func TestSyncConfirmation(t *testing.T) {
	t.Parallel()
	sc := newSyncCluster(t)
	before := sc.w.Links("node2") + "|" + sc.w.Links("node4")
	var title string
	var details []string
	_, err := sc.syncConfirm(t, false, func(ctx context.Context, r *Run) error {
		title, details = r.Title(), r.Details()
		return errors.New("not confirmed: nothing was changed")
	}, "node2", "node4")
	if err == nil || !strings.Contains(err.Error(), "not confirmed") {
		t.Fatalf("declined sync = %v, want the refusal", err)
	}
	if !strings.Contains(title, "sync app 1.0.0,none -> 1.1.0 on node2, node4") {
		t.Errorf("title = %q", title)
	}
	if want := []string{"node2: 1.0.0 -> 1.1.0", "node4: none -> 1.1.0"}; !slices.Equal(details, want) {
		t.Errorf("details = %q, want %q", details, want)
	}
	if after := sc.w.Links("node2") + "|" + sc.w.Links("node4"); after != before {
		t.Errorf("links changed: %s, want %s", after, before)
	}
	for _, node := range []string{"node2", "node4"} {
		if calls := sc.w.Calls(node); len(calls) > 0 {
			t.Errorf("%s ran %q, want nothing", node, calls)
		}
	}
	if runs := sc.journalRuns(t); len(runs) > 0 {
		t.Errorf("journal has %d runs after a declined sync, want none", len(runs))
	}
}
