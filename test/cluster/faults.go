package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// probeSSH are the OpenSSH client options of the master's reachability probe: strict host-key
// checking, no prompts, and a short connect timeout so a dead node fails the probe quickly.
var probeSSH = []string{
	"-o", "BatchMode=yes",
	"-o", "StrictHostKeyChecking=yes",
	"-o", "ConnectTimeout=2",
	"-o", "LogLevel=ERROR",
}

// WaitSSH returns when node's sshd answers: the master logs in to it with its key and strict
// host-key checking (for the master itself, another running node reads its host key). Without a
// deadline in ctx it waits at most a minute.
func (c *Cluster) WaitSSH(ctx context.Context, node string) error {
	n, err := c.Node(node)
	if err != nil {
		return err
	}
	ctx, cancel := withDefaultTimeout(ctx, time.Minute)
	defer cancel()
	var poll Poll
	for {
		last := c.probe(ctx, n)
		if last == nil {
			return nil
		}
		if err := poll.WaitContext(ctx); err != nil {
			return fmt.Errorf("%s: wait for sshd: %w (last try: %v)", node, err, last)
		}
	}
}

// probe tries once to reach n's sshd.
func (c *Cluster) probe(ctx context.Context, n Node) error {
	from, err := c.prober(ctx, n)
	if err != nil {
		return err
	}
	if from == c.Master {
		argv := append(append([]string{"ssh"}, probeSSH...), n.Name, "hostname")
		res, err := c.Exec(ctx, from, argv...)
		if err != nil {
			return err
		}
		if err := res.Err(); err != nil {
			return fmt.Errorf("ssh from %s: %w", from, err)
		}
		if got := strings.TrimSpace(res.Stdout); got != n.Name {
			return fmt.Errorf("ssh from %s: hostname = %q, want %q", from, got, n.Name)
		}
		return nil
	}
	res, err := c.Exec(ctx, from, "ssh-keyscan", "-T", "2", "-t", "ed25519", n.Address)
	if err != nil {
		return err
	}
	if !strings.Contains(res.Stdout, "ssh-ed25519") {
		return fmt.Errorf("ssh-keyscan from %s: no host key: %s", from, lastLine(res.Stderr))
	}
	return nil
}

// prober chooses the node that probes n: the master if it runs and is not n, else another
// running node, else n itself.
func (c *Cluster) prober(ctx context.Context, n Node) (string, error) {
	candidates := []Node{}
	if master, err := c.Node(c.Master); err == nil && master.Name != n.Name {
		candidates = append(candidates, master)
	}
	for _, o := range c.Nodes {
		if o.Name != n.Name && o.Name != c.Master {
			candidates = append(candidates, o)
		}
	}
	for _, o := range candidates {
		up, err := c.running(ctx, o)
		if err != nil {
			return "", err
		}
		if up {
			return o.Name, nil
		}
	}
	return n.Name, nil
}

// Reboot hard-reboots node: kills it and starts it again, which runs its @reboot cron lines and
// boot hooks. It returns when sshd answers again.
func (c *Cluster) Reboot(ctx context.Context, node string) error {
	t := time.Now()
	n, err := c.Node(node)
	if err != nil {
		return err
	}
	if err := c.kill(ctx, n); err != nil {
		return err
	}
	if err := c.boot(ctx, n); err != nil {
		return err
	}
	c.logf("cluster %s: %s rebooted, sshd answers, in %s", c.Name, node, since(t))
	return nil
}

// Crash kills node at once, as a kernel panic would: peers see their connections drop. The node
// stays down until [Cluster.PowerOn].
func (c *Cluster) Crash(ctx context.Context, node string) error {
	t := time.Now()
	n, err := c.Node(node)
	if err != nil {
		return err
	}
	if err := c.kill(ctx, n); err != nil {
		return err
	}
	c.logf("cluster %s: %s crashed in %s", c.Name, node, since(t))
	return nil
}

// PowerOff cuts node's network link first, then kills it, as a power cut would: peers hear
// nothing more, and their connections hang until a keepalive or timeout notices. The node stays
// down until [Cluster.PowerOn].
func (c *Cluster) PowerOff(ctx context.Context, node string) error {
	t := time.Now()
	n, err := c.Node(node)
	if err != nil {
		return err
	}
	up, err := c.running(ctx, n)
	if err != nil {
		return err
	}
	if up {
		if err := c.setLink(ctx, n, false); err != nil {
			return err
		}
	}
	if err := c.kill(ctx, n); err != nil {
		return err
	}
	c.logf("cluster %s: %s powered off in %s", c.Name, node, since(t))
	return nil
}

