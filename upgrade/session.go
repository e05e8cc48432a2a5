package upgrade

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/config"
)

// mode is what a session may do.
type mode int

const (
	// modeLook only reads: no state directory, no lock, nothing written (plan, status).
	modeLook mode = iota
	// modeExclusive holds the run lock and reads the intent under it (upgrade --to, sync,
	// backup restore, cfgupgrade).
	modeExclusive
	// modePending holds the run lock and loads the pending run the intent names, checked
	// against its journal and the configuration in use (upgrade --resume, --abort).
	modePending
)

// sessionOptions are what every command passes to openSession.
type sessionOptions struct {
	Reporter Reporter
	// Hostname is the local host's name; "" asks the system.
	Hostname string
	// HostCheck refuses unless this host is the configured master; a resume checks by the
	// nodes' majority instead.
	HostCheck bool
}

// session is everything a command works with: the run, the run lock, the connections and,
// once read under the lock, the pending run.
type session struct {
	r      *Run
	lock   *journal.Lock
	intent *journal.Intent // the pending run's intent; nil when none is pending
	jr     journal.Run     // the pending run as the journal holds it (modePending)
	close  []func()
}

// openSession is the one way a command starts: the master check, the node list, the layout,
// then by mode the run lock and the pending run, and the connections. The intent is only
// ever read under the lock, so a run that ends meanwhile is never taken for pending. In
// modePending without a pending run, s.intent is nil and nothing else is loaded.
func openSession(ctx context.Context, cfg *config.Config, m mode, o sessionOptions) (*session, error) {
	if o.HostCheck {
		if err := CheckMaster(cfg, o.Hostname); err != nil {
			return nil, err
		}
	}
	if m != modeLook {
		// Losing the operator's session never stops a command that may write.
		signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	}
	inv, err := Inventory(ctx, cfg)
	if err != nil {
		return nil, err
	}
	lay, err := Layout(cfg)
	if err != nil {
		return nil, badInput(err)
	}
	s := &session{}
	opened := false
	defer func() {
		if !opened {
			s.Close()
		}
	}()
	if m != modeLook {
		if err := journal.MkdirAllDurable(cfg.Paths.StateDir, 0o700); err != nil {
			return nil, fmt.Errorf("state directory: %w", err)
		}
		host, _ := os.Hostname()
		s.lock, err = journal.AcquireLock(LockPath(cfg), journal.Holder{Host: host, PID: os.Getpid(), Started: time.Now().UTC(), Command: strings.Join(os.Args, " ")})
		if err != nil {
			return nil, err
		}
		s.close = append(s.close, func() { _ = s.lock.Release() })
		in, err := journal.ReadIntent(IntentPath(cfg))
		switch {
		case journal.NoIntent(err):
		case err != nil:
			return nil, pastPONR(fmt.Errorf("%w; a run may be pending: see the guide's 'When the intent or the journal is damaged'", err))
		default:
			s.intent = &in
		}
	}
	pool, err := nodes.NewPool(inv, SSHOptions(cfg))
	if err != nil {
		return nil, badInput(fmt.Errorf("ssh: %w", err))
	}
	s.close = append(s.close, func() { pool.Close() })
	rep := o.Reporter
	if rep == nil {
		rep = discard{}
	}
	s.r = &Run{
		Config: cfg, Layout: lay, Inventory: inv, Force: map[string]bool{},
		Online: inv.Online(), Offline: inv.Offline(),
		dial: poolDialer{pool}, report: rep,
	}
	// The run's log, once a run opens one, is closed with the session.
	s.close = append(s.close, func() { s.r.log.Close() })
	if m == modePending && s.intent != nil {
		if err := s.loadPending(ctx); err != nil {
			return nil, err
		}
	}
	opened = true
	return s, nil
}

// Close releases what the session holds, the lock last.
func (s *session) Close() {
	for i := len(s.close) - 1; i >= 0; i-- {
		s.close[i]()
	}
	s.close = nil
}

