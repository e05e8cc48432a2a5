package upgrade

import (
	"context"

	"github.com/cutover/cutover/nodes"
)

// switchLinks points /etc/<app>/{lib,share} at the target's trees on every online node, the
// master last; each link is replaced atomically and read back. A same-minor switch changes no
// config, so the switch is its point of no return.
type switchLinks struct{}

func (switchLinks) Name() string { return "switch" }

func (switchLinks) PONR(r *Run) bool { return r.Direction == Same }

func (switchLinks) Run(ctx context.Context, r *Run) error {
	return switchAll(ctx, r, r.To)
}

// Undo switches every node back to the version the run started from (upgrades only: a
// downgrade switches after its point of no return).
func (switchLinks) Undo(ctx context.Context, r *Run) error {
	if r.Direction != Up {
		return nil
	}
	return switchAll(ctx, r, r.From)
}

func switchAll(ctx context.Context, r *Run, version string) error {
	return r.OnNodes(ctx, r.Online, true, func(ctx context.Context, c Conn, n nodes.Node) error {
		if err := r.Layout.Switch(ctx, c, version); err != nil {
			return onNode(n.Name, err)
		}
		return nil
	})
}
