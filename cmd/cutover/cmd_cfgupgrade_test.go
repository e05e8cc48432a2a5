package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCfgupgradeLocal migrates the master's config by hand, as an operator does after
// switching the links himself: dry run, upgrade to the live version, downgrade, refusals.
func TestCfgupgradeLocal(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	config := lc.read("var/lib/app/config.json")

	// The links already point at 1.0.0, the config's version: nothing to do.
	code, out, errOut := lc.cutover("cfgupgrade")
	if code != 0 || !strings.Contains(out, "already at 1.0.0") {
		t.Fatalf("cfgupgrade at the live version: exit %d %q %q", code, out, errOut)
	}

	// Switch the links by hand; the config is now behind.
	for _, l := range []struct{ link, tree string }{{"etc/app/lib", "/usr/lib/app/1.1.0"}, {"etc/app/share", "/usr/share/app/1.1.0"}} {
		if err := os.Remove(lc.path(l.link)); err != nil {
			t.Fatal(err)
		}
		lc.symlink(l.tree, l.link)
	}
	code, out, _ = lc.cutover("cfgupgrade", "--dry-run")
	if code != 0 || !strings.Contains(out, "1.0.0 -> 1.1.0 (dry run") || !strings.Contains(out, `"title"`) {
		t.Errorf("dry run: exit %d, output %q; want the diff", code, out)
	}
	if got := lc.read("var/lib/app/config.json"); got != config {
		t.Errorf("a dry run changed the config:\n%s", got)
	}
	code, out, errOut = lc.cutover("--output", "json", "cfgupgrade", "--dry-run")
	var doc struct{ Kind, From, To, Diff string }
	if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || doc.Kind != "Cfgupgrade" || doc.From != "1.0.0" || doc.To != "1.1.0" || !strings.Contains(doc.Diff, `"title"`) {
		t.Errorf("--output json cfgupgrade --dry-run: exit %d (%v) %q %q; want a Cfgupgrade document with the diff", code, err, out, errOut)
	}

	code, out, errOut = lc.cutover("cfgupgrade")
	if code != 0 || !strings.Contains(lc.read("var/lib/app/config.json"), `"version": "1.1.0"`) {
		t.Fatalf("cfgupgrade: exit %d %q %q, config %s", code, out, errOut, lc.read("var/lib/app/config.json"))
	}
	backups, _ := filepath.Glob(lc.path("var/lib/app/config.json.*.bak"))
	if len(backups) != 1 || !strings.Contains(out, backups[0]) {
		t.Errorf("backup copies %v, output %q: want one, named in the output", backups, out)
	}

	// Without --downgrade a downgrade is refused; with it, the newer tree's migrations run.
	code, _, errOut = lc.cutover("cfgupgrade", "--to=1.0.0")
	if code != exitUsage || !strings.Contains(errOut, "--downgrade") {
		t.Errorf("downgrade without --downgrade: exit %d %q", code, errOut)
	}
	code, out, errOut = lc.cutover("cfgupgrade", "--downgrade")
	if code != 0 || lc.read("var/lib/app/config.json") != config {
		t.Errorf("cfgupgrade --downgrade: exit %d %q %q; config\n%s\nwant\n%s", code, out, errOut, lc.read("var/lib/app/config.json"), config)
	}

	for _, args := range [][]string{{"cfgupgrade", "--to=1.1.0; rm -rf /"}, {"cfgupgrade", "extra"}, {"cfgupgrade", "--bogus"}} {
		before := lc.read("var/lib/app/config.json")
		if code, _, errOut := lc.cutover(args...); code != exitUsage || !strings.HasPrefix(errOut, "cutover: ") {
			t.Errorf("%v: exit %d %q, want %d", args, code, errOut, exitUsage)
		}
		if lc.read("var/lib/app/config.json") != before {
			t.Errorf("%v changed the config", args)
		}
	}
}
