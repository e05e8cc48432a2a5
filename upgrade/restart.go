package upgrade

import (
	"context"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/timeline"
)

// restart stops and starts the daemons on every online node, so that they read the config
// the application's redist_conf command redistributed after they started. Each node is
// stopped and started on its own: a node that cannot be reached does not leave the others
// stopped. When cutover copied the config itself (no redist_conf), it did so before the
// daemons started, and a restart would only cost time: the stage is skipped. With
// restart_watch, only the nodes where redist-conf changed a watched file are restarted
// (redistConf). It ends when the master's daemons answer.
type restart struct{}

func (restart) Name() string { return "restart" }

// Drawn makes the stage a bar of the timeline.
func (restart) Drawn() timeline.Kind { return timeline.Restart }

func (restart) Where() Where { return OnAll }

func (restart) Skip(r *Run) bool { return r.Config.Commands.RedistConf == "" }

func (restart) Run(ctx context.Context, r *Run) error {
	list := restartNodes(r, r.Online)
	if len(list) == 0 {
		r.Note("redist-conf changed nothing the daemons read: no restart")
		return nil
	}
	err := r.OnNodes(ctx, list, false, func(ctx context.Context, c Conn, n nodes.Node) error {
		if err := r.daemonsOn(ctx, c, n.Name, false); err != nil {
			return err
		}
		return r.daemonsOn(ctx, c, n.Name, true)
	})
	if err != nil {
		return err
	}
	return awaitDaemons(ctx, r)
}
