package upgrade

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/config"
)

// SyncOptions are what the operator asked of `cutover sync`.
type SyncOptions struct {
	// DryRun runs the checks and reports what the sync would do; it changes nothing.
	DryRun bool
	// Confirm, when set, is asked after the checks and before the first change.
	Confirm func(ctx context.Context, r *Run) error
	// Reporter receives the run's events; nil reports nothing.
	Reporter Reporter
	// Hostname is the local host's name; "" asks the system.
	Hostname string
	// Watch, when set, is the watch window of the sync ([policy] watch otherwise); zero
	// turns the watch off.
	Watch *time.Duration
}

// SyncNode is one node a sync brings to the live version.
type SyncNode struct {
	Name string
	// From is the version directory the node's links named before the sync: "none" for a
	// node without links (a fresh installation), "mixed" for links on two versions.
	From string
	// Offline is true when the node list marks the node offline: runs skip it until the
	// operator clears the flag.
	Offline bool
}

// SyncResult describes a finished sync, successful or not.
type SyncResult struct {
	Run      uint64
	App      string
	To       string // the cluster's live version, the master's
	Nodes    []SyncNode
	Log      string
	Duration time.Duration
	// Watched is true when the sync watched the nodes after its verify.
	Watched bool
}

// Versions that a node's links may name before a sync besides a version directory.
const (
	noLinks    = "none"  // no links at all: a fresh installation
	mixedLinks = "mixed" // lib and share on different versions: an interrupted switch
)

// SyncStages returns the stages of `cutover sync` in the order they run. The switch is the
// point of no return: before it a failure or a signal starts the stopped daemons again; from
// it on the sync pushes through and a failure asks for the sync to be run again. A sync that
// watches ([policy] watch, `sync --watch`) ends with the watch stage (sync_watch.go).
func SyncStages() []Stage {
	return []Stage{
		syncVerifyInstalled{}, // 1 named nodes: both trees of the live version installed
		stopNodes{},           // 2 named nodes: stop the daemons (undo: start them)
		syncSwitch{},          // 3 named nodes: the links to the live version (point of no return)
		ensureDirs{},          // 4 named nodes
		syncRedistribute{},    // 5 master -> named nodes: [config].redistribute, unless redist_conf is set
		start{},               // 6 named nodes: start the daemons
		redistConf{},          // 7 master: the application's redist-conf command, when set
		restart{},             // 8 named nodes: stop and start, so daemons read what redist-conf sent
		syncVerify{},          // 9 master: the configured verify
	}
}

// Sync brings the named nodes to the cluster's live version, the version the master runs:
// nodes that were offline during a run, or that were replaced. On each named node it stops
// the daemons, switches the links, runs ensure-dirs, copies the application's config from the
// master (or runs redist_conf), starts the daemons, and then runs the configured verify on the
// master. The nodes must be in the node list and not the master; a node marked offline may be
// named (sync is how it comes back), and the result says so, for the operator to clear the
// flag. The master and the other nodes are not touched.
//
// Sync refuses before writing anything when a name is unknown or names the master
// (IsBadInput), when this host is not the master (IsNotMaster), when another run holds the
// lock (journal.IsLocked) or when a run is pending. Before any change it checks that every
// named node can be reached, has a side-by-side installation and has both trees of the live
// version. The run is journaled as KindSync but writes no intent: an interrupted sync is
// finished by running it again, every stage being idempotent.
func Sync(ctx context.Context, cfg *config.Config, names []string, opts SyncOptions) (*SyncResult, error) {
	if len(names) == 0 {
		return nil, badInput(errors.New("sync: name at least one node"))
	}
	s, err := openSession(ctx, cfg, modeExclusive, sessionOptions{Reporter: opts.Reporter, Hostname: opts.Hostname, HostCheck: true})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	targets, err := syncTargets(s.r.Inventory, names)
	if err != nil {
		return nil, err
	}
	if err := s.refusePending("syncing nodes"); err != nil {
		return nil, err
	}
	s.r.watch = planWatch(cfg.Policy, opts.Watch)
	return syncNodes(ctx, s.r, targets, opts.DryRun, opts.Confirm)
}

// syncTargets returns the inventory's nodes that names name, once each and in the order
// named. Every unknown name, and the master, is refused as bad input, all of them at once.
func syncTargets(inv *nodes.Inventory, names []string) ([]nodes.Node, error) {
	var out []nodes.Node
	var errs []error
	for _, name := range names {
		n, ok := inv.Lookup(name)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("unknown node %q: not in the cluster's node list", name))
		case n.Name == inv.Master:
			errs = append(errs, fmt.Errorf("%s is the master: it runs the live version that sync brings the other nodes to", n.Name))
		case !slices.ContainsFunc(out, func(o nodes.Node) bool { return o.Name == n.Name }):
			out = append(out, n)
		}
	}
	if len(errs) > 0 {
		return nil, badInput(fmt.Errorf("sync: %w", errors.Join(errs...)))
	}
	return out, nil
}

