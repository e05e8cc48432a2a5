// Command clusterctl starts, breaks and removes a cutover test cluster by hand: the same
// containers the end-to-end tests use (package cluster), for trying cutover out and for
// reproducing a failure.
//
//	clusterctl [-name NAME] up [-nodes N] [-cutover FILE]
//	clusterctl [-name NAME] down
//	clusterctl [-name NAME] status
//	clusterctl [-name NAME] reboot|crash|poweroff|poweron|cut|heal NODE
//	clusterctl [-name NAME] exec NODE SCRIPT
//
// NAME defaults to $CUTOVER_CLUSTER, then cutover-demo. Every command prints what it did; exec
// prints the script's output and exits with its exit code.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cutover/cutover/test/cluster"
)

const usage = `usage:
  clusterctl [-name NAME] up [-nodes N] [-cutover FILE]   start a cluster (removes an old one of that name)
  clusterctl [-name NAME] down                             remove it
  clusterctl [-name NAME] status                           list its nodes and whether they run
  clusterctl [-name NAME] reboot NODE                      kill and start NODE again
  clusterctl [-name NAME] crash NODE                       kill NODE; it stays down until poweron
  clusterctl [-name NAME] poweroff NODE                    cut NODE's link, then kill it
  clusterctl [-name NAME] poweron NODE                     start NODE; returns when sshd answers
  clusterctl [-name NAME] cut NODE                         take NODE's link down (it keeps running)
  clusterctl [-name NAME] heal NODE                        bring NODE's link up again
  clusterctl [-name NAME] exec NODE SCRIPT                 run SCRIPT with sh -c on NODE
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one clusterctl command and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "clusterctl: %v\n", err)
		return 1
	}
	flags := flag.NewFlagSet("clusterctl", flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.Usage = func() { fmt.Fprint(stderr, usage) }
	name := os.Getenv("CUTOVER_CLUSTER")
	if name == "" {
		name = "cutover-demo"
	}
	flags.StringVar(&name, "name", name, "the cluster's name")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	args = flags.Args()
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, args := args[0], args[1:]
	logf := func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) }

	switch cmd {
	case "up":
		up := flag.NewFlagSet("up", flag.ContinueOnError)
		up.SetOutput(stderr)
		nodes := up.Int("nodes", cluster.DefaultNodes, "number of nodes, the master included")
		bin := up.String("cutover", "", "cutover binary for the master (default: build ./cmd/cutover)")
		if err := up.Parse(args); err != nil || up.NArg() != 0 {
			fmt.Fprint(stderr, usage)
			return 2
		}
		c, err := cluster.Start(ctx, cluster.Options{Name: name, Nodes: *nodes, Cutover: *bin, Logf: logf})
		if err != nil {
			return fail(err)
		}
		c.Detach()
		printNodes(ctx, stdout, c)
		return 0
	case "down":
		if len(args) != 0 {
			fmt.Fprint(stderr, usage)
			return 2
		}
		c, err := cluster.Attach(ctx, name)
		if cluster.IsNotFound(err) {
			fmt.Fprintf(stdout, "cluster %s: not running\n", name)
			return 0
		}
		if err != nil {
			return fail(err)
		}
		if err := c.Down(ctx); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "cluster %s: removed %d nodes and the network\n", name, len(c.Nodes))
		return 0
	case "status":
		c, err := cluster.Attach(ctx, name)
		if err != nil {
			return fail(err)
		}
		printNodes(ctx, stdout, c)
		return 0
	case "exec":
		if len(args) != 2 {
			fmt.Fprint(stderr, usage)
			return 2
		}
		c, err := cluster.Attach(ctx, name)
		if err != nil {
			return fail(err)
		}
		res, err := c.Shell(ctx, args[0], args[1])
		if err != nil {
			return fail(err)
		}
		fmt.Fprint(stdout, res.Stdout)
		fmt.Fprint(stderr, res.Stderr)
		return res.ExitCode
	}

	faults := map[string]func(*cluster.Cluster, context.Context, string) error{
		"reboot":   (*cluster.Cluster).Reboot,
		"crash":    (*cluster.Cluster).Crash,
		"poweroff": (*cluster.Cluster).PowerOff,
		"poweron":  (*cluster.Cluster).PowerOn,
		"cut":      (*cluster.Cluster).Cut,
		"heal":     (*cluster.Cluster).Heal,
	}
	fault, ok := faults[cmd]
	if !ok || len(args) != 1 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	c, err := cluster.Attach(ctx, name)
	if err != nil {
		return fail(err)
	}
	start := time.Now()
	if err := fault(c, ctx, args[0]); err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "cluster %s: %s %s done in %s\n", name, cmd, args[0], time.Since(start).Round(10*time.Millisecond))
	return 0
}

// printNodes lists the nodes of c with their addresses and whether they answer.
func printNodes(ctx context.Context, w io.Writer, c *cluster.Cluster) {
	fmt.Fprintf(w, "cluster %s on %s, master %s:\n", c.Name, c.Subnet, c.Master)
	for _, n := range c.Nodes {
		state := "up"
		res, err := c.Exec(ctx, n.Name, "true")
		switch {
		case err != nil:
			state = "down"
		case res.ExitCode != 0:
			state = "unhealthy: " + res.Err().Error()
		}
		fmt.Fprintf(w, "  %-8s %-15s %-24s %s\n", n.Name, n.Address, n.Container, state)
	}
}
