package demoapp

import (
	"fmt"
	"strings"
)

// Rolling describes the [strategy] of a rolling run on the demo cluster.
type Rolling struct {
	BatchSize    int
	Canaries     []string
	MaxFailed    int
	BatchTimeout string // such as "2m"
}

// RollingConfig turns the demo cluster's cutover.toml (as CutoverConfig writes it) into one
// for a rolling run: the node commands that drain, undrain and verify one node for the load
// client, and the [strategy] table.
func RollingConfig(cfg []byte, r Rolling) []byte {
	const d = "/usr/lib/demoapp/default/usr/sbin/demoapp"
	commands := fmt.Sprintf("[commands]\nnode_drain = \"%[1]s node drain {node}\"\nnode_undrain = \"%[1]s node undrain {node}\"\nnode_verify = \"%[1]s node verify {node}\"\n", d)
	out := strings.Replace(string(cfg), "[commands]\n", commands, 1)
	var canaries []string
	for _, c := range r.Canaries {
		canaries = append(canaries, tomlString(c))
	}
	out += fmt.Sprintf("\n# Switch the nodes a batch at a time while the others serve.\n[strategy]\nmode = \"rolling\"\nbatch_size = %d\ncanaries = [%s]\nmax_failed = %d\nbatch_timeout = %s\n",
		r.BatchSize, strings.Join(canaries, ", "), r.MaxFailed, tomlString(r.BatchTimeout))
	return []byte(out)
}
