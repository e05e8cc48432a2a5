package upgrade

import (
	"context"
	"sync"

	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/timeline"
)

// switchLinks points /etc/<app>/{lib,share} at the target's trees on every online node, the
// master last; each link is replaced atomically and read back. A same-minor switch changes no
// config, so the switch is its point of no return.
type switchLinks struct{}

func (switchLinks) Name() string { return "switch" }

// Drawn makes the stage a bar of the timeline.
func (switchLinks) Drawn() timeline.Kind { return timeline.Switch }

func (switchLinks) Where() Where { return OnAll }

func (switchLinks) PONR(d Direction) bool { return d == Same }

// RestartAt makes a run resumed past its point of no return start here (after stopping the
// daemons everywhere): every stage from the switch on checks the real state first.
func (switchLinks) RestartAt(_ Direction, past bool) bool { return past }

func (switchLinks) Run(ctx context.Context, r *Run) error {
	return switchAll(ctx, r, r.ToVersion)
}

// Undo switches every node back to the version the run started from (upgrades only: a
// downgrade switches after its point of no return).
func (switchLinks) Undo(ctx context.Context, r *Run) error {
	if r.Direction != Up {
		return nil
	}
	return switchAll(ctx, r, r.FromVersion)
}

func switchAll(ctx context.Context, r *Run, v layout.Version) error {
	want, version := r.Layout.DirOf(v), v.String()
	var mu sync.Mutex
	already := 0
	err := r.OnNodes(ctx, r.Online, true, func(ctx context.Context, c Conn, n nodes.Node) error {
		// A resumed run checks each node's links against the journal: the world wins.
		if live, err := r.Layout.Live(ctx, c); err == nil && live == want {
			mu.Lock()
			already++
			mu.Unlock()
		} else if err == nil && r.Resumed && r.history.doneBefore("switch") && version == r.To {
			r.Warn("%s: the journal records the switch as done, but its links point at %s: switching it again", n.Name, live)
		}
		err := r.switchNode(ctx, c, n.Name, version)
		r.perNode.setReady(n.Name, "switch", err == nil)
		return onNode(n.Name, err)
	})
	if already > 0 {
		r.Note("%d of %d already at %s", already, len(r.Online), version)
	}
	return err
}

// switchNode points node's links at version, one of the run's two as the run names it, and
// remembers it, so that a reboot of the node before its daemons start has its switch redone.
func (r *Run) switchNode(ctx context.Context, c Conn, node, version string) error {
	v, err := layout.ParseVersion(version)
	if err != nil {
		return err
	}
	if err := r.Layout.Switch(ctx, c, v); err != nil {
		return err
	}
	r.perNode.switchedTo(node, version, r.Layout.DirOf(v))
	return nil
}
