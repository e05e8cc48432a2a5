package demoapp

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cutover/cutover/upgrade/config"
)

// TestMixedVersions runs 1.2 beside 1.1 as a rolling run leaves them: node2 at 1.2.0 on the
// cluster's 1.1 config. node verify passes for both, node drain keeps the load client off a
// node, and the client counts what each node served.
func TestMixedVersions(t *testing.T) {
	t.Parallel()
	nodes := []NodeAddr{{"node1", "127.0.0.1"}, {"node2", "127.0.0.2"}}
	port := freePort(t, "127.0.0.1", "127.0.0.2")
	node1 := newTestNode(t, NodeSpec{Name: "node1", Master: "node1", Nodes: nodes, Live: "1.1.0"}, "127.0.0.1", port)
	node2 := newTestNode(t, NodeSpec{Name: "node2", Master: "node1", Nodes: nodes, Live: "1.1.0"}, "127.0.0.2", port)
	node1.must("daemon", "start")
	if out, errOut, code := node2.runVersion("1.2.0", "daemon", "start"); code != 0 {
		t.Fatalf("1.2.0 daemon on the 1.1 config: exit %d, %s %s", code, out, errOut)
	}
	for _, n := range []string{"node1", "node2"} {
		out := node1.must("node", "verify", n)
		if !strings.HasPrefix(out, n+" ok") || !strings.Contains(out, "(config 1.1.0)") {
			t.Errorf("node verify %s = %q", n, out)
		}
	}
	// 1.1 does not read 1.2's config: only the newer version runs on the older config.
	if _, _, code := node1.runVersion("1.0.0", "verify"); code == 0 {
		t.Errorf("1.0.0 verify on a 1.1 config succeeded")
	}

	node1.must("node", "drain", "node2")
	out := node1.must("load", "--seconds", "1")
	if !strings.Contains(out, "node node2 served 0 failed 0") || strings.Contains(out, "node node1 served 0") || !strings.Contains(out, "failed 0 in") {
		t.Errorf("load with node2 drained:\n%s", out)
	}
	node1.must("node", "undrain", "node2")
	out = node1.must("load", "--seconds", "1")
	if strings.Contains(out, "served 0") || !strings.Contains(out, "failed 0 in") {
		t.Errorf("load with both nodes in service:\n%s", out)
	}

	if err := os.MkdirAll(node1.path("run/demoapp/fail"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(node1.path("run/demoapp/fail/node-verify-node2"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, code := node1.run("node", "verify", "node2"); code == 0 {
		t.Errorf("node verify node2 with its fault set succeeded")
	}
	if _, _, code := node1.run("node", "verify", "node9"); code == 0 {
		t.Errorf("node verify of an unknown node succeeded")
	}
}

// TestRollingConfig: the demo cluster's rolling config is a valid cutover config.
func TestRollingConfig(t *testing.T) {
	t.Parallel()
	text := RollingConfig(CutoverConfig("node1", demoNodes), Rolling{BatchSize: 2, Canaries: []string{"node2"}, MaxFailed: 1, BatchTimeout: "2m"})
	cfg, err := config.Parse(text)
	if err != nil {
		t.Fatalf("config.Parse(RollingConfig) = %v\n%s", err, text)
	}
	s := cfg.Strategy
	if !s.IsRolling() || s.BatchSize != 2 || s.Canaries[0] != "node2" || s.MaxFailed != 1 || cfg.Commands.NodeVerify == "" || cfg.Commands.NodeDrain == "" {
		t.Errorf("strategy = %+v, commands = %+v", s, cfg.Commands)
	}
}

// rollingTOML is the documented example of a rolling config for the demo cluster.
var rollingTOML = filepath.Join("..", "..", "docs", "examples", "demo-rolling.toml")

// TestRollingTOML keeps docs/examples/demo-rolling.toml equal to the demo cluster's config made
// rolling as `make demo-rolling` does (go test -update rewrites it).
func TestRollingTOML(t *testing.T) {
	t.Parallel()
	got := RollingConfig(CutoverConfig("node1", demoNodes), Rolling{BatchSize: 2, Canaries: []string{"node2"}, BatchTimeout: "2m"})
	if *update {
		if err := os.WriteFile(rollingTOML, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(rollingTOML)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("RollingConfig differs from %s; run go test ./test/demoapp -update after checking the change", rollingTOML)
	}
}
