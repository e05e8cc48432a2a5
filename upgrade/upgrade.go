package upgrade

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cutover/cutover/cfgupgrade"
	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/nodes"
)

// Options are what the operator asked of `cutover upgrade`.
type Options struct {
	// To is the version to move the cluster to.
	To string
	// Force names the skippable checks to override, such as "unhealthy".
	Force []string
	// DryRun runs the read-only stages and reports what the run would do.
	DryRun bool
	// Confirm, when set, is asked after the checks and before the first change.
	Confirm func(ctx context.Context, r *Run) error
	// Reporter receives the run's events; nil reports nothing.
	Reporter Reporter
	// Hostname is the local host's name; "" asks the system.
	Hostname string
}

// Forceable are the checks --force may override; nothing else can be forced.
var Forceable = []string{"unhealthy"}

// Result describes a finished run, successful or not.
type Result struct {
	Run       uint64
	App       string
	From, To  string
	Direction Direction
	Nodes     int
	Offline   []string
	Backup    string
	Log       string
	Duration  time.Duration
	// Nothing is true when the cluster already was at the target.
	Nothing bool
}

// Upgrade moves the cluster described by cfg to opts.To through the whole stage machine. It
// refuses before writing anything when the input is bad (IsBadInput), when this host is not
// the master (IsNotMaster) or when another run holds the lock (journal.IsLocked).
func Upgrade(ctx context.Context, cfg *Config, opts Options) (*Result, error) {
	start := time.Now()
	r, cleanup, pending, err := prepare(ctx, cfg, opts)
	if err != nil {
		return nil, err
	}
	if pending {
		return Resume(ctx, cfg, ResumeOptions{Reporter: opts.Reporter, Hostname: opts.Hostname})
	}
	defer cleanup()
	res := &Result{App: cfg.App, From: r.From, To: r.To, Direction: r.Direction, Nodes: len(r.Online)}
	for _, n := range r.Offline {
		res.Offline = append(res.Offline, n.Name)
	}
	if r.From == r.To {
		res.Nothing = true
		return res, nil
	}
	if opts.DryRun {
		rn := &Runner{Stages: Stages()[:2]}
		err := rn.Execute(ctx, r)
		res.Duration = time.Since(start)
		return res, err
	}

	store := journal.NewStore(JournalPath(cfg))
	closeOrphans(ctx, store, r)
	host, _ := os.Hostname()
	jr, err := store.CreateRun(ctx, journal.Run{Kind: "upgrade", From: r.From, To: r.To, Direction: string(r.Direction), Host: host, PID: os.Getpid()})
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	r.ID, r.journal = jr.ID, store
	res.Run = jr.ID
	if len(res.Offline) > 0 {
		if err := store.SetOffline(ctx, r.ID, res.Offline); err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
	}
	if r.log, err = openRunLog(cfg.Paths.StateDir, r.ID); err != nil {
		return nil, err
	}
	defer r.log.Close()
	res.Log = r.log.Path()
	r.log.Printf("run %d: %s %s -> %s (%s) on %d nodes, offline: %v", r.ID, cfg.App, r.From, r.To, r.Direction, len(r.Online), res.Offline)
	r.report.Report(Event{Time: time.Now(), Type: "run", Run: r.ID, Message: fmt.Sprintf("run %d: %s %s %s -> %s on %s (master %s, offline: %s)",
		r.ID, r.Direction, cfg.App, r.From, r.To, plural(len(r.Online), "node"), r.Inventory.Master, listOrNone(res.Offline))})

	rn := &Runner{Stages: Stages(), Confirm: opts.Confirm}
	err = rn.Execute(ctx, r)
	res.Backup = r.Backup
	res.Duration = time.Since(start)
	return res, err
}

