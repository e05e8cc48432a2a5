// Package upgradetest is the fake cluster the tests of cutover's stage machine build on: nodes
// whose file systems are directories under a temporary root, the application's versions
// installed side by side on each, the links of each node, the commands a stage runs recorded
// per node (and failed on demand), and the application's config on the master. It imports
// nothing of package upgrade: a World's nodes satisfy upgrade.Conn as they are, and the tests
// hand them to a run through a small Dialer of their own.
package upgradetest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/config"
)

// Options describe a World.
type Options struct {
	// App is the application's name; "app" when empty.
	App string
	// Nodes are the nodes' names, the master first; node1..node3 when empty.
	Nodes []string
	// Offline are the nodes the node list marks offline.
	Offline []string
	// Versions are installed side by side on every node; 1.0.0 and 1.1.0 when empty.
	Versions []string
	// Live is the version every node's links name; the first of Versions when empty.
	Live string
	// Rooted makes Config's paths the master's directory as the test machine sees it, the
	// way a one-node cluster under a temporary root is configured: what cutover reads of its
	// master's own files (the migrations in the share tree, the state a backup archives)
	// then lies in the World, and the links name the trees by those paths. Every node takes
	// such a path as its own (see Node), but the test machine follows a link of another
	// node into the master's tree: nothing may follow one (the layout never does).
	Rooted bool
}

// World is a fake cluster under a temporary directory.
type World struct {
	Dir    string
	App    string
	Master string
	rooted string // the prefix of Config's paths: the master's directory, or "" unless Rooted
	nodes  map[string]*Node
	names  []string
	inv    *nodes.Inventory

	mu    sync.Mutex
	calls map[string][]string
	seq   []string                   // every node's commands and process checks, as "node: command", in the order they ran
	fail  map[string]bool            // "node command" pairs that fail
	once  map[string]int             // "node command" pairs and how many more times they fail
	down  map[string]bool            // nodes that cannot be reached
	out   map[string]string          // "node command" pairs and what they print
	outs  map[string][]string        // "node command" pairs and what they print the next times, in turn
	hang  map[string]chan struct{}   // "node command" pairs that hang once, each closed when reached
	seen  func(node, command string) // what OnCommand set, or nil

	prepared []string            // the nodes whose connection was prepared (Prepare), in order
	boots    map[string]string   // node -> the boot identity its commands' results carry (SetBoot)
	starts   map[string]uint64   // node -> the start time its commands' results carry (SetStart)
	checks   map[string][]string // node -> what its process checks print, in turn (AnswerChecks)
	failWith map[string]failure  // node -> the commands that fail with an error of the test's (FailWith)
	clock    *Clock              // the fake clock the nodes' work moves on (UseClock), or nil
}

// New builds a World for t; its directory goes with the test.
func New(t testing.TB, o Options) *World {
	t.Helper()
	if o.App == "" {
		o.App = "app"
	}
	if len(o.Nodes) == 0 {
		o.Nodes = []string{"node1", "node2", "node3"}
	}
	if len(o.Versions) == 0 {
		o.Versions = []string{"1.0.0", "1.1.0"}
	}
	if o.Live == "" {
		o.Live = o.Versions[0]
	}
	w := &World{Dir: t.TempDir(), App: o.App, Master: o.Nodes[0], nodes: map[string]*Node{}, names: o.Nodes,
		calls: map[string][]string{}, fail: map[string]bool{}, down: map[string]bool{}, out: map[string]string{}, outs: map[string][]string{}, once: map[string]int{},
		hang: map[string]chan struct{}{}, boots: map[string]string{}, starts: map[string]uint64{}, checks: map[string][]string{},
		failWith: map[string]failure{}}
	if o.Rooted {
		w.rooted = filepath.Join(w.Dir, w.Master)
	}
	w.Answer(w.Master, "busy", "0\n")
	var list []nodes.Node
	for _, name := range o.Nodes {
		list = append(list, nodes.Node{Name: name, Offline: slices.Contains(o.Offline, name)})
		n := &Node{name: name, root: filepath.Join(w.Dir, name), w: w}
		w.nodes[name] = n
		for _, v := range o.Versions {
			w.Install(t, name, v)
		}
		w.mkdir(t, name, "/etc/"+o.App)
		w.Link(t, name, o.Live)
	}
	inv, err := nodes.NewInventory(w.Master, list)
	if err != nil {
		t.Fatal(err)
	}
	w.inv = inv
	w.WriteFile(t, w.Master, w.ConfigFile(), fmt.Sprintf("{\n  \"version\": %q\n}\n", o.Live))
	return w
}

