package demoapp

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ and docs/examples/demo.toml")

// testBins are the demo binaries, built once for all tests of the package.
var testBins *Binaries

// demoNodes is the default demo cluster: node1 (the master) to node4.
var demoNodes = []NodeAddr{
	{"node1", "10.77.0.11"},
	{"node2", "10.77.0.12"},
	{"node3", "10.77.0.13"},
	{"node4", "10.77.0.14"},
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "demoapp-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	testBins, err = Build(ctx, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