// syncNodes runs the sync of targets on a prepared run: it reads the live version and the
// nodes' links, journals the run and executes SyncStages, ended with the watch when r.watch
// has a window.
func syncNodes(ctx context.Context, r *Run, targets []nodes.Node, dryRun bool, confirm func(context.Context, *Run) error) (*SyncResult, error) {
	start := time.Now()
	cfg := r.Config
	r.Online, r.Offline = targets, nil
	var err error
	if r.To, err = liveVersion(ctx, r); err != nil {
		return nil, err
	}
	if r.ToVersion, err = layout.ParseVersion(r.To); err != nil {
		return nil, fmt.Errorf("%s: the cluster's live version: %w", r.Inventory.Master, err)
	}
	r.ToDir = r.Layout.DirOf(r.ToVersion)
	res := &SyncResult{App: cfg.App, To: r.To}
	froms, err := nodeVersions(ctx, r)
	if err != nil {
		return res, err
	}
	var names []string
	facts := map[string]string{}
	for _, n := range targets {
		res.Nodes = append(res.Nodes, SyncNode{Name: n.Name, From: froms[n.Name], Offline: n.Offline})
		names = append(names, n.Name)
		facts["from."+n.Name] = froms[n.Name]
	}
	facts["nodes"] = strings.Join(names, ",")
	if r.watch.Window > 0 {
		facts[factWatch] = r.watch.String()
	}
	r.From = distinctVersions(res.Nodes)
	list := strings.Join(names, " ")
	err = execute(ctx, r, recipe{
		kind: KindSync, stages: r.watch.watched(SyncStages()), facts: facts, dryRun: dryRun, confirm: confirm,
		details: func() []string {
			var out []string
			for _, n := range res.Nodes {
				out = append(out, fmt.Sprintf("%s: %s -> %s", n.Name, n.From, r.To))
			}
			return out
		},
		what:  fmt.Sprintf("sync %s %s -> %s", cfg.App, r.From, r.To),
		where: fmt.Sprintf("on %s (master %s)", strings.Join(names, ", "), r.Inventory.Master),
	})
	res.Run, res.Log = r.ID, r.log.Path()
	res.Duration = time.Since(start)
	res.Watched = r.watch.Window > 0
	if dryRun {
		return res, err
	}
	switch {
	case err == nil:
		for _, n := range res.Nodes {
			if n.Offline {
				r.Warn("%s is at %s now but still marked offline: runs skip it until the flag is cleared in the node list (offline = true in %s, or nodes_command)", n.Name, r.To, cfgFile(cfg))
			}
		}
	case r.UndoFailed():
		err = pastPONR(fmt.Errorf("sync of %s failed before the switch, and starting their daemons again failed too, so they may be left stopped; see %s, fix the cause and run 'cutover sync %s' again", list, res.Log, list))
	case IsPastPONR(err) && r.watchOnly():
		err = pastPONR(r.syncWatchErr(names))
	case IsPastPONR(err):
		err = pastPONR(fmt.Errorf("sync of %s went past the point of no return (the switch) but %s failed; fix the cause and run 'cutover sync %s' again", list, joinNames(r.Failed()), list))
	}
	return res, err
}

// nodeVersions reads, on every node the run works on, the version directory its links name.
// A node without links gets noLinks (a fresh installation: the switch creates them); a node
// whose links are on two versions gets mixedLinks (the switch repairs them). A node that
// cannot be reached, or whose installation is not side by side, is refused, naming it.
func nodeVersions(ctx context.Context, r *Run) (map[string]string, error) {
	var mu sync.Mutex
	out := map[string]string{}
	_, err := nodes.Each(ctx, r.Online, r.Config.SSH.Parallel, "", func(ctx context.Context, n nodes.Node) error {
		c, err := r.dial.Conn(ctx, n.Name)
		if err != nil {
			return err
		}
		v, err := syncFrom(ctx, r.Layout, c)
		if err != nil {
			return onNode(n.Name, err)
		}
		mu.Lock()
		out[n.Name] = v
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// syncFrom is nodeVersions on one node.
func syncFrom(ctx context.Context, lay *layout.Layout, c Conn) (string, error) {
	v, err := lay.Live(ctx, c)
	switch {
	case err == nil:
		return v, nil
	case layout.IsDisagree(err):
		return mixedLinks, nil
	case layout.IsNotSideBySide(err):
		missing := 0
		for _, link := range []string{lay.LibLink(), lay.ShareLink()} {
			if _, lerr := c.Lstat(link); errors.Is(lerr, fs.ErrNotExist) {
				missing++
			}
		}
		if missing == 2 {
			return noLinks, nil
		}
	}
	return "", err
}

// distinctVersions lists the versions the nodes came from, each once, in order.
func distinctVersions(list []SyncNode) string {
	var out []string
	for _, n := range list {
		if !slices.Contains(out, n.From) {
			out = append(out, n.From)
		}
	}
	return strings.Join(out, ",")
}

func cfgFile(cfg *config.Config) string {
	if cfg.File == "" {
		return config.DefaultConfigPath
	}
	return cfg.File
}
