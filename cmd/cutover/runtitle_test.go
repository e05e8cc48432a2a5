package main

import (
	"strings"
	"testing"
)

// TestRunTitle checks how status and journal name a run: both versions where a run goes from
// one to another (a downgrade called one), the one version of a stage or a prune's none without a stray arrow.
func TestRunTitle(t *testing.T) {
	for _, c := range []struct{ kind, from, to, want string }{
		{"upgrade", "1.0.0", "1.1.0", "upgrade 1.0.0 -> 1.1.0"},
		{"upgrade", "2.4.0", "2.3.1", "downgrade 2.4.0 -> 2.3.1"},
		{"upgrade", "1.1.0", "1.1.0-rc1", "downgrade 1.1.0 -> 1.1.0-rc1"},
		{"restore", "2.4.0", "2.3.1", "restore 2.4.0 -> 2.3.1"},
		{"stage", "", "1.2.0", "stage 1.2.0"},
		{"prune", "", "", "prune"},
	} {
		if got := runTitle(c.kind, c.from, c.to); got != c.want {
			t.Errorf("runTitle(%q, %q, %q) = %q, want %q", c.kind, c.from, c.to, got, c.want)
		}
	}
}

// TestDowngradeIsCalledOne: after a downgrade, status's last run line and the journal call
// the run a downgrade.
func TestDowngradeIsCalledOne(t *testing.T) {
	lc := newLocalCluster(t, "1.1.0", "1.0.0", "1.1.0")
	if code, out, errOut := lc.cutover("upgrade", "--to=1.0.0", "--yes"); code != exitOK {
		t.Fatalf("downgrade: exit %d\n%s\n%s", code, out, errOut)
	}
	// The post_upgrade hook runs after a downgrade too, as docs/configuration.md says.
	if calls := lc.read("calls"); !strings.Contains(calls, "post-upgrade 1.1.0") {
		t.Errorf("the commands of a downgrade:\n%s\nwant post_upgrade run with {from} 1.1.0", calls)
	}
	if doc := readDoc(t, "docs/configuration.md"); !strings.Contains(doc, "It runs after a downgrade too") {
		t.Error("docs/configuration.md does not say that post_upgrade runs after a downgrade too")
	}
	_, status, _ := lc.cutover("status")
	if !strings.Contains(status, "last run 1, downgrade 1.1.0 -> 1.0.0: done") {
		t.Errorf("status after a downgrade:\n%s\nwant its last run called a downgrade", status)
	}
	_, list, _ := lc.cutover("journal")
	if !strings.Contains(list, "downgrade") {
		t.Errorf("journal after a downgrade:\n%s\nwant the run's direction, downgrade", list)
	}
	_, run, _ := lc.cutover("journal", "1")
	if !strings.Contains(run, "run 1: downgrade 1.1.0 -> 1.0.0") {
		t.Errorf("journal 1 after a downgrade:\n%s\nwant the run called a downgrade", run)
	}
}