// prepare does everything before the first stage of `upgrade --to`: checks the input, that
// this is the master, takes the lock, connects and reads the live version. Nothing is written
// but the lock file. A pending run to the same target is resumed instead (pending is set).
func prepare(ctx context.Context, cfg *Config, opts Options) (r *Run, cleanup func(), pending bool, err error) {
	force, err := checkTarget(opts.To, opts.Force)
	if err != nil {
		return nil, nil, false, err
	}
	if r, cleanup, err = setup(ctx, cfg, opts.Reporter, opts.Hostname, true); err != nil {
		return nil, nil, false, err
	}
	r.To, r.Force = opts.To, force
	if in, err := journal.ReadIntent(IntentPath(cfg)); err == nil {
		cleanup()
		if in.To == opts.To && !opts.DryRun {
			return nil, nil, true, nil
		}
		return nil, nil, false, fmt.Errorf("run %d (%s -> %s) is pending: continue it with 'cutover upgrade --resume' or undo it with 'cutover upgrade --abort' before switching to %s", in.RunID, in.From, in.To, opts.To)
	} else if !journal.NoIntent(err) {
		cleanup()
		return nil, nil, false, err
	}
	if r.From, err = liveVersion(ctx, r); err != nil {
		cleanup()
		return nil, nil, false, err
	}
	if r.Direction, err = direction(r.From, r.To); err != nil {
		cleanup()
		return nil, nil, false, badInput(err)
	}
	return r, cleanup, false, nil
}

// checkTarget validates the target version and the names of the checks to force, as
// `upgrade --to` and `plan --to` take them, and returns the forced checks as a set.
func checkTarget(to string, forced []string) (map[string]bool, error) {
	if err := layout.ValidVersion(to); err != nil {
		return nil, badInput(fmt.Errorf("--to: %w", err))
	}
	force := map[string]bool{}
	for _, f := range forced {
		if !slices.Contains(Forceable, f) {
			return nil, badInput(fmt.Errorf("--force=%q: not a check that can be forced (known: %s)", f, strings.Join(Forceable, ", ")))
		}
		force[f] = true
	}
	return force, nil
}

// setup does what every run needs first: the master check by host name (unless a resume
// checks by majority instead), the node list, the layout, the run lock and the connections.
func setup(ctx context.Context, cfg *Config, rep Reporter, hostname string, hostCheck bool) (*Run, func(), error) {
	inv, lay, err := describeCluster(ctx, cfg, hostname, hostCheck)
	if err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(cfg.Paths.StateDir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("state directory: %w", err)
	}
	host, _ := os.Hostname()
	lock, err := journal.AcquireLock(LockPath(cfg), journal.Holder{Host: host, PID: os.Getpid(), Started: time.Now().UTC(), Command: strings.Join(os.Args, " ")})
	if err != nil {
		return nil, nil, err
	}
	r, closePool, err := connect(cfg, inv, lay, rep)
	if err != nil {
		lock.Release()
		return nil, nil, err
	}
	cleanup := func() {
		closePool()
		lock.Release()
	}
	return r, cleanup, nil
}

// look is setup for the commands that only look (plan, status): the master check, the node
// list, the layout and the connections, without the state directory and without the lock.
// It writes nothing.
func look(ctx context.Context, cfg *Config, rep Reporter, hostname string) (*Run, func(), error) {
	inv, lay, err := describeCluster(ctx, cfg, hostname, true)
	if err != nil {
		return nil, nil, err
	}
	return connect(cfg, inv, lay, rep)
}

// describeCluster checks that this host is the master (with hostCheck) and loads the node
// list and the layout.
func describeCluster(ctx context.Context, cfg *Config, hostname string, hostCheck bool) (*nodes.Inventory, *layout.Layout, error) {
	if hostCheck {
		if err := CheckMaster(cfg, hostname); err != nil {
			return nil, nil, err
		}
	}
	inv, err := Inventory(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	lay, err := Layout(cfg)
	if err != nil {
		return nil, nil, badInput(err)
	}
	return inv, lay, nil
}

// connect makes the Run of a cluster with a pool of connections to its nodes; the function
// it returns closes them.
func connect(cfg *Config, inv *nodes.Inventory, lay *layout.Layout, rep Reporter) (*Run, func(), error) {
	pool, err := nodes.NewPool(inv, SSHOptions(cfg))
	if err != nil {
		return nil, nil, badInput(fmt.Errorf("ssh: %w", err))
	}
	if rep == nil {
		rep = discard{}
	}
	r := &Run{
		Config: cfg, Layout: lay, Inventory: inv, Force: map[string]bool{},
		Online: inv.Online(), Offline: inv.Offline(),
		dial: poolDialer{pool}, report: rep,
	}
	return r, func() { pool.Close() }, nil
}

// liveVersion reads the version the cluster runs from the master: its links and, when the
// version directories only name the minor, its application config.
func liveVersion(ctx context.Context, r *Run) (string, error) {
	c, err := r.dial.Conn(ctx, r.Inventory.Master)
	if err != nil {
		return "", err
	}
	dir, err := r.Layout.Live(ctx, c)
	if err != nil {
		return "", fmt.Errorf("%s: %w", r.Inventory.Master, err)
	}
	if r.Config.VersionDirs == "full" {
		return dir, nil
	}
	v, err := cfgupgrade.ReadVersion(r.configSpec())
	if err != nil {
		return "", fmt.Errorf("%s: live version: %w", r.Inventory.Master, err)
	}
	if minorOf(v) != dir {
		return "", fmt.Errorf("%s: the links point at %s but the application config is at %s", r.Inventory.Master, dir, v)
	}
	return v, nil
}

// CheckMaster refuses unless hostname (or this host's name when empty), short or full, is
// the cluster's master.
func CheckMaster(cfg *Config, hostname string) error {
	if hostname == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("host name: %w", err)
		}
		hostname = h
	}
	short := func(s string) string { return strings.SplitN(s, ".", 2)[0] }
	if hostname == cfg.Cluster.Master || short(hostname) == short(cfg.Cluster.Master) {
		return nil
	}
	return notMaster(fmt.Errorf("this host is %s, not the cluster's master %s: run cutover on %s", hostname, cfg.Cluster.Master, cfg.Cluster.Master))
}

