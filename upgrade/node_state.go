package upgrade

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/metrics"
)

// nodeState is what an execution of a run knows about each of its nodes: when their daemons
// last stopped and started, the boot each node was in at the stop, the version its links were
// last pointed at, which steps its daemons need failed, which nodes a rolling run left behind,
// and what the run saw of each node for the metrics. What outlives the execution (a node's
// first stop and start, its first boot, the nodes that failed or were declared gone) is in the
// run's facts; the methods that read those take the facts as an argument. The zero value is
// ready to use, and every method is safe for concurrent use by a fan-out's goroutines.
type nodeState struct {
	mu sync.Mutex
	// up is when each node's daemons last started in this execution.
	up map[string]time.Time
	// down is when this execution last stopped each node's daemons.
	down map[string]time.Time
	// boots is each node's boot identity when this execution last stopped its daemons.
	boots map[string]string
	// stopped is when this execution last stopped each node's daemons, where the node said
	// (its command shell reports when a command started): a daemon that started before it
	// survived the stop, and runs what it loaded before the switch.
	stopped map[string]startRef
	// unready says, per node, which steps its daemons need failed in this execution
	// (setReady): its daemons are not started.
	unready map[string]map[string]bool
	// switched is the version this execution last pointed each node's links at.
	switched map[string]string
	// behind are the nodes a rolling run left behind within its failure budget.
	behind map[string]bool
	// seen is what this execution saw of each node, for the metrics (metrics.go).
	seen map[string]metrics.Node
}

// stopping records that this execution stops node's daemons at t.
func (s *nodeState) stopping(node string, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down == nil {
		s.down = map[string]time.Time{}
	}
	s.down[node] = t
}

// started records that this execution started node's daemons at t.
func (s *nodeState) started(node string, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.up == nil {
		s.up = map[string]time.Time{}
	}
	s.up[node] = t
}

// stoppedBy records when, by the node's own clock, the command that stopped node's daemons
// started.
func (s *nodeState) stoppedBy(node string, ref startRef) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped == nil {
		s.stopped = map[string]startRef{}
	}
	s.stopped[node] = ref
}

// stopRef is when this execution last stopped node's daemons by the node's clock; the zero
// startRef when not known.
func (s *nodeState) stopRef(node string) startRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped[node]
}

// bootAtStop records the boot identity node had when its daemons were stopped.
func (s *nodeState) bootAtStop(node, boot string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.boots == nil {
		s.boots = map[string]string{}
	}
	s.boots[node] = boot
}

// rebooted reports whether node, now in boot, booted since its daemons were stopped in this
// execution.
func (s *nodeState) rebooted(node, boot string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	was := s.boots[node]
	return was != "" && boot != "" && was != boot
}

// switchedTo records that this execution pointed node's links at version, whose directory
// is dir ("" when not known), so that a reboot of the node before its daemons start has its
// switch redone.
func (s *nodeState) switchedTo(node, version, dir string) {
	s.mu.Lock()
	if s.switched == nil {
		s.switched = map[string]string{}
	}
	s.switched[node] = version
	s.mu.Unlock()
	if dir != "" {
		s.saw(node, dir, true)
	}
}

// switchedVersion is the version this execution last pointed node's links at, if any.
func (s *nodeState) switchedVersion(node string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.switched[node]
	return v, ok
}

// setReady records whether a step node's daemons need before they may start (its switch, its
// config copy) last succeeded in this execution: while one failed, no daemon is started there.
// A run before its point of no return rolls back on such a failure, and its undo's switch
// back makes the node ready again; past it, the daemons would run on links or a config the
// node does not have.
func (s *nodeState) setReady(node, step string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ok {
		delete(s.unready[node], step)
		return
	}
	if s.unready == nil {
		s.unready = map[string]map[string]bool{}
	}
	if s.unready[node] == nil {
		s.unready[node] = map[string]bool{}
	}
	s.unready[node][step] = true
}

// notReadyWhy says why node's daemons may not start in this execution; "" when they may.
func (s *nodeState) notReadyWhy(node string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var steps []string
	for step := range s.unready[node] {
		steps = append(steps, step)
	}
	slices.Sort(steps)
	if len(steps) == 0 {
		return ""
	}
	return "its " + strings.Join(steps, " and its ") + " failed"
}

// leaveBehind records that a rolling run leaves list behind within its failure budget.
func (s *nodeState) leaveBehind(list []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.behind == nil {
		s.behind = map[string]bool{}
	}
	for _, n := range list {
		s.behind[n] = true
	}
}

// saw notes what this run saw of node: whether it answered and, when read or set, the
// version directory its links name ("" when not known).
func (s *nodeState) saw(node, versionDir string, reachable bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[string]metrics.Node{}
	}
	n := s.seen[node]
	n.Name, n.Reachable = node, reachable
	if versionDir != "" {
		n.Version = versionDir
	}
	s.seen[node] = n
}

// seenNodes is what this run saw of its nodes, in no order.
func (s *nodeState) seenNodes() []metrics.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]metrics.Node, 0, len(s.seen))
	for _, n := range s.seen {
		out = append(out, n)
	}
	return out
}

// factSkippedPrefix prefixes the fact that a node was declared gone for the run
// (--skip-node).
const factSkippedPrefix = "skipped."

// factNodes are the nodes named by facts under prefix ("PREFIXnode"), sorted.
func factNodes(facts map[string]string, prefix string) []string {
	var out []string
	for k := range facts {
		if n, ok := strings.CutPrefix(k, prefix); ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// tolerated are the nodes a rolling run left behind within its failure budget of maxFailed,
// in any of its executions (facts), sorted.
func (s *nodeState) tolerated(facts map[string]string, maxFailed int) []string {
	out := factNodes(facts, factFailedPrefix)
	if len(out) > maxFailed {
		// Failures over the budget were never tolerated: the run stopped on them, and the
		// nodes it ends without were declared gone (--skip-node), which leftBehind says.
		out = nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for n := range s.behind {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// leftBehind are the nodes the run leaves behind, in any of its executions (facts), sorted:
// those a rolling run left within its failure budget of maxFailed, and those declared gone
// with --skip-node. 'cutover sync' catches them up.
func (s *nodeState) leftBehind(facts map[string]string, maxFailed int) []string {
	out := s.tolerated(facts, maxFailed)
	for _, n := range factNodes(facts, factSkippedPrefix) {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// settled are the online nodes the run does not leave behind: the ones that must run the
// target's daemons when the run ends.
func (r *Run) settled() []nodes.Node {
	behind := r.leftBehind()
	var out []nodes.Node
	for _, n := range r.Online {
		if !slices.Contains(behind, n.Name) {
			out = append(out, n)
		}
	}
	return out
}

// leftBehind are the nodes the run leaves behind, in any of its executions, sorted: those a
// rolling run left within its failure budget, and those declared gone with --skip-node.
// 'cutover sync' catches them up.
func (r *Run) leftBehind() []string {
	return r.perNode.leftBehind(r.factsCopy(), r.Config.Strategy.MaxFailed)
}