// PowerOn starts node again and returns when its sshd answers. A running node is left alone.
func (c *Cluster) PowerOn(ctx context.Context, node string) error {
	t := time.Now()
	n, err := c.Node(node)
	if err != nil {
		return err
	}
	if err := c.boot(ctx, n); err != nil {
		return err
	}
	c.logf("cluster %s: %s powered on, sshd answers, in %s", c.Name, node, since(t))
	return nil
}

// boot starts n's container and waits for its sshd.
func (c *Cluster) boot(ctx context.Context, n Node) error {
	if _, err := docker(ctx, nil, "start", n.Container); err != nil {
		return fmt.Errorf("%s: start: %w", n.Name, err)
	}
	return c.WaitSSH(ctx, n.Name)
}

// Cut takes node's host-side network link down: the node keeps running but nothing reaches it
// and it reaches nothing, until [Cluster.Heal].
func (c *Cluster) Cut(ctx context.Context, node string) error {
	t := time.Now()
	n, err := c.Node(node)
	if err != nil {
		return err
	}
	if err := c.setLink(ctx, n, false); err != nil {
		return err
	}
	c.logf("cluster %s: %s cut off in %s", c.Name, node, since(t))
	return nil
}

// Heal brings node's network link up again and returns when the node is reachable (from the
// master, or for the master from another node).
func (c *Cluster) Heal(ctx context.Context, node string) error {
	t := time.Now()
	n, err := c.Node(node)
	if err != nil {
		return err
	}
	if err := c.setLink(ctx, n, true); err != nil {
		return err
	}
	if err := c.WaitSSH(ctx, node); err != nil {
		return err
	}
	c.logf("cluster %s: %s healed, reachable, in %s", c.Name, node, since(t))
	return nil
}

// kill stops n's container at once and returns when it is down. A stopped node is no error.
func (c *Cluster) kill(ctx context.Context, n Node) error {
	up, err := c.running(ctx, n)
	if err != nil {
		return err
	}
	if up {
		if _, err := docker(ctx, nil, "kill", n.Container); err != nil {
			return fmt.Errorf("%s: kill: %w", n.Name, err)
		}
	}
	if _, err := docker(ctx, nil, "wait", n.Container); err != nil {
		return fmt.Errorf("%s: wait until down: %w", n.Name, err)
	}
	return nil
}

// setLink takes n's host-side veth up or down.
func (c *Cluster) setLink(ctx context.Context, n Node, up bool) error {
	veth, err := c.hostVeth(ctx, n)
	if err != nil {
		return err
	}
	state := "down"
	if up {
		state = "up"
	}
	ip, err := ipCommand()
	if err != nil {
		return fmt.Errorf("%s: link %s: %w", n.Name, state, err)
	}
	if out, err := exec.CommandContext(ctx, ip, "link", "set", "dev", veth, state).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: link %s: ip link set %s: %w: %s", n.Name, state, veth, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// hostVeth returns the name of the host's end of n's eth0.
func (c *Cluster) hostVeth(ctx context.Context, n Node) (string, error) {
	res, err := c.Exec(ctx, n.Name, "cat", "/sys/class/net/eth0/iflink")
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		return "", fmt.Errorf("%s: read eth0's peer index: %w", n.Name, err)
	}
	index, err := strconv.Atoi(strings.TrimSpace(res.Stdout))
	if err != nil {
		return "", fmt.Errorf("%s: eth0's peer index %q: %w", n.Name, strings.TrimSpace(res.Stdout), err)
	}
	ip, err := ipCommand()
	if err != nil {
		return "", fmt.Errorf("%s: find host link: %w", n.Name, err)
	}
	out, err := exec.CommandContext(ctx, ip, "-o", "link").Output()
	if err != nil {
		return "", fmt.Errorf("%s: find host link: ip -o link: %w", n.Name, err)
	}
	veth, err := parseVeth(string(out), index)
	if err != nil {
		return "", fmt.Errorf("%s: find host link: %w", n.Name, err)
	}
	return veth, nil
}

// parseVeth returns the interface with the given index from the output of `ip -o link`, whose
// lines read "23: veth1a2b3c@if22: <...> ...".
func parseVeth(ipLink string, index int) (string, error) {
	for _, line := range strings.Split(ipLink, "\n") {
		num, rest, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(num) != strconv.Itoa(index) {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			break
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(fields[0], ":"), "@")
		if name == "" {
			break
		}
		return name, nil
	}
	return "", fmt.Errorf("no host interface with index %d", index)
}

// ipCommand returns the path of iproute2's ip.
func ipCommand() (string, error) {
	if path, err := exec.LookPath("ip"); err == nil {
		return path, nil
	}
	for _, path := range []string{"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"} {
		if fi, err := os.Stat(path); err == nil && !fi.IsDir() {
			return path, nil
		}
	}
	return "", errors.New("iproute2's ip is not installed (run test/setup.sh)")
}
