package nodes_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/nodes/sshdtest"
)

// The benchmarks measure rounds of `true` over real sshd servers:
//
//	go test -run '^$' -bench . -benchtime 20x ./nodes/

// sshNodes lists the cluster's servers (not the local master).
func sshNodes(c *sshdtest.Cluster) []nodes.Node {
	return clusterNodes(c)[1:]
}

// round runs `true` on every node in list over the pool, all at once.
func round(ctx context.Context, p *nodes.Pool, list []nodes.Node) error {
	_, err := nodes.Each(ctx, list, len(list), "", func(ctx context.Context, n nodes.Node) error {
		c, err := p.Conn(ctx, n.Name)
		if err != nil {
			return err
		}
		_, err = c.Run(ctx, "true")
		return err
	})
	return err
}

// BenchmarkRoundReused runs rounds over one pool: connections are dialed
// before the timer starts and reused by every round.
func BenchmarkRoundReused(b *testing.B) {
	for _, n := range []int{8, 32} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			c := sshdtest.Start(b, n)
			p := newPool(b, c, nil)
			list := sshNodes(c)
			ctx := context.Background()
			if err := round(ctx, p, list); err != nil { // dial and warm up
				b.Fatal(err)
			}
			for b.Loop() {
				if err := round(ctx, p, list); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/round")
		})
	}
}

// BenchmarkRoundNewConn runs rounds that each dial every node afresh, run
// the command and close the connection.
func BenchmarkRoundNewConn(b *testing.B) {
	for _, n := range []int{8, 32} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			c := sshdtest.Start(b, n)
			inv, err := nodes.NewInventory(localMaster, clusterNodes(c))
			if err != nil {
				b.Fatal(err)
			}
			list := sshNodes(c)
			ctx := context.Background()
			for b.Loop() {
				p, err := nodes.NewPool(inv, sshConfig(c))
				if err != nil {
					b.Fatal(err)
				}
				if err := round(ctx, p, list); err != nil {
					b.Fatal(err)
				}
				p.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/round")
		})
	}
}

// BenchmarkCommandReused runs single commands one after another on one
// reused connection and reports their median latency and the CPU time the
// whole host spent per command (cutover, sshd, the shells; meaningful on an
// otherwise idle host): a configured command line (RunShell, as the
// application's commands run), a program (Run of /bin/true) and one of
// cutover's scripts (Run of sh -c, as the checks run), each in the connection's
// command shell and in a session of its own.
func BenchmarkCommandReused(b *testing.B) {
	c := sshdtest.Start(b, 1)
	p := newPool(b, c, nil)
	plain := newPool(b, c, nil)
	nodes.NoCommandShell(plain)
	ctx := context.Background()
	for _, k := range []struct {
		name string
		run  func(*nodes.Conn) (nodes.Result, error)
	}{
		{"shell", func(node *nodes.Conn) (nodes.Result, error) { return node.RunShell(ctx, "true") }},
		{"program", func(node *nodes.Conn) (nodes.Result, error) { return node.Run(ctx, "true") }},
		{"script", func(node *nodes.Conn) (nodes.Result, error) { return node.Run(ctx, "sh", "-c", "true") }},
	} {
		// via=shell runs the commands in the connection's command shell, via=session gives each
		// a session of its own (as on a node without bash).
		for _, via := range []string{"shell", "session"} {
			node := conn(b, p, "node1")
			if via == "session" {
				node = conn(b, plain, "node1")
			}
			b.Run("kind="+k.name+"/via="+via, func(b *testing.B) {
				benchCommand(b, func() (nodes.Result, error) { return k.run(node) })
			})
		}
	}
}

// benchCommand runs run once per iteration and reports its median latency and the host's CPU
// per command.
func benchCommand(b *testing.B, run func() (nodes.Result, error)) {
	if _, err := run(); err != nil { // the first session (or the shell's start) is slower
		b.Fatal(err)
	}
	var took []time.Duration
	busy := hostBusy(b)
	for b.Loop() {
		start := time.Now()
		if _, err := run(); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	busy = hostBusy(b) - busy
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "ms/median")
	b.ReportMetric(busy.Seconds()*1000/float64(len(took)), "cpu-ms/cmd")
}

// hostBusy returns the CPU time the host has spent outside idle and I/O wait
// since it booted, from /proc/stat (in clock ticks of 1/100 s).
func hostBusy(b *testing.B) time.Duration {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	var ticks int64
	for i, f := range strings.Fields(line)[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			b.Fatalf("/proc/stat: %q: %v", line, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// BenchmarkDial32 dials 32 nodes at once (handshake and authentication, no
// command) and closes the connections again.
func BenchmarkDial32(b *testing.B) {
	c := sshdtest.Start(b, 32)
	inv, err := nodes.NewInventory(localMaster, clusterNodes(c))
	if err != nil {
		b.Fatal(err)
	}
	list := sshNodes(c)
	ctx := context.Background()
	for b.Loop() {
		p, err := nodes.NewPool(inv, sshConfig(c))
		if err != nil {
			b.Fatal(err)
		}
		_, err = nodes.Each(ctx, list, len(list), "", func(ctx context.Context, n nodes.Node) error {
			_, err := p.Conn(ctx, n.Name)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		p.Close()
	}
}

// BenchmarkRoundPdsh is the baseline: the same rounds run by pdsh with the
// OpenSSH client, which connects anew for every command.
func BenchmarkRoundPdsh(b *testing.B) {
	pdsh, err := exec.LookPath("pdsh")
	if err != nil {
		if os.Getenv("CI") == "true" {
			b.Fatal("pdsh is not installed (run test/setup.sh)")
		}
		b.Skip("pdsh is not installed (run test/setup.sh)")
	}
	for _, n := range []int{8, 32} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			c := sshdtest.Start(b, n)
			// Each server gets a Host alias carrying its port.
			var cfg, hosts strings.Builder
			for i, s := range c.Servers {
				fmt.Fprintf(&cfg, "Host %s\n  HostName %s\n  Port %d\n", s.Name, s.Addr, s.Port)
				if i > 0 {
					hosts.WriteString(",")
				}
				hosts.WriteString(s.Name)
			}
			fmt.Fprintf(&cfg, "Host *\n  User %s\n  IdentityFile %s\n  IdentitiesOnly yes\n  UserKnownHostsFile %s\n"+
				"  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n  BatchMode yes\n", c.User, c.IdentityFile, c.KnownHosts)
			cfgFile := filepath.Join(b.TempDir(), "ssh_config")
			if err := os.WriteFile(cfgFile, []byte(cfg.String()), 0o600); err != nil {
				b.Fatal(err)
			}
			run := func() {
				cmd := exec.Command(pdsh, "-S", "-R", "ssh", "-f", fmt.Sprint(n), "-w", hosts.String(), "true")
				cmd.Env = append(os.Environ(), "PDSH_SSH_ARGS=-F "+cfgFile+" %h")
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("pdsh: %v: %s", err, out)
				}
			}
			for b.Loop() {
				run()
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/round")
		})
	}
}
