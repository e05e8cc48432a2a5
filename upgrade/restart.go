package upgrade

import (
	"context"

	"github.com/cutover/cutover/nodes"
)

// restart stops and starts the daemons on every online node, so that they read the
// redistributed config. Each node is stopped and started on its own: a node that cannot be
// reached does not leave the others stopped.
type restart struct{}

func (restart) Name() string { return "restart" }

func (restart) Run(ctx context.Context, r *Run) error {
	cmds := r.Config.Commands
	return r.OnNodes(ctx, r.Online, false, func(ctx context.Context, c Conn, n nodes.Node) error {
		for _, command := range []string{cmds.DaemonsStop, cmds.DaemonsStart} {
			if command == "" {
				continue
			}
			if _, err := c.RunShell(ctx, r.expand(command, n.Name)); err != nil {
				return err
			}
		}
		return nil
	})
}