// Config is a cutover configuration for the World: its paths, its nodes, a command of each
// kind that only records itself, and the application's JSON config on the master, versioned
// at /version. The paths are root-less unless the World is Rooted.
func (w *World) Config() *config.Config {
	return &config.Config{
		App: w.App, VersionDirs: "full",
		Paths: config.PathsConfig{LibDir: w.rooted + "/usr/lib", DataDir: w.rooted + "/usr/share", SysconfDir: w.rooted + "/etc",
			LocalstateDir: w.rooted + "/var", StateDir: filepath.Join(w.Dir, "state")},
		Cluster: config.ClusterConfig{Master: w.Master},
		SSH:     config.SSHConfig{Parallel: 4},
		Commands: config.CommandsConfig{
			DaemonsStop: "stop", DaemonsStart: "start", EnsureDirs: "ensure-dirs", Verify: "verify",
			QueueDrain: "drain", QueueUndrain: "undrain", QueueBusy: "busy", PostUpgrade: "post-upgrade",
		},
		Config: config.AppConfig{File: w.ConfigFile(), VersionKey: "/version", VersionEncoding: "semver",
			Migrate: "builtin", Redistribute: []string{w.ConfigFile()}},
		Policy: config.PolicyConfig{AllowMinorJump: true, Downgrade: "previous-minor", BackupKeep: 5, OnFailure: "stop"},
	}
}

// ConfigFile is the application's config on the master, as the run sees it: a path on the
// test machine, as cutover reads its master's own files.
func (w *World) ConfigFile() string {
	return filepath.Join(w.Dir, w.Master, "var/lib", w.App, "config.json")
}

// Inventory is the World's node list.
func (w *World) Inventory() *nodes.Inventory { return w.inv }

// Node returns the connection to node, or the error of a node that cannot be reached.
func (w *World) Node(name string) (*Node, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.down[name] {
		return nil, fmt.Errorf("dial %s:22: connect: no route to host", name)
	}
	n, ok := w.nodes[name]
	if !ok {
		return nil, fmt.Errorf("%s: not a node of the world", name)
	}
	return n, nil
}

// Install puts version's two trees on node.
func (w *World) Install(t testing.TB, node, version string) {
	t.Helper()
	w.mkdir(t, node, "/usr/lib/"+w.App+"/"+version+"/usr/sbin")
	w.mkdir(t, node, "/usr/share/"+w.App+"/"+version)
}

// Link points node's two links at version, by the paths Config names the trees with.
func (w *World) Link(t testing.TB, node, version string) {
	t.Helper()
	for _, l := range []struct{ link, tree string }{{"lib", "/usr/lib/"}, {"share", "/usr/share/"}} {
		p := filepath.Join(w.Dir, node, "etc", w.App, l.link)
		_ = os.Remove(p)
		if err := os.Symlink(w.rooted+l.tree+w.App+"/"+version, p); err != nil {
			t.Fatal(err)
		}
	}
}

// Links says where node's two links point: "lib share", each a root-less path (a Rooted
// World's prefix taken off), or "-" for a missing link.
func (w *World) Links(node string) string {
	var out []string
	for _, l := range []string{"lib", "share"} {
		target, err := os.Readlink(filepath.Join(w.Dir, node, "etc", w.App, l))
		if err != nil {
			target = "-"
		}
		if w.rooted != "" {
			target = strings.TrimPrefix(target, w.rooted)
		}
		out = append(out, target)
	}
	return strings.Join(out, " ")
}

