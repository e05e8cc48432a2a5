// Command clusterctl starts, breaks and removes a cutover test cluster by hand: the same
// containers the end-to-end tests use (package cluster), for trying cutover out and for
// reproducing a failure.
//
//	clusterctl [-name NAME] up [-nodes N] [-live VERSION] [-package FILE] [-missing VERSIONS]
//	clusterctl [-name NAME] up -bare [-nodes N] [-package FILE]
//	clusterctl [-name NAME] release NODE VERSION PATH
//	clusterctl [-name NAME] down
//	clusterctl [-name NAME] status
//	clusterctl [-name NAME] reboot|crash|poweroff|poweron|cut|heal NODE
//	clusterctl [-name NAME] exec NODE SCRIPT
//	clusterctl [-name NAME] cp SRC NODE:PATH
//
// NAME defaults to $CUTOVER_CLUSTER, then cutover-demo. Every command prints what it did; exec
// prints the script's output and exits with its exit code.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/cutover/cutover/test/cluster"
	"github.com/cutover/cutover/test/demoapp"
)

const usage = `usage:
  clusterctl [-name NAME] up [-nodes N] [-live VERSION] [-package FILE] [-missing V,...]
                                                           start a cluster (removes an old one of that name)
                                                           without the demo versions V on any node
  clusterctl [-name NAME] up -bare [-nodes N] [-package FILE]
                                                           the same without the demo application: sshd,
                                                           keys, cron and cutover on the master only
  clusterctl [-name NAME] release NODE VERSION PATH        write the demo application's VERSION as a
                                                           release tarball to PATH on NODE
  clusterctl [-name NAME] down                             remove it
  clusterctl [-name NAME] status                           list its nodes and whether they run
  clusterctl [-name NAME] reboot NODE                      kill and start NODE again
  clusterctl [-name NAME] crash NODE                       kill NODE; it stays down until poweron
  clusterctl [-name NAME] poweroff NODE                    cut NODE's link, then kill it
  clusterctl [-name NAME] poweron NODE                     start NODE; returns when sshd answers
  clusterctl [-name NAME] cut NODE                         take NODE's link down (it keeps running)
  clusterctl [-name NAME] heal NODE                        bring NODE's link up again
  clusterctl [-name NAME] exec NODE SCRIPT                 run SCRIPT with sh -c on NODE
  clusterctl [-name NAME] cp SRC NODE:PATH                 copy the local file or directory SRC to PATH
                                                           on NODE, as cp -R does, owned by root
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
		deb := up.String("package", "", "cutover's Debian package for the master (default: build one)")
		without := up.String("missing", "", "comma-separated demo versions installed on no node")
		live := up.String("live", "", "the version every node runs at first (default 1.0.0)")
		bare := up.Bool("bare", false, "no demo application: for trying an application of your own")
		if err := up.Parse(args); err != nil || up.NArg() != 0 {
			fmt.Fprint(stderr, usage)
			return 2
		}
		missing := map[string][]string{}
		if *without != "" {
			for k := 1; k <= *nodes; k++ {
				missing[fmt.Sprintf("node%d", k)] = strings.Split(*without, ",")
			}
		}
		c, err := cluster.Start(ctx, cluster.Options{Name: name, Nodes: *nodes, Live: *live, Package: *deb, Missing: missing, Bare: *bare, Logf: logf})
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

	if cmd == "cp" {
		return copyIn(ctx, name, args, stdout, stderr)
	}
	if cmd == "release" {
		if len(args) != 3 {
			fmt.Fprint(stderr, usage)
			return 2
		}
		c, err := cluster.Attach(ctx, name)
		if err != nil {
			return fail(err)
		}
		if err := release(ctx, c, args[0], args[1], args[2]); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "cluster %s: %s: demoapp %s release written to %s\n", name, args[0], args[1], args[2])
		return 0
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

// copyIn runs clusterctl cp SRC NODE:PATH.
func copyIn(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	node, dst, ok := "", "", len(args) == 2
	if ok {
		node, dst, ok = strings.Cut(args[1], ":")
	}
	if !ok || args[0] == "" || node == "" || dst == "" {
		fmt.Fprint(stderr, usage)
		return 2
	}
	c, err := cluster.Attach(ctx, name)
	if err == nil {
		err = c.CopyIn(ctx, node, args[0], dst)
	}
	if err != nil {
		fmt.Fprintf(stderr, "clusterctl: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "cluster %s: %s: copied %s to %s\n", name, node, args[0], dst)
	return 0
}

// release builds the demo application and writes version's release tarball to path on node.
func release(ctx context.Context, c *cluster.Cluster, node, version, path string) error {
	dir, err := os.MkdirTemp("", "clusterctl-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bins, err := demoapp.Build(ctx, dir)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := demoapp.Release(&buf, bins, version); err != nil {
		return err
	}
	return c.WriteFile(ctx, node, path, buf.Bytes())
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
