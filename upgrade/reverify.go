package upgrade

import (
	"context"
	"fmt"
	"slices"

	"github.com/cutover/cutover/nodes"
)

// reverify checks again, after the drain (which may have taken hours), that the online nodes
// are the ones the run started with and that each still has the target installed.
type reverify struct{}

func (reverify) Name() string { return "reverify" }

func (reverify) Where() Where { return OnAll }

func (reverify) Run(ctx context.Context, r *Run) error {
	if cmd := r.Config.Cluster.NodesCommand; cmd != "" {
		inv, err := nodes.LoadInventory(ctx, r.Config.Cluster.Master, nil, cmd)
		if err != nil {
			return fmt.Errorf("node list: %w", err)
		}
		if !slices.Equal(names(inv.Online()), names(r.Online)) {
			return fmt.Errorf("the online nodes changed during the run: were %v, are %v", names(r.Online), names(inv.Online()))
		}
	}
	return checkNodes(ctx, r, r.Online)
}

func names(list []nodes.Node) []string {
	out := make([]string, len(list))
	for i, n := range list {
		out[i] = n.Name
	}
	return out
}
