package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A slow, lossy network is made without netem, which this kind of kernel may lack: iptables'
// NFQUEUE target hands the master's SSH packets to and from the nodes to the program nfdelay
// (./nfdelay), run on the host in the master's network namespace, which gives each its verdict
// half the round trip later, or drops it. The rules have no --queue-bypass: while the program
// is not there, those packets are dropped rather than let through undelayed.

// RequireDelay is [Require] for a test that makes a [Cluster.Delay]: it also skips the test when
// this machine has no nsenter, no iptables or a kernel without nfnetlink_queue, or fails it when
// the environment variable CI is "true".
func RequireDelay(t testing.TB) {
	t.Helper()
	Require(t)
	if err := delayPrerequisites(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("delay: %v", err)
		}
		t.Skipf("delay: %v (with CI=true this is a failure)", err)
	}
}

// delayPrerequisites checks for nsenter, iptables and nfnetlink_queue, built in or loaded
// (/proc/net/netfilter/nfnetlink_queue) or a module the kernel can load when nfdelay binds.
func delayPrerequisites() error {
	for _, cmd := range []string{"nsenter", "iptables"} {
		if _, err := exec.LookPath(cmd); err != nil {
			return fmt.Errorf("%s is not installed", cmd)
		}
	}
	if _, err := os.Stat("/proc/net/netfilter/nfnetlink_queue"); err == nil {
		return nil
	}
	release, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return fmt.Errorf("the kernel's release: %w", err)
	}
	mods, _ := filepath.Glob("/lib/modules/" + strings.TrimSpace(string(release)) + "/kernel/net/netfilter/nfnetlink_queue.ko*")
	if len(mods) == 0 {
		return errors.New("the kernel has no nfnetlink_queue (NFQUEUE), which delays the packets")
	}
	return nil
}

// lastQueue numbers the netfilter queues of this process's delays; each has its own.
var lastQueue atomic.Uint32

// Delay makes the master's SSH connections to each of nodes (the master among them, when
// named) slow and lossy until Lift: each packet, either way, is held rtt/2, and a fraction
// loss of them is dropped, each way. It fails when the queue cannot be bound (no
// nfnetlink_queue) or the rules cannot be made.
func (c *Cluster) Delay(ctx context.Context, rtt time.Duration, loss float64, nodes ...string) (*Slowdown, error) {
	if rtt < 0 || loss < 0 || loss >= 1 || len(nodes) == 0 {
		return nil, fmt.Errorf("delay: a round trip of %s and a loss of %g on %d nodes: want a round trip of 0 or more, a loss from 0 to below 1, and a node", rtt, loss, len(nodes))
	}
	var addrs []string
	for _, name := range nodes {
		n, err := c.Node(name)
		if err != nil {
			return nil, err
		}
		addrs = append(addrs, n.Address)
	}
	queue := 1000 + int(lastQueue.Add(1)%60000)
	stop, err := c.startDelay(ctx, queue, rtt/2, loss)
	if err != nil {
		return nil, fmt.Errorf("delay %v: %w", nodes, err)
	}
	rules := delayRules(queue, addrs)
	apply := func(ctx context.Context, op string, rules [][]string) error {
		for _, r := range rules {
			if err := c.inMasterNetns(ctx, append([]string{"iptables", "-w", op}, r...)...); err != nil {
				return err
			}
		}
		return nil
	}
	for i := range rules {
		if err := apply(ctx, "-I", rules[i:i+1]); err != nil {
			err = errors.Join(err, apply(context.WithoutCancel(ctx), "-D", rules[:i]), stop(context.WithoutCancel(ctx)))
			return nil, fmt.Errorf("delay %v: %w", nodes, err)
		}
	}
	c.logf("cluster %s: the master's SSH packets to and from %v delayed %s each way, %g of them dropped (queue %d)",
		c.Name, nodes, rtt/2, loss, queue)
	return &Slowdown{c: c, lift: func(ctx context.Context) error {
		return errors.Join(apply(ctx, "-D", rules), stop(ctx))
	}}, nil
}

