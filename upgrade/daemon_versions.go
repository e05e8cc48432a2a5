package upgrade

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/nodes"
)

// No daemon runs on the wrong version, checked, not assumed. A node's init system may start
// the daemons while a run goes on (the node rebooted, or lost power, between the stop and the
// start), and a start command that finds a daemon running leaves it alone: the daemon then
// runs the version the node booted with, under the new links and the new config. So whenever
// cutover starts a node's daemons it then looks at the node's processes: every process whose
// executable lies in one of the application's version trees (<libdir>/<app>/*) other than the
// one the node's lib link names is a daemon of the wrong version. The node's daemons are then
// stopped, what still runs of the wrong version is killed, and they are started again; a node
// where one still runs after that is a failed node. The same check runs on every node before
// a run may end done. Each node's boot identity is read when its daemons stop: a node that
// booted since is stopped again, its links switched again to what the run switched them to,
// its ensure-dirs run again, before its daemons start.

// A node's boot identity is the kernel's identity of the current boot and the start time of
// the node's process 1: the first changes when a machine boots, the second when a container
// (which shares its host's kernel) starts again.
const (
	bootIDPath   = "/proc/sys/kernel/random/boot_id"
	initStatPath = "/proc/1/stat"
)

// factBootPrefix keys the journal's fact of each node's boot identity when the run first
// stopped its daemons: `cutover status` names the nodes that booted since.
const factBootPrefix = "boot."

// nodeProcesses is what a node's process listing says.
type nodeProcesses struct {
	boot string // the node's boot identity; "" when it could not be read
	judged
}

// inspectProcesses lists node's processes (procScript) and judges its daemons. It is a
// probe: it changes nothing, so it is logged but is no crash point.
func (r *Run) inspectProcesses(ctx context.Context, c Conn, node string) (nodeProcesses, error) {
	lib, share := r.Layout.Bases()
	argv := append([]string{"sh", "-c", procScript, "cutover-check", lib, share, r.Layout.LibLink(), r.Layout.ShareLink(),
		strings.Join(r.Config.Daemons.Users, ",")}, r.Config.Daemons.PidFiles...)
	var res nodes.Result
	var err error
	if lc, ok := c.(*loggedConn); ok {
		res, err = lc.probe(ctx, argv...)
	} else {
		res, err = c.RunShell(ctx, nodes.QuoteArgs(argv))
	}
	if err != nil {
		return nodeProcesses{}, fmt.Errorf("%s: looking for daemons of another version: %w", node, err)
	}
	l, err := parseProcListing(res.Stdout)
	if err != nil {
		return nodeProcesses{}, onNode(node, fmt.Errorf("looking for daemons of another version: %w", err))
	}
	l.pidGlobs = len(r.Config.Daemons.PidFiles) > 0
	since := r.perNode.stopRef(node)
	return nodeProcesses{boot: l.boot, judged: judge(l, lib, share, r.Layout.IsVersionDir, since)}, nil
}

// readBoot reads node's boot identity through c; "" when it cannot be read (a node without
// Linux's /proc), which leaves the node's reboots unnoticed but still checked by its
// processes. What could not be read is written to log.
func readBoot(c Conn, node string, log *runLog) string {
	boot, err := nodeBoot(c)
	if err != nil {
		log.Printf("%s: boot identity: %v", node, err)
	}
	return boot
}

// nodeBoot reads the boot identity of the node c reaches; the error says what could not be
// read, and the identity is made of what could.
func nodeBoot(c Conn) (string, error) {
	id, err1 := c.ReadFile(bootIDPath)
	stat, err2 := c.ReadFile(initStatPath)
	return nodes.BootIdentity(id, stat), errors.Join(err1, err2)
}

// stoppedAt records the boot identity node had when its daemons were stopped; the first one
// of the run is journaled (as the stage ends) for `cutover status`.
func (r *Run) stoppedAt(node, boot string) {
	if boot != "" {
		r.Remember(factBootPrefix+node, boot)
	}
	r.perNode.bootAtStop(node, boot)
}

