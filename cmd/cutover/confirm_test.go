package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade"
	"github.com/cutover/cutover/upgrade/config"
)

func TestConfirm(t *testing.T) {
	inv, err := nodes.NewInventory("node1", []nodes.Node{{Name: "node1"}, {Name: "node2"}, {Name: "node3", Offline: true}})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte("app = \"app\"\n[cluster]\nmaster = \"node1\"\n[[cluster.node]]\nname = \"node1\"\n[config]\nfile = \"/var/lib/app/config.json\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := &upgrade.Run{Target: upgrade.Target{From: "1.0.0", To: "1.1.0", Direction: upgrade.Up}, Config: cfg, Inventory: inv, Online: inv.Online(), Offline: inv.Offline()}
	for _, tt := range []struct {
		answer string
		ok     bool
	}{{"y\n", true}, {"yes\n", true}, {"n\n", false}, {"\n", false}, {"", false}, {"maybe\n", false}} {
		var out strings.Builder
		err := confirm(context.Background(), strings.NewReader(tt.answer), &out, r)
		if (err == nil) != tt.ok {
			t.Errorf("confirm(%q) = %v, want ok %v", tt.answer, err, tt.ok)
		}
		for _, want := range []string{"app 1.0.0 -> 1.1.0 (upgrade) on 2 nodes", "offline: node3", "12. config-upgrade", "point of no return", "10. config-downgrade   skipped", "proceed? [y/N]"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("the question lacks %q:\n%s", want, out.String())
			}
		}
	}
}

// TestNoRunWithoutConsent: a run enters the journal only once its checks passed and the
// operator said yes. A declined prompt, and a check that refuses, leave the cluster and the
// journal as they were; /dev/null is not a terminal to prompt on.
func TestNoRunWithoutConsent(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	before := lc.snapshot()
	cfg, err := config.Load(lc.cfg)
	if err != nil {
		t.Fatal(err)
	}
	asked := false
	_, err = upgrade.Upgrade(context.Background(), cfg, upgrade.Options{To: "1.1.0", Confirm: func(context.Context, *upgrade.Run) error {
		asked = true
		return errors.New("not confirmed: nothing was changed")
	}})
	if err == nil || !asked {
		t.Fatalf("declined upgrade: %v (asked %v), want the refusal", err, asked)
	}
	if code, out, _ := lc.cutover("journal"); code != 0 || !strings.Contains(out, "no runs yet") {
		t.Errorf("journal after a declined prompt: exit %d\n%s", code, out)
	}
	if code, _, errOut := lc.cutover("upgrade", "--to=1.2.0", "--yes"); code != exitFailed {
		t.Errorf("upgrade to a version not installed: exit %d, want %d\n%s", code, exitFailed, errOut)
	}
	if code, out, _ := lc.cutover("journal"); code != 0 || !strings.Contains(out, "no runs yet") {
		t.Errorf("journal after a refused check: exit %d\n%s", code, out)
	}
	if after := lc.snapshot(); after != before {
		t.Errorf("the cluster changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	if isTerminal(devnull) {
		t.Errorf("%s counts as a terminal", os.DevNull)
	}
}

// TestBadInputBeforeConsent: where there is no terminal to ask on and no --yes, bad input is
// refused as such before cutover asks for --yes, for every command that asks; good input
// meets the refusal only once its checks passed. Each exits 2 and changes nothing, the journal
// included.
func TestBadInputBeforeConsent(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	before := lc.snapshot()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"upgrade", "--to=1.1;touch /tmp/x"}, `--to: invalid version "1.1;touch /tmp/x"`},
		{[]string{"upgrade", "--to=1.1.0", "--force=no-such-check"}, "no-such-check"},
		{[]string{"upgrade", "--to=1.1.0"}, "not on a terminal: pass --yes to upgrade"},
		{[]string{"prune", "--version=1.0;touch /tmp/x"}, `invalid version "1.0;touch /tmp/x"`},
		{[]string{"prune", "--version=1.0.0"}, `prune --version="1.0.0": it is the cluster's live version`},
		{[]string{"prune", "--version=1.1.0"}, "not on a terminal: pass --yes to prune"},
		{[]string{"sync", "node1;touch /tmp/x"}, `"node1;touch /tmp/x"`},
		{[]string{"sync", "node9"}, `"node9"`},
	} {
		code, _, errOut := lc.cutover(tt.args...)
		asked := strings.Contains(errOut, "--yes")
		if code != 2 || !strings.Contains(errOut, tt.want) || asked != strings.Contains(tt.want, "--yes") {
			t.Errorf("%q without --yes, not on a terminal: exit %d\n%s\nwant 2 and %q", tt.args, code, errOut, tt.want)
		}
	}
	if code, out, _ := lc.cutover("journal"); code != 0 || !strings.Contains(out, "no runs yet") {
		t.Errorf("journal after the refusals: exit %d\n%s", code, out)
	}
	if after := lc.snapshot(); after != before {
		t.Errorf("the cluster changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