// refusePending is the error of a command that may not run while a run is pending, or nil.
func (s *session) refusePending(what string) error {
	if s.intent == nil {
		return nil
	}
	return fmt.Errorf("%s is pending: %s before %s", pendingName(*s.intent), waysOut(s.r.Config, *s.intent), what)
}

// waysOut names the commands that end the pending run of intent in: resume, and abort only
// while the journal says the run is before its point of no return (past it, abort is refused);
// a node that stays gone is declared so with --skip-node.
func waysOut(cfg *config.Config, in journal.Intent) string {
	jr, err := journal.NewStore(JournalPath(cfg)).Run(context.Background(), in.RunID)
	if err == nil && jr.PastPONR {
		return "it is past its point of no return, so finish it with 'cutover upgrade --resume' (with --skip-node=NODE for a node that stays gone)"
	}
	return "finish it with 'cutover upgrade --resume' or undo it with 'cutover upgrade --abort'"
}

// pendingName names the run an intent is of, for messages: "run 7 (1.0.0 -> 1.1.0)", or
// "restore run 7 (... -> 1.0.0)".
func pendingName(in journal.Intent) string {
	return fmt.Sprintf("%s (%s -> %s)", kindOf(in.Kind).runName(in.RunID), in.From, in.To)
}

// upgradeTarget is the target of a pending upgrade: versions the layout accepts, in the
// direction the intent records.
func upgradeTarget(lay *layout.Layout, in journal.Intent) (Target, error) {
	t, err := newTarget(lay, in.From, in.To)
	if err == nil && t.Direction != Direction(in.Direction) {
		err = fmt.Errorf("the versions make a %s, not a %s", t.Direction, in.Direction)
	}
	return t, err
}

// restoreTarget is the target of a pending restore: from whatever the master ran to the
// archive's version.
func restoreTarget(_ *layout.Layout, in journal.Intent) (Target, error) {
	return Target{From: in.From, To: in.To}, nil
}

// loadPending loads the run the intent names: the intent must belong to the configuration in
// use and agree with its journal record, which must be readable. The run's facts, the stages
// its executions started and whether it crossed its point of no return come from the journal.
func (s *session) loadPending(ctx context.Context) error {
	r, in, cfg := s.r, s.intent, s.r.Config
	path := IntentPath(cfg)
	if (in.App != "" && in.App != cfg.App) || (in.StateDir != "" && in.StateDir != cfg.Paths.StateDir) || (in.Config != "" && cfg.File != "" && in.Config != cfg.File) {
		return badInput(fmt.Errorf("the intent %s is of application %q (config %s, state dir %s), but %s configures %q (state dir %s): run cutover with the configuration of the pending run; nothing was touched",
			path, in.App, in.Config, in.StateDir, cfgFile(cfg), cfg.App, cfg.Paths.StateDir))
	}
	store := journal.NewStore(JournalPath(cfg))
	jr, err := store.Run(ctx, in.RunID)
	if err != nil {
		return pastPONR(fmt.Errorf("the intent %s names run %d, but the journal %s cannot say where it stopped: %w; the run stays pending: see the guide's 'When the intent or the journal is damaged'", path, in.RunID, JournalPath(cfg), err))
	}
	kind := kindOf(jr.Kind)
	if kindOf(in.Kind) != kind || jr.From != in.From || jr.To != in.To || jr.Direction != in.Direction {
		return badInput(fmt.Errorf("the intent %s (run %d, %s %s %s -> %s) disagrees with the journal %s (%s %s %s -> %s); nothing was touched: see the guide's 'When the intent or the journal is damaged'",
			path, in.RunID, kindOf(in.Kind), in.Direction, in.From, in.To, JournalPath(cfg), jr.Kind, jr.Direction, jr.From, jr.To))
	}
	pk := kind.traits().pending
	if pk == nil {
		return badInput(fmt.Errorf("the intent %s names run %d of kind %q, which never leaves an intent; nothing was touched: see the guide's 'When the intent or the journal is damaged'", path, in.RunID, jr.Kind))
	}
	t, err := pk.target(r.Layout, *in)
	if err != nil {
		return badInput(fmt.Errorf("the intent %s names versions %q -> %q (%s) that are not a valid run: %v; nothing was touched", path, in.From, in.To, in.Direction, err))
	}
	if r.log, err = openRunLog(cfg.Paths.StateDir, jr.ID); err != nil {
		return err
	}
	r.ID, r.Kind, r.journal, r.Target, r.Resumed = jr.ID, kind, crashJournal{store}, t, true
	if err := r.tagCommands(); err != nil {
		return err
	}
	r.loadJournal(jr)
	if err := r.loadBatches(); err != nil {
		return pastPONR(fmt.Errorf("run %d: %w; the run stays pending", jr.ID, err))
	}
	if err := r.loadWatch(); err != nil {
		return pastPONR(fmt.Errorf("run %d: %w; the run stays pending", jr.ID, err))
	}
	// The run works on the nodes it started with: a node it skipped (offline then, or
	// declared gone since) stays out of it even if the node list now calls it online.
	r.setOffline(jr.Offline)
	s.jr = jr
	return nil
}

