package upgrade

import (
	"context"
	"errors"
	"fmt"
	"io"
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

// simConn is a node of a syncCluster: a node of its upgradetest.World (its files, its recorded
// commands), whose commands can also fail or hang on demand through the cluster's maps.
type simConn struct {
	*upgradetest.Node
	node string
	cl   *syncCluster
}

// RunInput runs argv as RunShell runs a script; the fake nodes read no input.
func (c *simConn) RunInput(ctx context.Context, _ io.Reader, argv ...string) (nodes.Result, error) {
	return c.RunShell(ctx, nodes.QuoteArgs(argv))
}

// RunShell hangs until ctx ends when hang says so (once, unrecorded), otherwise records the
// command on the World's node and fails it with exit 7 when fail says so.
func (c *simConn) RunShell(ctx context.Context, script string) (nodes.Result, error) {
	c.cl.mu.Lock()
	hang := c.cl.hang[c.node+" "+script]
	delete(c.cl.hang, c.node+" "+script) // it hangs once
	failing := c.cl.fail[c.node+" "+script]
	c.cl.mu.Unlock()
	if hang {
		<-ctx.Done()
		return nodes.Result{Node: c.node, Command: script}, ctx.Err()
	}
	res, err := c.Node.RunShell(ctx, script)
	if err == nil && failing {
		return nodes.Result{Node: c.node, Command: script, ExitCode: 7, Stderr: []byte(script + " failed on demand\n")},
			fmt.Errorf("run %q: exit 7: %s failed on demand", script, script)
	}
	return res, err
}

// syncCluster is a cluster built on an upgradetest.World: node1 (the master) at 1.1.0, node2 at
// 1.0.0, node3 marked offline at 1.0.0, node4 freshly installed without links. Every node has
// both versions installed. The master's application config is a real file that redistribute
// copies.
type syncCluster struct {
	w     *upgradetest.World
	dir   string
	cfg   *config.Config
	inv   *nodes.Inventory
	conns map[string]*simConn
	down  map[string]bool // nodes that cannot be reached

	mu     sync.Mutex
	fail   map[string]bool // "node command" pairs that fail
	hang   map[string]bool // "node command" pairs that hang until cancelled, once
	events []Event
	// onEvent, when set, is called with every event after it is recorded, without mu held.
	onEvent func(Event)
	// watch is the watch of the cluster's syncs, as Sync plans it from the policy.
	watch watchPlan
}

// newSimCluster builds the World of a syncCluster: the named nodes (the master first, offline
// ones marked), 1.0.0 and 1.1.0 installed on each, every node's links on 1.0.0.
func newSimCluster(t *testing.T, names []string, offline ...string) *syncCluster {
	t.Helper()
	w := upgradetest.New(t, upgradetest.Options{Nodes: names, Offline: offline, Versions: []string{"1.0.0", "1.1.0"}, Live: "1.0.0"})
	sc := &syncCluster{w: w, dir: w.Dir, inv: w.Inventory(), conns: map[string]*simConn{}, down: map[string]bool{},
		fail: map[string]bool{}, hang: map[string]bool{}}
	for _, name := range names {
		n, err := w.Node(name)
		if err != nil {
			t.Fatal(err)
		}
		sc.conns[name] = &simConn{Node: n, node: name, cl: sc}
	}
	return sc
}

func newSyncCluster(t *testing.T) *syncCluster {
	t.Helper()
	sc := newSimCluster(t, []string{"node1", "node2", "node3", "node4"}, "node3")
	dir := sc.dir
	sc.link(t, "node1", "1.1.0")
	for _, l := range []string{"lib", "share"} {
		if err := os.Remove(filepath.Join(dir, "node4/etc/app", l)); err != nil {
			t.Fatal(err)
		}
	}
	appConfig := sc.w.ConfigFile()
	if err := os.WriteFile(appConfig, []byte(`{"version": "1.1.0"}`), 0o640); err != nil {
		t.Fatal(err)
	}
	sc.cfg = &config.Config{
		App: "app", VersionDirs: "full",
		Paths: config.PathsConfig{LibDir: "/usr/lib", DataDir: "/usr/share", SysconfDir: "/etc", LocalstateDir: "/var", StateDir: filepath.Join(dir, "state")},
		SSH:   config.SSHConfig{Parallel: 4},
		Commands: config.CommandsConfig{
			DaemonsStop: "stop", DaemonsStart: "start", EnsureDirs: "ensure-dirs", Verify: "verify",
			QueueDrain: "drain", PostUpgrade: "post-upgrade",
		},
		Config: config.AppConfig{File: appConfig, VersionKey: "/version", VersionEncoding: "semver", Redistribute: []string{appConfig}},
	}
	return sc
}

func (sc *syncCluster) mkdir(t *testing.T, node, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(sc.dir, node, p), 0o755); err != nil {
		t.Fatal(err)
	}
}

// link points node's links at version, replacing them.
func (sc *syncCluster) link(t *testing.T, node, version string) {
	t.Helper()
	for _, l := range []struct{ link, tree string }{{"/etc/app/lib", "/usr/lib/app/"}, {"/etc/app/share", "/usr/share/app/"}} {
		p := filepath.Join(sc.dir, node, l.link)
		_ = os.Remove(p)
		if err := os.Symlink(l.tree+version, p); err != nil {
			t.Fatal(err)
		}
	}
}

// links returns where node's links point, "" for a missing one.
func (sc *syncCluster) links(node string) string {
	var out []string
	for _, l := range []string{"lib", "share"} {
		target, _ := os.Readlink(filepath.Join(sc.dir, node, "etc/app", l))
		out = append(out, target)
	}
	return strings.Join(out, " ")
}