// Inventory loads the cluster's node list.
func Inventory(ctx context.Context, cfg *Config) (*nodes.Inventory, error) {
	var static []nodes.Node
	for _, n := range cfg.Cluster.Nodes {
		static = append(static, nodes.Node{Name: n.Name, Address: n.Address, Port: n.Port, Offline: n.Offline})
	}
	inv, err := nodes.LoadInventory(ctx, cfg.Cluster.Master, static, cfg.Cluster.NodesCommand)
	if err != nil {
		if cfg.Cluster.NodesCommand == "" {
			err = badInput(err)
		}
		return nil, fmt.Errorf("node list: %w", err)
	}
	return inv, nil
}

// Layout names the application's side-by-side trees as cfg describes them.
func Layout(cfg *Config) (*layout.Layout, error) {
	return layout.New(cfg.App, layout.Paths{
		LibDir: cfg.Paths.LibDir, DataDir: cfg.Paths.DataDir,
		SysconfDir: cfg.Paths.SysconfDir, LocalstateDir: cfg.Paths.LocalstateDir,
	}, cfg.VersionDirs, "")
}

// SSHOptions is how cfg says to reach the nodes.
func SSHOptions(cfg *Config) nodes.SSHConfig {
	return nodes.SSHConfig{
		User:           cfg.SSH.User,
		IdentityFiles:  cfg.SSH.IdentityFiles,
		AgentSocket:    os.Getenv("SSH_AUTH_SOCK"),
		KnownHosts:     cfg.SSH.KnownHosts,
		ConnectTimeout: cfg.SSH.ConnectTimeout.Duration,
		CommandTimeout: cfg.SSH.CommandTimeout.Duration,
	}
}

// JournalPath is where a cluster's journal lives.
func JournalPath(c *Config) string { return filepath.Join(c.Paths.StateDir, "journal.db") }

// LockPath is the run lock of a cluster.
func LockPath(c *Config) string { return filepath.Join(c.Paths.StateDir, "lock") }

// poolDialer hands out the pool's connections as the stages' Conn.
type poolDialer struct{ p *nodes.Pool }

func (d poolDialer) Conn(ctx context.Context, node string) (Conn, error) {
	c, err := d.p.Conn(ctx, node)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// closeOrphans ends the journal's runs that are still marked running although no intent names
// them (the caller holds the lock and found no intent): an upgrade killed before it wrote its
// intent, which changed nothing, or an interrupted sync, which is finished by running it again.
func closeOrphans(ctx context.Context, store *journal.Store, r *Run) {
	runs, err := store.Runs(ctx)
	if err != nil {
		return
	}
	for _, old := range runs {
		if old.Outcome != journal.Running {
			continue
		}
		if err := store.Finish(ctx, old.ID, journal.Aborted, time.Now()); err != nil {
			continue
		}
		if old.Kind == "sync" {
			r.Warn("sync run %d was interrupted; it is marked aborted in the journal: run the same sync again to finish it", old.ID)
		} else {
			r.Warn("run %d was interrupted before it changed anything; it is marked aborted in the journal", old.ID)
		}
	}
}