// skipNodes declares the named nodes gone for the pending run (`--skip-node`): they leave the
// run's online nodes and join its offline ones in the journal, so that the run can be
// finished or aborted without them; `cutover sync` catches them up later. Each must be a node
// of the cluster other than the master.
func (s *session) skipNodes(ctx context.Context, names []string) error {
	if len(names) == 0 {
		return nil
	}
	r := s.r
	offline := append([]string(nil), s.jr.Offline...)
	for _, name := range names {
		if _, ok := r.Inventory.Lookup(name); !ok {
			return badInput(fmt.Errorf("--skip-node %s: not a node of the cluster; nothing was touched", name))
		}
		if name == r.Inventory.Master {
			return badInput(fmt.Errorf("--skip-node %s: the master cannot be skipped; nothing was touched", name))
		}
		if !slices.Contains(offline, name) {
			offline = append(offline, name)
		}
	}
	if err := r.journal.SetOffline(ctx, r.ID, offline); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	for _, name := range names {
		if _, err := r.Learn(ctx, factSkippedPrefix+name, "--skip-node"); err != nil {
			return err
		}
	}
	s.jr.Offline = offline
	r.setOffline(offline)
	for _, name := range names {
		r.log.Printf("run %d: %s declared gone for this run (--skip-node)", r.ID, name)
		r.report.Report(Event{Time: time.Now(), Type: "warn", Run: r.ID,
			Message: fmt.Sprintf("%s is skipped for the rest of run %d: once it is back, run 'cutover sync %s'", name, r.ID, name)})
	}
	return nil
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
	v, err := configVersion(configSpec(r.Config))
	if err != nil {
		return "", fmt.Errorf("%s: live version: %w", r.Inventory.Master, err)
	}
	if v.MajorMinor() != dir {
		return "", fmt.Errorf("%s: the links point at %s but the application config is at %s", r.Inventory.Master, dir, v)
	}
	if cmd := r.Config.Commands.LiveVersion; cmd != "" {
		return liveRelease(ctx, c, r.Inventory.Master, cmd, dir)
	}
	return v.String(), nil
}

// liveRelease runs the live_version command on the master and checks that the release it
// prints lies in the live version directory dir.
func liveRelease(ctx context.Context, c Conn, master, command, dir string) (string, error) {
	res, err := c.RunShell(ctx, command)
	if err != nil {
		return "", fmt.Errorf("%s: live_version: %w", master, err)
	}
	out := strings.TrimSpace(string(res.Stdout))
	v, err := layout.ParseVersion(out)
	if err != nil || v.MajorMinor() != dir {
		return "", fmt.Errorf("%s: live_version printed %q, not a release of the live version %s", master, out, dir)
	}
	return v.String(), nil
}

