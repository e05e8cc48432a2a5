package upgrade

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/config"
)

// Batch is one step of a rolling run: nodes switched together while the others serve.
type Batch struct {
	// Nodes are switched in parallel.
	Nodes []string
	// Canary is true for a batch of one canary: any failure in it rolls the run back.
	Canary bool
}

// factBatches is the fact under which a rolling run keeps its batches, so that every
// execution of the run works on the same batches even if the config or the node list changed.
const factBatches = "rolling-batches"

// factFailedPrefix prefixes the fact naming a node that failed in a batch (the value is the
// batch): the failure budget counts them over every execution of the run.
const factFailedPrefix = "rolling-failed-"

// factToleratedPrefix prefixes the fact that a batch ended within the failure budget (the value
// lists its failed nodes): a later execution of the run never runs that batch again.
const factToleratedPrefix = "rolling-tolerated-"

// PlanBatches splits the online nodes of inv into the batches of a rolling run: every canary
// alone, in the configured order, then the other online nodes in batches of batch_size, in the
// inventory's order with the master last (or first with order = ["master-first"]). A canary
// that is not an online node of the cluster is refused.
func PlanBatches(s config.StrategyConfig, inv *nodes.Inventory) ([]Batch, error) {
	online := inv.Online()
	isOnline := func(name string) bool {
		return slices.ContainsFunc(online, func(n nodes.Node) bool { return n.Name == name })
	}
	var out []Batch
	canary := map[string]bool{}
	for _, c := range s.Canaries {
		if _, ok := inv.Lookup(c); !ok {
			return nil, fmt.Errorf("strategy.canaries: %s is not a node of the cluster", c)
		}
		if !isOnline(c) {
			return nil, fmt.Errorf("strategy.canaries: %s is offline; a canary must be switched first", c)
		}
		canary[c] = true
		out = append(out, Batch{Nodes: []string{c}, Canary: true})
	}
	var rest []string
	for _, n := range online {
		if !canary[n.Name] && n.Name != inv.Master {
			rest = append(rest, n.Name)
		}
	}
	if !canary[inv.Master] {
		if s.MasterFirst() {
			rest = append([]string{inv.Master}, rest...)
		} else {
			rest = append(rest, inv.Master)
		}
	}
	size := max(s.BatchSize, 1)
	for len(rest) > 0 {
		n := min(size, len(rest))
		out = append(out, Batch{Nodes: rest[:n:n]})
		rest = rest[n:]
	}
	return out, nil
}

