package main

import (
	"context"
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
