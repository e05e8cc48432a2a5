package upgrade

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/config"
)

// The daemons' stop and start on the nodes: the configured daemons_stop and daemons_start
// commands, each node's stop and start noted for the downtime window (downtime.go) and its
// boot at the stop, and after a start the check that no daemon of another version runs
// (daemon_versions.go).

// daemonsCommand is the daemons' start command (start true) or their stop command; "" for
// none.
func daemonsCommand(cfg *config.Config, start bool) string {
	if start {
		return cfg.Commands.DaemonsStart
	}
	return cfg.Commands.DaemonsStop
}

// daemons runs the daemons' stop (start false) or start command on every node of list and
// records the downtime window. A start runs the start command on every node first and only
// then checks each node that started for daemons of another version (settleDaemons): the
// window closes with the last start, not with the last check queued behind it when the
// cluster has more nodes than ssh.parallel.
func (r *Run) daemons(ctx context.Context, list []nodes.Node, start bool) error {
	if daemonsCommand(r.Config, start) == "" {
		return nil
	}
	if !start {
		return r.OnNodes(ctx, list, false, func(ctx context.Context, c Conn, n nodes.Node) error {
			return r.daemonsOn(ctx, c, n.Name, false)
		})
	}
	var mu sync.Mutex
	started := map[string]bool{}
	err := r.OnNodes(ctx, list, false, func(ctx context.Context, c Conn, n nodes.Node) error {
		if _, err := r.daemonCommand(ctx, c, n.Name, true); err != nil {
			return err
		}
		r.startedAt(n.Name)
		mu.Lock()
		started[n.Name] = true
		mu.Unlock()
		return nil
	})
	var check []nodes.Node
	for _, n := range list {
		if started[n.Name] {
			check = append(check, n)
		}
	}
	return errors.Join(err, r.checkDaemons(ctx, check))
}

// daemonsOn runs the daemons' stop or start command on one node and records the window. After
// a stop it records the node's boot identity, the one the stop ran in; after a start it checks
// that no daemon of another version runs and that the node did not boot meanwhile
// (settleDaemons).
func (r *Run) daemonsOn(ctx context.Context, c Conn, node string, start bool) error {
	if daemonsCommand(r.Config, start) == "" {
		return nil
	}
	if !start {
		r.stoppingAt(node)
	}
	res, err := r.daemonCommand(ctx, c, node, start)
	if err != nil {
		return err
	}
	if start {
		r.startedAt(node)
	}
	if !start {
		// A stop that ran in the node's command shell ran in the boot the shell knows: no read.
		boot := res.Boot
		if boot == "" {
			boot = readBoot(c, node, r.log)
		}
		r.stoppedAt(node, boot)
		return nil
	}
	return r.settleDaemons(ctx, c, node)
}

// daemonCommand runs the daemons' stop or start command on node without the checks of
// daemonsOn.
func (r *Run) daemonCommand(ctx context.Context, c Conn, node string, start bool) (nodes.Result, error) {
	command := daemonsCommand(r.Config, start)
	if command == "" {
		return nodes.Result{}, nil
	}
	if start {
		if why := r.perNode.notReadyWhy(node); why != "" {
			return nodes.Result{}, onNode(node, fmt.Errorf("its daemons were not started: %s, and they would run on what the node does not have; 'cutover upgrade --resume' redoes it", why))
		}
	}
	res, err := c.RunShell(ctx, r.expand(command, node))
	switch {
	case err != nil:
	case start:
		r.perNode.started(node, r.now())
	case res.Start > 0 && res.Boot != "" && nodes.ValidBoot(res.Boot):
		r.perNode.stoppedBy(node, startRef{boot: res.Boot, tick: res.Start})
	}
	return res, err
}
