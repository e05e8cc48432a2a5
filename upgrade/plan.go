package upgrade

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/config"
)

// PlanOptions are what the operator asked of `cutover plan`: the same target and forced
// checks as `cutover upgrade --to`.
type PlanOptions struct {
	// To is the version the cluster would move to.
	To string
	// Force names the skippable checks to override, such as "unhealthy".
	Force []string
	// Hostname is the local host's name; "" asks the system.
	Hostname string
}

// PlanReport is everything `cutover upgrade --to` would check and do: every check on every
// node with its outcome, and the stages with the nodes each works on.
type PlanReport struct {
	App       string
	From, To  string // From is "" when the live version could not be read
	Direction Direction
	Master    string
	// Nodes are the online nodes a run would work on; Offline the ones it would skip.
	Nodes, Offline []string
	Checks         []Check
	// Migrations are the config's migration steps, one per minor hop; nil when a command
	// migrates the config (config.migrate = "exec") or the live version is unknown.
	Migrations []MigrationStep
	// Stages is the stage machine for this run; empty when there is nothing to do.
	Stages []PlannedStage
	// Nothing is true when the cluster already runs To: upgrade would do nothing.
	Nothing bool
	// Proceed is true when no check refuses the run.
	Proceed bool
	// Refusals lists every refusal, each naming its node when it has one.
	Refusals []string
}

// Check is the outcome of one check: passed (OK), passed with a warning (OK and Warning), or
// refused (not OK). Message says what was found or why it refuses.
type Check struct {
	Name    string
	Node    string // "" for a check of the cluster as a whole
	OK      bool
	Warning bool
	Message string
	// NotInstalled is true for a refusal because the target version is not installed on the
	// node: one that staging the version (cutover stage) answers.
	NotInstalled bool
}

// PlannedStage is one stage of a planned run.
type PlannedStage struct {
	Index int    // 1-based position in the stage machine
	Name  string // as the journal and the output name it
	// Where is "master", "all" (every online node), "others" (every online node but the
	// master), or in a rolling run "canary" (one canary alone) or "batch" (one batch's nodes).
	Where string
	Nodes []string
	// Skipped is true when the stage has nothing to do in this run (config-downgrade in an
	// upgrade, drain without a queue_drain command).
	Skipped bool
	// PONR is true for the stage that is the run's point of no return.
	PONR bool
}

// Plan runs every check `cutover upgrade --to` would run, on every node, and lists the stages
// it would execute, changing nothing: no lock is taken, no state directory, journal, intent or
// log is written. Unlike a run, it does not stop at the first refusal: preflight's checks, the
// health gate and verify-installed's per-node checks all run, and every refusal is listed.
//
// An error means the plan could not be made: bad input (IsBadInput), not on the master
// (IsNotMaster), a node list that cannot be loaded. A refused run is not an error: the report
// says so (Proceed is false).
func Plan(ctx context.Context, cfg *config.Config, opts PlanOptions) (*PlanReport, error) {
	to, force, err := checkTarget(opts.To, opts.Force)
	if err != nil {
		return nil, err
	}
	s, err := openSession(ctx, cfg, modeLook, sessionOptions{Hostname: opts.Hostname, HostCheck: true})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	r := s.r
	r.To, r.Force = opts.To, force
	r.watch = planWatch(cfg.Policy, nil)
	p := &PlanReport{App: cfg.App, To: opts.To, Master: r.Inventory.Master, Nodes: names(r.Online), Offline: names(r.Offline)}
	master := r.Inventory.Master

	p.add(lockCheck(cfg))
	p.add(pendingCheck(cfg, opts.To))
	// While a run is pending the cluster may be mixed on purpose (a rolling run, or a run
	// stopped past its point of no return): its version is the pending run's source, and a
	// node at the pending run's target is part of that run, not a node to sync back.
	if in, err := journal.ReadIntent(IntentPath(cfg)); err == nil {
		r.planPending = &in
		r.Resumed = in.To == opts.To
	}
	live := checkResult{name: "live-version", node: master}
	from, err := liveVersion(ctx, r)
	if r.planPending != nil {
		from, err = r.planPending.From, nil
	}
	if err != nil {
		live.err = err
	} else if r.Target, err = targetTo(r.Layout, from, to); err != nil {
		live.err = err
		r.From = from
	} else {
		live.note = fmt.Sprintf("%s runs %s", cfg.App, r.From)
	}
	p.add(live)
	p.From, p.Direction = r.From, r.Direction
	if r.From != "" && r.From == r.To {
		p.Nothing = true
		p.add(checkResult{name: "target", note: fmt.Sprintf("the cluster already runs %s: upgrade would do nothing", r.To)})
		p.finish()
		return p, nil
	}

	if r.From != "" && live.err == nil {
		for _, c := range masterChecks(r) {
			p.add(c)
		}
		steps, checks := planMigrations(r)
		p.Migrations = steps
		for _, c := range checks {
			p.add(c)
		}
	}
	for _, c := range offlineChecks(r) {
		p.add(c)
	}
	for _, c := range clockChecks(ctx, r) {
		p.add(c)
	}
	if c, ok := healthGate(ctx, r); ok {
		p.add(c)
	}
	for _, c := range installedChecks(ctx, r) {
		p.add(c)
	}
	if err := r.planRolling(); err != nil {
		p.add(checkResult{name: "strategy", err: err})
	} else if r.Batches != nil {
		p.add(checkResult{name: "strategy", note: fmt.Sprintf("rolling: %s", batchSummary(r.Batches))})
	}
	p.Stages = plannedStages(r)
	p.finish()
	return p, nil
}

