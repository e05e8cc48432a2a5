package upgrade

import (
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/upgrade/config"
	"github.com/cutover/cutover/upgrade/upgradetest"
)

// TestBatchOnAWorld runs one batch of a rolling run alone on a fake cluster: node2 and node3
// switched while the master serves.
func TestBatchOnAWorld(t *testing.T) {
	rolling := func(maxFailed int) func(c *config.Config) {
		return func(c *config.Config) {
			c.Strategy.Mode, c.Strategy.BatchTimeout.Duration, c.Strategy.MaxFailed = config.Rolling, time.Minute, maxFailed
		}
	}
	b := batch{n: 1, of: 1, nodes: []string{"node2", "node3"}}
	rolled := []string{"node2: stop", "node2: ensure-dirs", "node2: start", "node3: stop", "node3: ensure-dirs", "node3: start"}
	runWorldCases(t, []worldCase{
		{name: "a batch stops, switches, and starts each of its nodes; its undo switches them back",
			from: "1.0.0", to: "1.1.0", config: rolling(0), stage: b, state: journal.Done, calls: rolled,
			links:   map[string]string{"node1": "1.0.0", "node2": "1.1.0", "node3": "1.1.0"},
			learned: map[string]string{factSwitchedPrefix + "node2": "1.1.0", factSwitchedPrefix + "node3": "1.1.0"},
			undo: &worldUndo{calls: append(rolled[:3:3], "node2: stop", "node2: ensure-dirs", "node2: start",
				"node3: stop", "node3: ensure-dirs", "node3: start", "node3: stop", "node3: ensure-dirs", "node3: start"),
				check: func(t *testing.T, w *upgradetest.World, r *Run) {
					for _, n := range []string{"node1", "node2", "node3"} {
						if got := w.Links(n); got != w.At("1.0.0") {
							t.Errorf("undo: %s links %s, want %s", n, got, w.At("1.0.0"))
						}
					}
				}}},
		{name: "a batch with a failed node within max_failed records it, switches it back to the source and goes on",
			from: "1.0.0", to: "1.1.0", config: rolling(1), setup: func(t *testing.T, w *upgradetest.World) { w.FailOnce("node3", "stop") },
			stage: b, state: journal.Failed, err: "within strategy.max_failed",
			calls:   []string{"node2: stop", "node2: ensure-dirs", "node2: start", "node3: stop", "node3: stop", "node3: ensure-dirs", "node3: start"},
			links:   map[string]string{"node1": "1.0.0", "node2": "1.1.0", "node3": "1.0.0"},
			learned: map[string]string{factFailedPrefix + "node3": "batch-1", factSwitchedPrefix + "node2": "1.1.0"}},
		{name: "a batch with more failed nodes than max_failed fails, and the runner switches it back",
			from: "1.0.0", to: "1.1.0", config: rolling(0), setup: func(t *testing.T, w *upgradetest.World) { w.FailOnce("node3", "stop") },
			stage: b, state: journal.Undone, err: "more than strategy.max_failed = 0",
			calls: []string{"node2: stop", "node2: ensure-dirs", "node2: start", "node2: stop", "node2: ensure-dirs", "node2: start",
				"node3: stop", "node3: stop", "node3: ensure-dirs", "node3: start"},
			links:   map[string]string{"node1": "1.0.0", "node2": "1.0.0", "node3": "1.0.0"},
			learned: map[string]string{factFailedPrefix + "node3": "batch-1"}},
		{name: "a failed canary fails its batch at once, whatever max_failed allows, and is switched back",
			from: "1.0.0", to: "1.1.0", config: rolling(5), setup: func(t *testing.T, w *upgradetest.World) { w.FailOnce("node2", "start") },
			stage: batch{n: 1, of: 2, canary: true, nodes: []string{"node2"}}, state: journal.Undone, err: "canary node2 failed",
			calls: []string{"node2: stop", "node2: ensure-dirs", "node2: start", "node2: stop", "node2: ensure-dirs", "node2: start"},
			links: map[string]string{"node1": "1.0.0", "node2": "1.0.0", "node3": "1.0.0"}},
	})
}
