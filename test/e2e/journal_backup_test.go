package e2e

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cutover/cutover/test/cluster"
	"github.com/cutover/cutover/upgrade"
)

// upgradeStages are the names of the stages of a run, in order, as the stage machine lists them.
func upgradeStages() []string {
	var out []string
	for _, st := range upgrade.Stages() {
		out = append(out, st.Name())
	}
	return out
}

// TestJournalAndBackup upgrades the cluster, reads the run back from the journal, lists the
// backup the run took, and restores it on the master: refused while the daemons run, then,
// once they are stopped, the master's config and links are those of 1.0.0 again.
func TestJournalAndBackup(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{})
	before := stateOf(t, c, c.Master)
	if res := cutover(t, c, "upgrade", "--to=1.1.0", "--yes"); res.ExitCode != 0 {
		t.Fatalf("upgrade: exit %d", res.ExitCode)
	}

	// The journal lists the run, and shows its 19 stages with every node's result.
	res := cutover(t, c, "journal")
	if res.ExitCode != 0 || !regexp.MustCompile(`(?m)^1 +upgrade +1\.0\.0 -> 1\.1\.0 +upgrade .* done`).MatchString(res.Stdout) {
		t.Errorf("journal: exit %d, want run 1 listed as done:\n%s", res.ExitCode, res.Stdout)
	}
	res = cutover(t, c, "journal", "1")
	for i, stage := range upgradeStages() {
		if !regexp.MustCompile(`(?m)^` + strconv.Itoa(i+1) + ` +` + regexp.QuoteMeta(stage) + ` +(done|skipped) `).MatchString(res.Stdout) {
			t.Errorf("journal 1 does not show stage %d %s done or skipped", i+1, stage)
		}
	}
	for _, n := range c.Nodes {
		if !strings.Contains(res.Stdout, "      "+n.Name+": ok, exit 0") {
			t.Errorf("journal 1 shows no result of %s", n.Name)
		}
	}
	res = cutover(t, c, "--output", "json", "journal", "1")
	var doc struct {
		Kind string `json:"kind"`
		Runs []struct {
			Events []struct {
				Stage string `json:"stage"`
				Nodes []struct {
					Node string `json:"node"`
					OK   bool   `json:"ok"`
				} `json:"nodes"`
			} `json:"events"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &doc); err != nil || doc.Kind != "Journal" || len(doc.Runs) != 1 {
		t.Fatalf("journal 1 --output json: %v, %+v", err, doc)
	}
	stages, switched := map[string]bool{}, 0
	for _, e := range doc.Runs[0].Events {
		stages[e.Stage] = true
		if e.Stage == "switch" {
			for _, n := range e.Nodes {
				if n.OK {
					switched++
				}
			}
		}
	}
	if len(stages) != len(upgradeStages()) || switched != len(c.Nodes) {
		t.Errorf("journal 1 --output json: %d stages, switch ok on %d nodes; want %d and %d", len(stages), switched, len(upgradeStages()), len(c.Nodes))
	}
	for _, id := range []string{"abc", "99999", "1;rm"} {
		if res := cutover(t, c, "journal", id); res.ExitCode != 2 {
			t.Errorf("journal %q: exit %d, want 2", id, res.ExitCode)
		}
	}

	// The backup the run took is listed, and checks out.
	res = cutover(t, c, "backup", "list", "--verify")
	id := regexp.MustCompile(`demoapp-1\.0\.0-to-1\.1\.0-\d{8}T\d{6}Z`).FindString(res.Stdout)
	if res.ExitCode != 0 || id == "" || !strings.Contains(res.Stdout, "verified") {
		t.Fatalf("backup list --verify: exit %d, want the 1.0.0 -> 1.1.0 archive verified:\n%s", res.ExitCode, res.Stdout)
	}

	// While the daemons run, restore refuses and changes nothing.
	snap := snapshot(t, c)
	res = cutover(t, c, "backup", "restore", id)
	if res.ExitCode != 1 || !strings.Contains(res.Stderr, "stop the daemons first") {
		t.Errorf("restore while the daemons run: exit %d, stderr %q; want 1 and stop the daemons first", res.ExitCode, res.Stderr)
	}
	if after := snapshot(t, c); after != snap {
		t.Errorf("a refused restore changed the cluster:\nbefore:\n%s\nafter:\n%s", snap, after)
	}

	// With the daemons stopped everywhere, the master is restored; the other nodes are not.
	for _, n := range c.Nodes {
		must(t, c, n.Name, demoapp+" daemon stop")
	}
	res = cutover(t, c, "backup", "restore", id)
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "cutover sync") {
		t.Fatalf("restore with the daemons stopped: exit %d, want 0 and the hint to sync the other nodes", res.ExitCode)
	}
	after := stateOf(t, c, c.Master)
	if after.Lib != before.Lib || after.Share != before.Share || after.Config != before.Config {
		t.Errorf("master after the restore: %+v, want links and config as before the upgrade: %+v", after, before)
	}
	if mode := must(t, c, c.Master, "stat -c '%a %U' /var/lib/demoapp/config.json"); mode != must(t, c, "node2", "stat -c '%a %U' /var/lib/demoapp/config.json") {
		t.Errorf("restored config is %s, other nodes' %s", mode, must(t, c, "node2", "stat -c '%a %U' /var/lib/demoapp/config.json"))
	}
	if st := stateOf(t, c, "node2"); st.Lib != "/usr/lib/demoapp/1.1.0" {
		t.Errorf("node2 was touched by the restore: %+v", st)
	}
	if out := must(t, c, c.Master, "ls /var/lib/cutover/backups"); !strings.Contains(out, "demoapp-1.1.0-before-restore-") {
		t.Errorf("no archive of the state before the restore:\n%s", out)
	}
	if res := cutover(t, c, "journal"); !regexp.MustCompile(`(?m)^2 +restore +1\.1\.0 -> 1\.0\.0 +- .* done`).MatchString(res.Stdout) {
		t.Errorf("journal does not list the restore as run 2:\n%s", res.Stdout)
	}
}