// add appends the outcome of one check.
func (p *PlanReport) add(c checkResult) {
	ch := Check{Name: c.name, Node: c.node, OK: c.err == nil, Message: c.note}
	switch {
	case c.err != nil:
		ch.Message = strings.TrimPrefix(c.err.Error(), c.node+": ")
		ch.NotInstalled = layout.IsNotInstalled(c.err)
	case c.warn != "":
		ch.Warning, ch.Message = true, c.warn
	}
	p.Checks = append(p.Checks, ch)
}

// finish lists the refusals and decides whether the run would proceed.
func (p *PlanReport) finish() {
	p.Refusals = nil
	for _, c := range p.Checks {
		if c.OK {
			continue
		}
		if c.Node != "" {
			p.Refusals = append(p.Refusals, c.Node+": "+c.Message)
		} else {
			p.Refusals = append(p.Refusals, c.Message)
		}
	}
	p.Proceed = len(p.Refusals) == 0
}

// lockCheck looks at the run lock without taking it: a run would be refused while another
// holds it.
func lockCheck(cfg *config.Config) checkResult {
	c := checkResult{name: "lock", note: "no other run holds the lock"}
	h, held, err := journal.ReadHolder(LockPath(cfg))
	switch {
	case err != nil:
		c.err = err
	case held && h.PID != 0:
		c.err = fmt.Errorf("another cutover run holds the lock: pid %d on %s since %s", h.PID, h.Host, h.Started.UTC().Format(time.RFC3339))
	case held:
		c.err = fmt.Errorf("another cutover run holds the lock %s", LockPath(cfg))
	}
	return c
}

// pendingCheck refuses while a run is pending: upgrade would resume it (same target) or
// refuse to start another one.
func pendingCheck(cfg *config.Config, to string) checkResult {
	c := checkResult{name: "pending", note: "no run is pending"}
	in, err := journal.ReadIntent(IntentPath(cfg))
	switch {
	case journal.NoIntent(err):
	case err != nil:
		c.err = err
	case in.To == to:
		c.err = fmt.Errorf("run %d (%s -> %s) is pending: 'cutover upgrade --to=%s' would resume it rather than start a new run; %s", in.RunID, in.From, in.To, to, waysOut(cfg, in))
	default:
		c.err = fmt.Errorf("run %d (%s -> %s) is pending: %s before switching to %s", in.RunID, in.From, in.To, waysOut(cfg, in), to)
	}
	return c
}

// installedChecks are verify-installed's checks on every online node, one result per node.
// A plan lists them whether or not its target holds, so they read the versions as the plan
// has them: --to, and the live version when it was read.
func installedChecks(ctx context.Context, r *Run) []checkResult {
	to, err := layout.ParseVersion(r.To)
	if err != nil {
		return []checkResult{{name: "verify-installed", err: err}}
	}
	fromDir := ""
	if r.From != "" {
		from, err := layout.ParseVersion(r.From)
		if err != nil {
			return []checkResult{{name: "verify-installed", err: err}}
		}
		fromDir = r.Layout.DirOf(from)
	}
	toDir := r.Layout.DirOf(to)
	outcomes, _ := nodes.Each(ctx, r.Online, r.Config.SSH.Parallel, "", func(ctx context.Context, n nodes.Node) error {
		c, err := r.Conn(ctx, n.Name)
		if err != nil {
			return err
		}
		return checkNode(ctx, r, c, n, fromDir, toDir)
	})
	out := make([]checkResult, len(outcomes))
	for i, o := range outcomes {
		out[i] = checkResult{name: "verify-installed", node: o.Node, err: o.Err}
		if o.Err == nil {
			out[i].note = fmt.Sprintf("%s installed", r.To)
			if fromDir != "" {
				out[i].note += ", links at " + fromDir
			}
		}
	}
	return out
}

// StagePlan lists the stages a run of r executes, with where each works, the nodes, the
// skipped stages and the point of no return: what `cutover plan` shows, for a confirmation
// prompt to show too.
func (r *Run) StagePlan() []PlannedStage { return plannedStages(r) }

// plannedStages lists the stage machine as it would run for r.
func plannedStages(r *Run) []PlannedStage {
	var out []PlannedStage
	for i, st := range r.stages() {
		ps := PlannedStage{Index: i + 1, Name: st.Name(), Where: string(st.Where())}
		switch st.Where() {
		case OnCanary, OnBatch:
			ps.Nodes = st.(stageNodes).StageNodes()
		case OnMaster:
			ps.Nodes = []string{r.Inventory.Master}
		case OnAll:
			ps.Nodes = names(r.Online)
		case OnOthers:
			ps.Nodes = names(r.Others())
		}
		if s, ok := st.(skipper); ok && s.Skip(r) {
			ps.Skipped, ps.Nodes = true, nil
		}
		if p, ok := st.(ponrStage); ok && p.PONR(r.Direction) {
			ps.PONR = true
		}
		out = append(out, ps)
	}
	return out
}
