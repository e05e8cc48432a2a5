package upgrade

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/upgradetest"
)

// pruneCommand is the command prune's remove runs on a node of a World for versions.
func pruneCommand(versions ...string) string {
	return nodes.QuoteArgs(append([]string{"sh", "-c", pruneScript, "cutover-prune", "/usr/share/app", "/usr/lib/app"}, versions...))
}

// TestPruneStagesOnAWorld runs the prune's check and remove alone on a fake cluster with
// 1.0.0, 1.1.0 and 1.2.0 installed and 1.2.0 live, 1.1.0 the previous version.
func TestPruneStagesOnAWorld(t *testing.T) {
	three := upgradetest.Options{Versions: []string{"1.0.0", "1.1.0", "1.2.0"}}
	guard := pruneGuard{live: "1.2.0", previous: []string{"1.1.0", "1.2.0"}}
	wantRemove := func(job *pruneJob, want map[string][]string) func(t *testing.T, w *upgradetest.World, r *Run) {
		return func(t *testing.T, w *upgradetest.World, r *Run) {
			if fmt.Sprint(job.remove) != fmt.Sprint(want) {
				t.Errorf("to remove %v, want %v", job.remove, want)
			}
		}
	}
	found := &pruneJob{guard: guard, remove: map[string][]string{}}
	lagging := &pruneJob{guard: guard, remove: map[string][]string{}}
	kept := &pruneJob{keep: 3, guard: guard, remove: map[string][]string{}}
	down := &pruneJob{guard: guard, remove: map[string][]string{}}
	namedPrevious := &pruneJob{guard: pruneGuard{live: "1.2.0", previous: guard.previous, named: map[string]bool{"1.1.0": true, "1.0.0": true}}, remove: map[string][]string{}}
	removing := &pruneJob{guard: guard, remove: map[string][]string{"node2": {"1.0.0"}, "node3": {"1.0.0"}}}
	failing := &pruneJob{guard: guard, remove: map[string][]string{"node2": {"1.0.0"}}}
	runWorldCases(t, []worldCase{
		{name: "check finds on every node the version no run needs",
			opts: three, from: "1.2.0", to: "1.2.0", stage: pruneCheck{found}, state: journal.Done,
			check: wantRemove(found, map[string][]string{"node1": {"1.0.0"}, "node2": {"1.0.0"}, "node3": {"1.0.0"}})},
		{name: "check leaves a lagging node the version it runs",
			opts: three, from: "1.2.0", to: "1.2.0", setup: func(t *testing.T, w *upgradetest.World) { w.Link(t, "node3", "1.0.0") },
			stage: pruneCheck{lagging}, state: journal.Done,
			check: wantRemove(lagging, map[string][]string{"node1": {"1.0.0"}, "node2": {"1.0.0"}})},
		{name: "check keeps the keep newest versions",
			opts: three, from: "1.2.0", to: "1.2.0", stage: pruneCheck{kept}, state: journal.Done,
			check: wantRemove(kept, map[string][]string{})},
		{name: "check says that a version named for removal is kept, and removes the other named one",
			opts: three, from: "1.2.0", to: "1.2.0", stage: pruneCheck{namedPrevious}, state: journal.Done,
			check: func(t *testing.T, w *upgradetest.World, r *Run) {
				wantRemove(namedPrevious, map[string][]string{"node1": {"1.0.0"}, "node2": {"1.0.0"}, "node3": {"1.0.0"}})(t, w, r)
				jr, err := journal.NewStore(JournalPath(r.Config)).Run(context.Background(), r.ID)
				if err != nil {
					t.Fatal(err)
				}
				ev, _ := jr.LastEvent("check")
				if !strings.Contains(ev.Message, "1.1.0 kept: the previous version") || strings.Contains(ev.Message, "1.0.0 kept") {
					t.Errorf("check's note %q, want 1.1.0 (and only it) said kept", ev.Message)
				}
			}},
		{name: "check fails on a node that cannot be reached",
			opts: three, from: "1.2.0", to: "1.2.0", setup: func(t *testing.T, w *upgradetest.World) { w.Down("node2") },
			stage: pruneCheck{down}, state: journal.Failed, err: "node2"},
		{name: "remove runs the prune script with each node's versions, and with none where it only clears leftovers",
			opts: three, from: "1.2.0", to: "1.2.0", stage: pruneRemove{removing}, state: journal.Done,
			calls: []string{"node1: " + pruneCommand(), "node2: " + pruneCommand("1.0.0"), "node3: " + pruneCommand("1.0.0")}},
		{name: "remove fails on a node whose removal fails, naming the versions",
			opts: three, from: "1.2.0", to: "1.2.0", setup: func(t *testing.T, w *upgradetest.World) { w.Fail("node2", pruneCommand("1.0.0")) },
			stage: pruneRemove{failing}, state: journal.Failed, err: "remove [1.0.0]",
			calls: []string{"node1: " + pruneCommand(), "node2: " + pruneCommand("1.0.0"), "node3: " + pruneCommand()}},
	})
}

// TestStagingCheckOnAWorld runs the stage run's check alone on a fake cluster.
func TestStagingCheckOnAWorld(t *testing.T) {
	job := func(version string) *stagingJob {
		return &stagingJob{version: version, states: map[string][2]treeState{}, already: map[string]bool{}, replacing: map[string]bool{}}
	}
	runWorldCases(t, []worldCase{
		{name: "check refuses the live version on every node, and runs nothing",
			from: "1.0.0", to: "1.0.0", stage: stagingCheck{job("1.0.0")}, state: journal.Failed, err: "1.0.0 is the live version"},
	})
}
