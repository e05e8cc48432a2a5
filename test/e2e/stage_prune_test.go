package e2e

import (
	"strings"
	"testing"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/test/cluster"
)

// TestStageAndPrune stages 1.2.0 from a tarball onto the nodes that lack it, upgrades to it,
// and prunes what no run needs: the staged version counts as installed on every node, the
// master (which had it) is left alone, and prune keeps the live version, the downgrade
// target and the newest.
func TestStageAndPrune(t *testing.T) {
	t.Parallel()
	others := []string{"node2", "node3", "node4"}
	missing := map[string][]string{}
	for _, n := range others {
		missing[n] = []string{"1.2.0"}
	}
	c := cluster.New(t, cluster.Options{Missing: missing})
	must(t, c, c.Master, "tar -czf /root/demoapp-1.2.0.tar.gz -C / usr/lib/demoapp/1.2.0 usr/share/demoapp/1.2.0")

	// Refused before anything is sent: the live version, and a source without the trees.
	if res := cutover(t, c, "stage", "--version=1.0.0", "/root/demoapp-1.2.0.tar.gz"); res.ExitCode != 2 {
		t.Errorf("stage of the tarball as the live 1.0.0: exit %d, want 2", res.ExitCode)
	}
	for _, n := range others {
		if res := sh(t, c, n, "test -e /usr/lib/demoapp/1.2.0 || test -e /usr/lib/demoapp/.1.2.0.cutover-stage"); res.ExitCode == 0 {
			t.Errorf("%s: a refused stage left something behind", n)
		}
	}

	res := cutover(t, c, "stage", "--version=1.2.0", "/root/demoapp-1.2.0.tar.gz")
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "staged on 4 nodes") {
		t.Fatalf("stage: exit %d, want 0", res.ExitCode)
	}
	// The master read and checksummed each tree once, not once per node, on its own file
	// system (fuse-overlayfs here, which has no O_TMPFILE: the named file removed at once).
	if log := must(t, c, c.Master, "cat $(ls -t /var/lib/cutover/log/run-*.log | head -n 1)"); strings.Count(log, "encoded once for the 3 nodes that lack it") != 2 {
		t.Errorf("the stage's run log does not say both trees were encoded once:\n%s", log)
	}
	if left := must(t, c, c.Master, "ls -A /var/lib/cutover | grep cutover-stream || true"); left != "" {
		t.Errorf("the encoded streams left files in the state directory: %s", left)
	}
	want := must(t, c, c.Master, "cd /usr && find lib/demoapp/1.2.0 share/demoapp/1.2.0 -type f | sort | xargs sha256sum")
	for _, n := range others {
		if got := must(t, c, n, "cd /usr && find lib/demoapp/1.2.0 share/demoapp/1.2.0 -type f | sort | xargs sha256sum"); got != want {
			t.Errorf("%s: the staged trees differ from the master's", n)
		}
	}
	// A second stage sends nothing.
	if res := cutover(t, c, "--output", "json", "stage", "--version=1.2.0", "/root/demoapp-1.2.0.tar.gz"); res.ExitCode != 0 || !strings.Contains(res.Stdout, `"sent_bytes":0`) {
		t.Errorf("restage: exit %d, want 0 with nothing sent", res.ExitCode)
	}

	// The staged version is what an upgrade needs.
	if res := cutover(t, c, "upgrade", "--to=1.2.0", "--yes"); res.ExitCode != 0 {
		t.Fatalf("upgrade to the staged 1.2.0: exit %d", res.ExitCode)
	}
	checkAt(t, c, "1.2.0", online(c)...)

	// Live 1.2.0, previous 1.1.0: with --keep=0 only 1.0.0 goes.
	res = cutover(t, c, "prune", "--keep=0", "--dry-run")
	_, removed, listed := strings.Cut(res.Stdout, "would remove:")
	if res.ExitCode != 0 || !listed || !strings.Contains(removed, "1.0.0") || strings.Contains(removed, "1.1.0") ||
		!strings.Contains(res.Stdout, "kept: 1.1.0 the previous version") {
		t.Errorf("prune --dry-run: exit %d, want 1.0.0 listed and 1.1.0 kept as the previous version", res.ExitCode)
	}
	for _, n := range online(c) {
		must(t, c, n, "test -d /usr/lib/demoapp/1.0.0 && test -d /usr/share/demoapp/1.0.0")
	}
	if res := cutover(t, c, "prune", "--keep=0", "--yes"); res.ExitCode != 0 {
		t.Fatalf("prune: exit %d", res.ExitCode)
	}
	for _, n := range online(c) {
		// The staged 1.2.0 keeps its manifest beside its trees; nothing else of cutover's stays.
		got := must(t, c, n, "ls -A /usr/lib/demoapp /usr/share/demoapp | grep -vx '.1.2.0.cutover-manifest' | tr '\\n' ' '")
		if strings.Contains(got, "1.0.0") || !strings.Contains(got, "1.1.0") || !strings.Contains(got, "1.2.0") || strings.Contains(got, "cutover-") {
			t.Errorf("%s after prune: %s; want 1.1.0 and 1.2.0 only", n, got)
		}
	}
	kinds := map[string]int{}
	for _, r := range runs(t, c) {
		if r.Outcome == journal.Succeeded {
			kinds[r.Kind]++
		}
	}
	if kinds["stage"] != 2 || kinds["prune"] != 1 || kinds["upgrade"] != 1 {
		t.Errorf("journal: %v; want 2 stage runs, 1 upgrade, 1 prune", kinds)
	}
}