// At is what Links says of a node on version.
func (w *World) At(version string) string {
	return "/usr/lib/" + w.App + "/" + version + " /usr/share/" + w.App + "/" + version
}

// WriteFile writes a file of node at the root-less path p, or at p itself when it already lies
// under the World's directory.
func (w *World) WriteFile(t testing.TB, node, p, data string) {
	t.Helper()
	full := p
	if !strings.HasPrefix(p, w.Dir) {
		full = filepath.Join(w.Dir, node, p)
	}
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(data), 0o640); err != nil {
		t.Fatal(err)
	}
}

// ReadFile reads a file the way WriteFile names it; "" when it is missing.
func (w *World) ReadFile(node, p string) string {
	full := p
	if !strings.HasPrefix(p, w.Dir) {
		full = filepath.Join(w.Dir, node, p)
	}
	data, _ := os.ReadFile(full)
	return string(data)
}

// Migration puts a config migration step (cfgupgrade's JSON, e.g. {"from":"1.0","to":"1.1",
// "up":[...],"down":[...]}) named name into version's share tree on the master, where cutover
// loads the newer version's migrations from. Only a Rooted World's master is read there.
func (w *World) Migration(t testing.TB, version, name, step string) {
	t.Helper()
	w.WriteFile(t, w.Master, "/usr/share/"+w.App+"/"+version+"/cutover/migrations/"+name, step)
}

// Calls returns the commands node ran, in order.
func (w *World) Calls(node string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.calls[node])
}

// Sequence returns every node's commands as "node: command" lines in the order they ran across
// the nodes, the checks of a node's processes among them as "node: check".
func (w *World) Sequence() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seq)
}

// AllCalls returns every node's commands as "node: command" lines, by node then in order.
func (w *World) AllCalls() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var names []string
	for n := range w.calls {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []string
	for _, n := range names {
		for _, c := range w.calls[n] {
			out = append(out, n+": "+c)
		}
	}
	return out
}

// Fail makes command fail on node from now on.
func (w *World) Fail(node, command string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fail[node+" "+command] = true
}

// FailOnce makes command fail the next time node runs it, and succeed after: a transient
// failure, which an undo or a retry gets past.
func (w *World) FailOnce(node, command string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.once[node+" "+command]++
}

// Answer makes command print stdout on node from now on.
func (w *World) Answer(node, command, stdout string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.out[node+" "+command] = stdout
}

// AnswerOnce makes command print stdout on node the next time it runs there, after what
// earlier calls of AnswerOnce queued; then it prints what Answer set.
func (w *World) AnswerOnce(node, command, stdout string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.outs[node+" "+command] = append(w.outs[node+" "+command], stdout)
}

// Hang makes command hang on node the next time it runs there, unrecorded, until its context
// ends; the channel it returns is closed when the command reaches the hang.
func (w *World) Hang(node, command string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	reached := make(chan struct{})
	w.hang[node+" "+command] = reached
	return reached
}

// OnCommand makes seen see every command a node runs (not the checks of its processes), as it
// starts, before the World records or answers it.
func (w *World) OnCommand(seen func(node, command string)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = seen
}

// failure is a command that fails with a given error: any command that holds its text.
type failure struct {
	holds string
	err   error
}

// AnswerChecks makes the checks cutover makes of node's processes print outs in turn, the last
// one from then on; by default they find none.
func (w *World) AnswerChecks(node string, outs ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.checks[node] = outs
}

// FailWith makes every command of node that holds the text holds fail from now on with exit 1
// and err (recorded as it ran).
func (w *World) FailWith(node, holds string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failWith[node] = failure{holds, err}
}

// SetStart makes the results of node's commands carry the start time tick, in clock ticks
// since the node's boot, as those of a node's command shell do (nodes.Result.Start).
func (w *World) SetStart(node string, tick uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.starts[node] = tick
}

// Down makes node unreachable from now on.
func (w *World) Down(node string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.down[node] = true
}

func (w *World) mkdir(t testing.TB, node, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(w.Dir, node, p), 0o755); err != nil {
		t.Fatal(err)
	}
}