// settleDaemons runs after node's daemons were started: when the node rebooted since they were
// stopped, or a daemon of another version runs, it stops the daemons, redoes the node's switch
// and ensure-dirs after a reboot, lists the processes again and ends what still runs of another
// version (by pid, checked again on the node), and starts the daemons again, once. A node where a daemon of another
// version still runs after that fails. Other users' processes of an old tree are reported and
// left alone.
func (r *Run) settleDaemons(ctx context.Context, c Conn, node string) error {
	p, err := r.inspectProcesses(ctx, c, node)
	if err != nil {
		return err
	}
	if len(p.others) > 0 {
		r.Warn("%s: processes of other users run from another version's tree (left alone): %s", node, strings.Join(p.others, ", "))
	}
	boot := r.perNode.rebooted(node, p.boot)
	if !boot && len(p.old) == 0 {
		return nil
	}
	if boot {
		r.Warn("%s: the node booted since its daemons were stopped: stopping them again and redoing its steps", node)
	} else {
		r.Warn("%s: daemons of another version run (%s): stopping and starting them again", node, daemonList(p.old))
	}
	if _, err := r.daemonCommand(ctx, c, node, false); err != nil {
		return err
	}
	r.stoppedAt(node, p.boot)
	if boot {
		if version, ok := r.perNode.switchedVersion(node); ok {
			v, err := layout.ParseVersion(version)
			if err == nil {
				err = r.Layout.Switch(ctx, c, v)
			}
			if err != nil {
				return onNode(node, fmt.Errorf("switch to %s again after a reboot: %w", version, err))
			}
		}
		if cmd := r.Config.Commands.EnsureDirs; cmd != "" {
			if _, err := c.RunShell(ctx, r.expand(cmd, node)); err != nil {
				return onNode(node, fmt.Errorf("ensure-dirs again after a reboot: %w", err))
			}
		}
	}
	// Listed again after the stop: what survived it (a daemon the first start started
	// included) is ended, by the stop's time as much as by its paths.
	stopped, err := r.inspectProcesses(ctx, c, node)
	if err != nil {
		return err
	}
	if len(stopped.old) > 0 {
		if _, err := c.RunShell(ctx, killLine(stopped)); err != nil {
			return onNode(node, fmt.Errorf("ending the daemons of another version: %w", err))
		}
	}
	if _, err := r.daemonCommand(ctx, c, node, true); err != nil {
		return err
	}
	after, err := r.inspectProcesses(ctx, c, node)
	if err != nil {
		return err
	}
	if len(after.old) > 0 {
		return onNode(node, fmt.Errorf("daemons of another version still run after a stop and a start: %s", daemonList(after.old)))
	}
	return nil
}

// killLine is the command that ends the old daemons of p: killDaemonsScript with the node's
// boot id and each daemon's pid and start time, all of them checked on the master.
func killLine(p nodeProcesses) string {
	id, _, _ := strings.Cut(p.boot, "/")
	args := []string{"sh", "-c", killDaemonsScript, "cutover-kill", id}
	for _, d := range p.old {
		args = append(args, strconv.Itoa(d.pid), strconv.FormatUint(d.start, 10))
	}
	return nodes.QuoteArgs(args)
}

// daemonList names daemons for a message.
func daemonList(list []oldDaemon) string {
	s := make([]string, len(list))
	for i, d := range list {
		s[i] = d.String()
	}
	return strings.Join(s, ", ")
}

// checkDaemons runs settleDaemons on every node of list: the last check before a run may end
// done.
func (r *Run) checkDaemons(ctx context.Context, list []nodes.Node) error {
	if r.Config.Commands.DaemonsStart == "" {
		return nil
	}
	return r.OnNodes(ctx, list, false, func(ctx context.Context, c Conn, n nodes.Node) error {
		return r.settleDaemons(ctx, c, n.Name)
	})
}
