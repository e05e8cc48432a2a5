package upgrade

import (
	"testing"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/upgrade/config"
	"github.com/cutover/cutover/upgrade/upgradetest"
)

// TestSyncStagesOnAWorld runs each stage of SyncStages that the upgrade's tables leave out
// alone on a fake cluster: the sync's verify-installed, redistribute and verify.
func TestSyncStagesOnAWorld(t *testing.T) {
	wantCopies := func(t *testing.T, w *upgradetest.World, r *Run) {
		t.Helper()
		want := w.ReadFile(w.Master, w.ConfigFile())
		for _, n := range []string{"node2", "node3"} {
			if got := w.ReadFile(n, "/var/lib/app/config.json"); got != want {
				t.Errorf("%s's config %q, want the master's %q", n, got, want)
			}
		}
	}
	runWorldCases(t, []worldCase{
		{name: "the sync's verify-installed passes nodes holding the live version's trees",
			from: "1.0.0", to: "1.1.0", stage: syncVerifyInstalled{}, state: journal.Done},
		{name: "the sync's verify-installed refuses a node lacking a tree of the live version",
			from: "1.0.0", to: "1.1.0", setup: func(t *testing.T, w *upgradetest.World) {
				removeTree(t, w, "node2", "/usr/share/app/1.1.0")
			}, stage: syncVerifyInstalled{}, state: journal.Failed, err: "node2"},
		{name: "redistribute copies the master's config to the other nodes",
			from: "1.0.0", to: "1.1.0", stage: syncRedistribute{}, state: journal.Done, check: wantCopies},
		{name: "redistribute fails on a node that cannot be reached, and still copies to the others",
			from: "1.0.0", to: "1.1.0", setup: func(t *testing.T, w *upgradetest.World) { w.Down("node3") },
			stage: syncRedistribute{}, state: journal.Failed, err: "node3",
			check: func(t *testing.T, w *upgradetest.World, r *Run) {
				if got, want := w.ReadFile("node2", "/var/lib/app/config.json"), w.ReadFile(w.Master, w.ConfigFile()); got != want {
					t.Errorf("node2's config %q, want the master's %q", got, want)
				}
			}},
		{name: "redistribute is skipped when the application redistributes its config itself",
			from: "1.0.0", to: "1.1.0", config: func(c *config.Config) { c.Commands.RedistConf = "redist" },
			stage: syncRedistribute{}, state: journal.Skipped,
			check: func(t *testing.T, w *upgradetest.World, r *Run) {
				if got := w.ReadFile("node2", "/var/lib/app/config.json"); got != "" {
					t.Errorf("node2 got a config copy %q", got)
				}
			}},
		{name: "the sync's verify runs verify on the master",
			from: "1.0.0", to: "1.1.0", stage: syncVerify{}, state: journal.Done, calls: []string{"node1: verify"}},
		{name: "the sync's verify fails when verify fails",
			from: "1.0.0", to: "1.1.0", setup: func(t *testing.T, w *upgradetest.World) { w.Fail("node1", "verify") },
			stage: syncVerify{}, state: journal.Failed, err: "verify", calls: []string{"node1: verify"}},
		{name: "the sync's verify is skipped with neither verify nor daemons_start",
			from: "1.0.0", to: "1.1.0", config: func(c *config.Config) { c.Commands.Verify, c.Commands.DaemonsStart = "", "" },
			stage: syncVerify{}, state: journal.Skipped},
	})
}
