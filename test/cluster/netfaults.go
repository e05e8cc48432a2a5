package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// The network faults below are made with iptables in the master's network namespace (entered
// from the host with nsenter), so they work where the kernel has no netem: packets the master
// sends are dropped, and TCP retransmits what was dropped once the rule is gone, which is
// what a network that holds packets does to a connection. Freeze and Thaw stop a node's
// processes without touching its network: its kernel still takes what arrives.

// Freeze stops every process of node (docker pause); its kernel still receives packets.
func (c *Cluster) Freeze(ctx context.Context, node string) error {
	n, err := c.Node(node)
	if err != nil {
		return err
	}
	if _, err := docker(ctx, nil, "pause", n.Container); err != nil {
		return fmt.Errorf("%s: freeze: %w", node, err)
	}
	c.logf("cluster %s: %s frozen", c.Name, node)
	return nil
}

// Thaw continues node's processes after Freeze.
func (c *Cluster) Thaw(ctx context.Context, node string) error {
	n, err := c.Node(node)
	if err != nil {
		return err
	}
	if _, err := docker(ctx, nil, "unpause", n.Container); err != nil {
		return fmt.Errorf("%s: thaw: %w", node, err)
	}
	c.logf("cluster %s: %s thawed", c.Name, node)
	return nil
}

// A Fault is a set of iptables rules in the master's network namespace; Lift removes them.
type Fault struct {
	c     *Cluster
	rules [][]string // each rule's match and target, as given to iptables -I OUTPUT
	Ports []int      // for a held connection: the master's ports of the connections held
}

// HoldConnections holds what the master sends on its established SSH connections to node:
// those packets are dropped until Lift, while new connections pass. It fails when the master
// has no such connection.
func (c *Cluster) HoldConnections(ctx context.Context, node string) (*Fault, error) {
	f, err := c.Connections(ctx, node)
	if err != nil {
		return nil, err
	}
	if len(f.Ports) == 0 {
		return nil, fmt.Errorf("%s: hold: the master has no SSH connection to it", node)
	}
	n, err := c.Node(node)
	if err != nil {
		return nil, err
	}
	for _, p := range f.Ports {
		f.rules = append(f.rules, []string{"-p", "tcp", "-d", n.Address, "--dport", "22", "--sport", strconv.Itoa(p), "-j", "DROP"})
	}
	if err := f.apply(ctx, "-I"); err != nil {
		return nil, fmt.Errorf("%s: hold: %w", node, err)
	}
	c.logf("cluster %s: the master's packets to %s held on ports %v", c.Name, node, f.Ports)
	return f, nil
}

// Connections returns the master's established SSH connections to node as a Fault without
// rules (its Lift does nothing), so that [Fault.Open] tells when they have all closed: what a
// cut or a hold kept back of them has been delivered or given up.
func (c *Cluster) Connections(ctx context.Context, node string) (*Fault, error) {
	n, err := c.Node(node)
	if err != nil {
		return nil, err
	}
	ports, err := c.sshPorts(ctx, n)
	if err != nil {
		return nil, err
	}
	return &Fault{c: c, Ports: ports}, nil
}

// CutOneWay drops every packet the master sends to node until Lift; what node sends still
// reaches the master.
func (c *Cluster) CutOneWay(ctx context.Context, node string) (*Fault, error) {
	n, err := c.Node(node)
	if err != nil {
		return nil, err
	}
	f := &Fault{c: c, rules: [][]string{{"-d", n.Address, "-j", "DROP"}}}
	if err := f.apply(ctx, "-I"); err != nil {
		return nil, fmt.Errorf("%s: one-way cut: %w", node, err)
	}
	c.logf("cluster %s: the master's packets to %s dropped", c.Name, node)
	return f, nil
}

// Lift removes the fault's rules.
func (f *Fault) Lift(ctx context.Context) error {
	if err := f.apply(ctx, "-D"); err != nil {
		return fmt.Errorf("lift: %w", err)
	}
	f.c.logf("cluster %s: fault lifted", f.c.Name)
	return nil
}

// Open reports whether any of a held connection's ports still has a connection on the master
// (in any state but TIME_WAIT): what the hold kept back has not all been delivered and closed.
func (f *Fault) Open(ctx context.Context, node string) (bool, error) {
	n, err := f.c.Node(node)
	if err != nil {
		return false, err
	}
	ports, err := f.c.sshPorts(ctx, n)
	if err != nil {
		return false, err
	}
	for _, p := range ports {
		for _, q := range f.Ports {
			if p == q {
				return true, nil
			}
		}
	}
	return false, nil
}

func (f *Fault) apply(ctx context.Context, op string) error {
	for _, r := range f.rules {
		if err := f.c.inMasterNetns(ctx, append([]string{"iptables", "-w", op, "OUTPUT"}, r...)...); err != nil {
			return err
		}
	}
	return nil
}

// inMasterNetns runs argv on the host in the master's network namespace.
func (c *Cluster) inMasterNetns(ctx context.Context, argv ...string) error {
	m, err := c.Node(c.Master)
	if err != nil {
		return err
	}
	pid, err := docker(ctx, nil, "inspect", "-f", "{{.State.Pid}}", m.Container)
	if err != nil {
		return fmt.Errorf("the master's pid: %w", err)
	}
	ctx, cancel := withDefaultTimeout(ctx, 30*time.Second)
	defer cancel()
	args := append([]string{"-t", strings.TrimSpace(pid), "-n", "--"}, argv...)
	if out, err := exec.CommandContext(ctx, "nsenter", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("nsenter %s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// sshPorts lists the master's local ports of its TCP connections to n's port 22 in any state
// but TIME_WAIT and LISTEN, from the master's /proc/net/tcp.
func (c *Cluster) sshPorts(ctx context.Context, n Node) ([]int, error) {
	data, err := c.ReadFile(ctx, c.Master, "/proc/net/tcp")
	if err != nil {
		return nil, err
	}
	return parseSSHPorts(string(data), n.Address)
}

// parseSSHPorts reads /proc/net/tcp's table for the local ports of connections to addr:22
// (states other than TIME_WAIT 06 and LISTEN 0A).
func parseSSHPorts(table, addr string) ([]int, error) {
	want, err := procAddr(addr, 22)
	if err != nil {
		return nil, err
	}
	var ports []int
	for _, line := range strings.Split(table, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 4 || f[2] != want || f[3] == "06" || f[3] == "0A" {
			continue
		}
		_, local, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		p, err := strconv.ParseUint(local, 16, 16)
		if err != nil {
			return nil, fmt.Errorf("/proc/net/tcp: local address %q: %w", f[1], err)
		}
		ports = append(ports, int(p))
	}
	return ports, nil
}

// procAddr renders an IPv4 address and port as /proc/net/tcp does (little-endian hex).
func procAddr(addr string, port int) (string, error) {
	parts := strings.Split(addr, ".")
	if len(parts) != 4 {
		return "", fmt.Errorf("%q is not an IPv4 address", addr)
	}
	var b [4]uint64
	for i, p := range parts {
		v, err := strconv.ParseUint(p, 10, 8)
		if err != nil {
			return "", fmt.Errorf("%q is not an IPv4 address", addr)
		}
		b[i] = v
	}
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", b[3], b[2], b[1], b[0], port), nil
}