// CheckMaster refuses unless hostname (or this host's name when empty), short or full, is
// the cluster's master.
func CheckMaster(cfg *config.Config, hostname string) error {
	if hostname == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("host name: %w", err)
		}
		hostname = h
	}
	if shortName(hostname) == shortName(cfg.Cluster.Master) {
		return nil
	}
	return notMaster(fmt.Errorf("this host is %s, not the cluster's master %s: run cutover on %s", hostname, cfg.Cluster.Master, cfg.Cluster.Master))
}

// Inventory loads the cluster's node list.
func Inventory(ctx context.Context, cfg *config.Config) (*nodes.Inventory, error) {
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
func Layout(cfg *config.Config) (*layout.Layout, error) {
	return layout.New(cfg.App, layout.Paths{
		LibDir: cfg.Paths.LibDir, DataDir: cfg.Paths.DataDir,
		SysconfDir: cfg.Paths.SysconfDir, LocalstateDir: cfg.Paths.LocalstateDir,
	}, cfg.VersionDirs, "")
}

// SSHOptions is how cfg says to reach the nodes.
func SSHOptions(cfg *config.Config) nodes.SSHConfig {
	return nodes.SSHConfig{
		User:             cfg.SSH.User,
		IdentityFiles:    cfg.SSH.IdentityFiles,
		AgentSocket:      os.Getenv("SSH_AUTH_SOCK"),
		KnownHosts:       cfg.SSH.KnownHosts,
		HostKeyAlias:     cfg.SSH.HostKeyAlias,
		KnownHostsOwners: cfg.SSH.KnownHostsOwnerIDs,
		ConnectTimeout:   cfg.SSH.ConnectTimeout.Duration,
		CommandTimeout:   cfg.SSH.CommandTimeout.Duration,
	}
}

// poolDialer hands out the pool's connections as the stages' Conn.
type poolDialer struct{ p *nodes.Pool }

// SetCommandTag records the commands of the pool under tag on every node; see
// nodes.Pool.SetCommandTag.
func (d poolDialer) SetCommandTag(tag string) error { return d.p.SetCommandTag(tag) }

// SetConnectionOwner names the master's state the pool's connections work for; see
// nodes.Pool.SetConnectionOwner.
func (d poolDialer) SetConnectionOwner(owner string) error { return d.p.SetConnectionOwner(owner) }

// connectionOwner is a Dialer whose connections end the node's older connections of the same
// owner when they start working, so that a request of a connection the run gave up never acts.
type connectionOwner interface {
	SetConnectionOwner(owner string) error
}

// commandTagger is a Dialer that can record the commands it runs under a run's tag, so that
// a later execution of the run kills what a dead one left running on a node.
type commandTagger interface {
	SetCommandTag(tag string) error
}

// tagCommands records every command the run starts from now on under "run-<id>-<state>",
// where <state> names the state directory (run ids count per journal, and one host may hold
// several): the first command of this execution on each node first kills what an earlier,
// dead execution of the same run left running there, so a resumed run never races a command
// of a dead one. The connections' owner is the state directory's <state>: a node's first
// reap of this execution also ends the connections to it that an earlier execution, or an
// earlier connection of this one, still holds open there (a run's and its rollback run's
// alike), whatever requests they carry.
func (r *Run) tagCommands() error {
	t, ok := r.dial.(commandTagger)
	if !ok || r.ID == 0 {
		return nil
	}
	state := sha256.Sum256([]byte(r.Config.Paths.StateDir))
	if err := t.SetCommandTag(fmt.Sprintf("run-%d-%x", r.ID, state[:6])); err != nil {
		return fmt.Errorf("command records: %w", err)
	}
	if o, ok := r.dial.(connectionOwner); ok {
		if err := o.SetConnectionOwner(fmt.Sprintf("%x", state[:6])); err != nil {
			return fmt.Errorf("command records: %w", err)
		}
	}
	return nil
}

func (d poolDialer) Conn(ctx context.Context, node string) (Conn, error) {
	c, err := d.p.Conn(ctx, node)
	if err != nil {
		return nil, err
	}
	return c, nil
}