// A Slowdown is the delay and loss [Cluster.Delay] made; Lift ends it.
type Slowdown struct {
	c    *Cluster
	lift func(context.Context) error
}

// Lift removes the slowdown's rules and stops its nfdelay once it has released what it held.
func (s *Slowdown) Lift(ctx context.Context) error {
	if err := s.lift(ctx); err != nil {
		return fmt.Errorf("lift the delay: %w", err)
	}
	s.c.logf("cluster %s: delay lifted", s.c.Name)
	return nil
}

// delayRules are the iptables rules, chain first, that hand the master's packets to port 22 of
// each of addrs, and their answers, to queue. There is no --queue-bypass: with no program
// bound to the queue, the packets are dropped.
func delayRules(queue int, addrs []string) [][]string {
	q := strconv.Itoa(queue)
	var rules [][]string
	for _, a := range addrs {
		rules = append(rules,
			[]string{"OUTPUT", "-p", "tcp", "-d", a, "--dport", "22", "-j", "NFQUEUE", "--queue-num", q},
			[]string{"INPUT", "-p", "tcp", "-s", a, "--sport", "22", "-j", "NFQUEUE", "--queue-num", q})
	}
	return rules
}

// nfdelayArgs are nfdelay's arguments for a delay of each packet and a loss.
func nfdelayArgs(queue int, delay time.Duration, loss float64) []string {
	return []string{"-queue", strconv.Itoa(queue), "-delay", delay.String(), "-loss", strconv.FormatFloat(loss, 'g', -1, 64)}
}

// startDelay builds nfdelay, starts it in the master's network namespace on queue and returns
// once it has bound the queue. The returned function stops it: closing its input, it releases
// what it holds and exits.
func (c *Cluster) startDelay(ctx context.Context, queue int, delay time.Duration, loss float64) (stop func(context.Context) error, err error) {
	m, err := c.Node(c.Master)
	if err != nil {
		return nil, err
	}
	pid, err := docker(ctx, nil, "inspect", "-f", "{{.State.Pid}}", m.Container)
	if err != nil {
		return nil, fmt.Errorf("the master's pid: %w", err)
	}
	dir, err := os.MkdirTemp("", "cutover-nfdelay-")
	if err != nil {
		return nil, fmt.Errorf("build nfdelay: %w", err)
	}
	// The running program keeps its file: the directory goes as soon as it has started.
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "nfdelay")
	if err := buildNfdelay(ctx, bin); err != nil {
		return nil, err
	}
	args := append([]string{"-t", strings.TrimSpace(pid), "-n", "--", bin}, nfdelayArgs(queue, delay, loss)...)
	cmd := exec.Command("nsenter", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("nfdelay: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("nfdelay: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("nfdelay: %w", err)
	}
	exited := make(chan error, 1)
	ready := make(chan bool, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line == "ready\n"
		io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	stop = func(ctx context.Context) error {
		stdin.Close()
		ctx, cancel := withDefaultTimeout(ctx, delay+10*time.Second)
		defer cancel()
		select {
		case err := <-exited:
			if err != nil {
				return fmt.Errorf("nfdelay: %w: %s", err, strings.TrimSpace(stderr.String()))
			}
			return nil
		case <-ctx.Done():
			cmd.Process.Kill()
			return fmt.Errorf("nfdelay did not exit: %w", ctx.Err())
		}
	}
	wait, cancel := withDefaultTimeout(ctx, 30*time.Second)
	defer cancel()
	select {
	case ok := <-ready:
		if ok {
			return stop, nil
		}
	case <-wait.Done():
	}
	cmd.Process.Kill()
	<-exited
	return nil, fmt.Errorf("nfdelay on queue %d did not start: %s", queue, strings.TrimSpace(stderr.String()))
}

// buildNfdelay builds ./nfdelay of this module as bin (the build cache makes it quick after the
// first time).
func buildNfdelay(ctx context.Context, bin string) error {
	root, err := moduleRoot(ctx)
	if err != nil {
		return fmt.Errorf("build nfdelay: %w", err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./test/cluster/nfdelay")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build nfdelay: %w: %s", err, tail(string(msg), 8))
	}
	return nil
}