// encodeBatches writes batches as the journal keeps them: "c:node2;node1,node3".
func encodeBatches(batches []Batch) string {
	var parts []string
	for _, b := range batches {
		p := strings.Join(b.Nodes, ",")
		if b.Canary {
			p = "c:" + p
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ";")
}

// decodeBatches reads what encodeBatches wrote.
func decodeBatches(s string) ([]Batch, error) {
	var out []Batch
	for _, p := range strings.Split(s, ";") {
		b := Batch{}
		if rest, ok := strings.CutPrefix(p, "c:"); ok {
			b.Canary, p = true, rest
		}
		if p == "" {
			return nil, fmt.Errorf("journal: rolling batches %q: an empty batch", s)
		}
		b.Nodes = strings.Split(p, ",")
		out = append(out, b)
	}
	return out, nil
}

// RollingStages returns the stage machine of a rolling run (docs/design.md §11): the checks and the
// intent, the backup, a downgrade's config downgrade, one stage per batch, then an upgrade's
// config upgrade (its point of no return) once every batch is switched, and the end of the
// run. The canaries are always reversible: a downgrade crosses its point of no return with
// the first batch after them, so a failed canary switches back and migrates the config up
// again. Until the point of no return every batch can be switched back, in reverse.
func RollingStages(batches []Batch) []Stage {
	stages := []Stage{
		preflight{},                    // master: versions, policy (rolling_from), config, health gate, disk space
		verifyInstalled{},              // all: both trees of the target installed, live version as expected
		intent{},                       // master: the intent file (undo: remove it)
		backup{},                       // master: archive the state before anything changes
		configDowngrade{rolling: true}, // master: the newer version's down migrations (undo: up again)
	}
	ponr := false
	for i, b := range batches {
		first := !b.Canary && !ponr
		ponr = ponr || first
		stages = append(stages, batch{n: i + 1, of: len(batches), canary: b.Canary, nodes: b.Nodes, ponrDown: first})
	}
	return append(stages,
		configUpgrade{}, // master: the new version's up migrations (PONR of an upgrade)
		redistConf{},    // master: the application's redist-conf command
		postUpgrade{},   // master: the new version's post-upgrade hook
		finish{},        // master: verify, then remove the intent last
	)
}

// stageNodes is a stage that works on nodes of its own: a rolling run's batch.
type stageNodes interface {
	StageNodes() []string
}

// batchSummary says in a few words how a rolling run goes: "3 batches: canary node2, then
// node3+node4, then node1".
func batchSummary(batches []Batch) string {
	var parts []string
	for _, b := range batches {
		p := strings.Join(b.Nodes, "+")
		if b.Canary {
			p = "canary " + p
		}
		parts = append(parts, p)
	}
	what := fmt.Sprintf("%d batches", len(batches))
	if len(batches) == 1 {
		what = "1 batch"
	}
	return what + ": " + strings.Join(parts, ", then ")
}

// stages is the stage list of r: the rolling one when the run goes batch by batch.
func (r *Run) stages() []Stage {
	if r.list != nil {
		return r.list
	}
	list := Stages()
	if r.Batches != nil {
		list = RollingStages(r.Batches)
	}
	return r.watch.watched(list)
}

// planRolling decides the batches of a new rolling run, or none for an all-at-once one.
func (r *Run) planRolling() error {
	if !r.Config.Strategy.IsRolling() {
		return nil
	}
	b, err := PlanBatches(r.Config.Strategy, r.Inventory)
	if err != nil {
		return badInput(err)
	}
	r.Batches = b
	return nil
}

// loadBatches takes the batches of a pending run from its journal: a run that has none is an
// all-at-once run, whatever the config says now.
func (r *Run) loadBatches() error {
	v, ok := r.Fact(factBatches)
	if !ok {
		return nil
	}
	b, err := decodeBatches(v)
	if err != nil {
		return err
	}
	r.Batches = b
	return nil
}

// firstNotDone is where a rolling run resumes: the first stage after the intent that no
// execution completed. Batches after it that are done are skipped (batch is once-only).
func firstNotDone(stages []Stage, r *Run) int {
	after := false
	for i, st := range stages {
		if _, ok := st.(releaser); ok {
			after = true
			continue
		}
		if after && !r.history.doneBefore(st.Name()) {
			return i
		}
	}
	return len(stages)
}

// rollingCheck is preflight's check that the versions of a rolling run may run side by side:
// the newer one's upgrade-policy.json must say so (rolling_from). target is the target's
// policy, already read.
func rollingCheck(r *Run, target *TargetPolicy) checkResult {
	c := checkResult{name: "rolling"}
	newer := target
	if r.Direction == Down {
		p, err := loadPolicy(r, r.FromVersion)
		if err != nil {
			c.err = err
			return c
		}
		newer = p
	}
	if c.err = CheckRolling(r.FromVersion, r.ToVersion, r.Direction, newer); c.err == nil {
		// A declaration of the newer version, which cutover cannot verify: said as one.
		older, newest := r.From, r.To
		if r.Direction == Down {
			older, newest = r.To, r.From
		}
		if r.Direction == Same || newer == nil {
			c.note = fmt.Sprintf("%s and %s are of one minor version", r.From, r.To)
		} else {
			c.note = fmt.Sprintf("%s declares rolling_from %q (upgrade-policy.json), which includes %s", newest, newer.RollingFrom, older)
		}
	}
	return c
}

// batchStatuses are the batches of a rolling run as its journal holds them, each with the
// last state it reached; nil for an all-at-once run.
func batchStatuses(jr journal.Run) []BatchStatus {
	v, ok := jr.Facts[factBatches]
	if !ok {
		return nil
	}
	batches, err := decodeBatches(v)
	if err != nil {
		return nil
	}
	last := map[string]string{}
	for _, e := range jr.Events {
		last[e.Stage] = string(e.State)
	}
	out := make([]BatchStatus, len(batches))
	for i, b := range batches {
		name := batch{n: i + 1}.Name()
		out[i] = BatchStatus{Stage: name, Nodes: b.Nodes, Canary: b.Canary, State: last[name]}
	}
	return out
}
