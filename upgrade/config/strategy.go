package config

import (
	"fmt"
	"slices"
	"strings"
)

// The strategies of [strategy] mode.
const (
	// AllAtOnce stops the whole cluster, switches it and starts it again: the default, and
	// what an application that cannot run two versions side by side needs.
	AllAtOnce = "all-at-once"
	// Rolling switches the nodes batch by batch, canaries first, while the others serve.
	Rolling = "rolling"
)

// The orders of [strategy] order: where the master goes among the batches.
const (
	MasterLast  = "master-last"
	MasterFirst = "master-first"
)

// StrategyConfig is [strategy]: how the nodes are switched, all at once or in batches.
type StrategyConfig struct {
	Mode string `toml:"mode"`
	// BatchSize is the number of nodes per batch after the canaries.
	BatchSize int `toml:"batch_size"`
	// Canaries are switched first, each alone; any canary failure rolls the run back.
	Canaries []string `toml:"canaries"`
	// MaxFailed is how many nodes outside the canaries may fail before the run rolls back.
	MaxFailed int `toml:"max_failed"`
	// BatchTimeout bounds one batch, from its first drain to its last verify.
	BatchTimeout Duration `toml:"batch_timeout"`
	// Order puts the master in the last batch (master-last) or the first after the canaries
	// (master-first).
	Order []string `toml:"order"`
}

// IsRolling reports whether the cluster is switched batch by batch.
func (s StrategyConfig) IsRolling() bool { return s.Mode == Rolling }

// MasterFirst reports whether the master goes in the first batch after the canaries.
func (s StrategyConfig) MasterFirst() bool { return slices.Contains(s.Order, MasterFirst) }

func (s StrategyConfig) validate(cmds CommandsConfig) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if s.Mode != AllAtOnce && s.Mode != Rolling {
		bad("strategy.mode %q: must be %q or %q", s.Mode, AllAtOnce, Rolling)
	}
	if s.BatchSize < 1 {
		bad("strategy.batch_size %d: must be at least 1", s.BatchSize)
	}
	if s.MaxFailed < 0 {
		bad("strategy.max_failed %d: must be 0 or more", s.MaxFailed)
	}
	if s.BatchTimeout.Duration <= 0 {
		bad("strategy.batch_timeout must be positive")
	}
	if len(s.Order) != 1 || (s.Order[0] != MasterLast && s.Order[0] != MasterFirst) {
		bad("strategy.order %q: must be [%q] or [%q]", s.Order, MasterLast, MasterFirst)
	}
	seen := map[string]bool{}
	for _, n := range s.Canaries {
		switch {
		case !hostName.MatchString(n):
			bad("strategy.canaries: %q is not a host name", n)
		case seen[n]:
			bad("strategy.canaries: %s is named twice", n)
		}
		seen[n] = true
	}
	for key, cmd := range map[string]string{"node_drain": cmds.NodeDrain, "node_undrain": cmds.NodeUndrain, "node_verify": cmds.NodeVerify} {
		if cmd != "" && !strings.Contains(cmd, "{node}") {
			bad("commands.%s runs on the master for each node and must name it with {node}", key)
		}
	}
	if s.Mode == Rolling && (cmds.NodeDrain == "") != (cmds.NodeUndrain == "") {
		bad("commands.node_drain and commands.node_undrain go together: set both or neither")
	}
	return errs
}