func (sc *syncCluster) Conn(_ context.Context, node string) (Conn, error) {
	if sc.down[node] {
		return nil, fmt.Errorf("%s: dial 10.0.0.1:22: connection refused", node)
	}
	c, ok := sc.conns[node]
	if !ok {
		return nil, fmt.Errorf("%s: not in the inventory", node)
	}
	return c, nil
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

func (sc *syncCluster) callsOf(node string) []string {
	var out []string
	for _, c := range sc.w.Calls(node) {
		if !strings.Contains(c, "cutover-check") {
			out = append(out, c)
		}
	}
	return out
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
	r := &Run{Config: sc.cfg, Layout: lay, Inventory: sc.inv, Force: map[string]bool{},
		Online: sc.inv.Online(), Offline: sc.inv.Offline(), dial: sc, report: sc, watch: sc.watch}
	targets, err := syncTargets(sc.inv, names)
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
		if got := sc.links(node); got != at110 {
			t.Errorf("%s links = %s, want %s", node, got, at110)
		}
		data, err := os.ReadFile(filepath.Join(sc.dir, node, "var/lib/app/config.json"))
		if err != nil || string(data) != `{"version": "1.1.0"}` {
			t.Errorf("%s config = %q, %v; want the master's", node, data, err)
		}
		if got, want := sc.callsOf(node), []string{"stop", "ensure-dirs", "start"}; !slices.Equal(got, want) {
			t.Errorf("%s ran %q, want %q", node, got, want)
		}
	}
	if got := sc.links("node1"); got != at110 {
		t.Errorf("master links = %s", got)
	}
	if got := sc.callsOf("node1"); !slices.Equal(got, []string{"verify"}) {
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
	if got := sc.links("node2"); got != at110 {
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
	if got, want := sc.callsOf("node2"), []string{"stop", "ensure-dirs", "start", sync, "stop", "start"}; !slices.Equal(got, want) {
		t.Errorf("node2 ran %q, want %q", got, want)
	}
	if got, want := sc.callsOf("node1"), []string{"redist-conf", sync, "verify"}; !slices.Equal(got, want) {
		t.Errorf("master ran %q, want %q", got, want)
	}
	if _, err := os.Stat(filepath.Join(sc.dir, "node2", "var/lib/app/config.json")); !os.IsNotExist(err) {
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
			if err := os.RemoveAll(filepath.Join(sc.dir, "node4/usr/share/app/1.1.0")); err != nil {
				t.Fatal(err)
			}
		}, "node4: app 1.1.0 is not installed: missing /usr/share/app/1.1.0", ""},
		{"node unreachable", func(t *testing.T, sc *syncCluster) { sc.down["node4"] = true }, "node4: dial", ""},
		{"not side by side", func(t *testing.T, sc *syncCluster) {
			sc.mkdir(t, "node4", "/etc/app/lib")
		}, "node4: /etc/app/lib is a directory", ""},
		{"one link missing", func(t *testing.T, sc *syncCluster) {
			sc.link(t, "node4", "1.0.0")
			if err := os.Remove(filepath.Join(sc.dir, "node4/etc/app/share")); err != nil {
				t.Fatal(err)
			}
		}, "node4: /etc/app/share is missing", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sc := newSyncCluster(t)
			tt.setup(t, sc)
			before := sc.links("node2") + "|" + sc.links("node4")
			_, err := sc.sync(t, false, "node2", "node4")
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || IsBadInput(err) || IsPastPONR(err) {
				t.Fatalf("sync = %v, want a refusal with %q", err, tt.wantErr)
			}
			if after := sc.links("node2") + "|" + sc.links("node4"); after != before {
				t.Errorf("links changed: %s, want %s", after, before)
			}
			for _, node := range []string{"node1", "node2", "node4"} {
				if calls := sc.callsOf(node); len(calls) > 0 {
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
				sc.fail[f] = true
			}
			_, err := sc.sync(t, false, "node2", "node4")
			if err == nil || IsPastPONR(err) != tt.wantPast {
				t.Fatalf("sync = %v, want an error with IsPastPONR %v", err, tt.wantPast)
			}
			if tt.wantPast && !strings.Contains(err.Error(), "'cutover sync node2 node4' again") {
				t.Errorf("error %q does not say to run the sync again", err)
			}
			if got := sc.links("node2"); got != tt.wantLinks {
				t.Errorf("node2 links = %s, want %s", got, tt.wantLinks)
			}
			if got := sc.callsOf("node2"); !slices.Equal(got, tt.wantCalls) {
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
	if got := sc.links("node2"); got != at100 {
		t.Errorf("node2 links = %s after a dry run", got)
	}
	for _, node := range []string{"node1", "node2", "node4"} {
		if calls := sc.callsOf(node); len(calls) > 0 {
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
	n2, _ := sc.inv.Lookup("node2")
	for _, pending := range []*journal.Intent{nil, {RunID: 7, From: "1.1.0", To: "1.0.0"}} {
		r := &Run{Config: sc.cfg, Layout: lay, Inventory: sc.inv, Target: Target{From: "1.1.0", To: "1.1.0"}, planPending: pending}
		err := checkNode(context.Background(), r, sc.conns["node2"], n2, "1.1.0", "1.1.0")
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
	before := sc.links("node2") + "|" + sc.links("node4")
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
	if after := sc.links("node2") + "|" + sc.links("node4"); after != before {
		t.Errorf("links changed: %s, want %s", after, before)
	}
	for _, node := range []string{"node2", "node4"} {
		if calls := sc.callsOf(node); len(calls) > 0 {
			t.Errorf("%s ran %q, want nothing", node, calls)
		}
	}
	if runs := sc.journalRuns(t); len(runs) > 0 {
		t.Errorf("journal has %d runs after a declined sync, want none", len(runs))
	}
}
