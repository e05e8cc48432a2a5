package cluster

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cutover/cutover/test/demoapp"
)

// DefaultNodes is the number of nodes of a cluster whose [Options] do not say.
const DefaultNodes = 4

// DefaultLive is the demo version a cluster's nodes run at first when its [Options] do not say.
const DefaultLive = "1.0.0"

// maxNodes keeps node addresses (10 + K) inside the /24.
const maxNodes = 40

// bareHint ends the refusals of a demo version, for a reader who wants no demo application.
const bareHint = "; for nodes without the demo application, start a bare cluster (make cluster-up BARE=1, clusterctl up -bare)"

// validName matches a cluster's name, which names its containers and its network too.
var validName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,47}$`)

// Options describes a cluster to start.
type Options struct {
	// Name is unique per cluster: the containers are <Name>-node1..., the network <Name>.
	// [New] derives it from the test name when empty; [Start] requires it.
	Name string
	// Nodes is the number of nodes, node1 (the master) included; 0 means DefaultNodes.
	Nodes int
	// Missing lists, per node, versions of the demo application NOT installed there,
	// e.g. {"node3": {"1.2.0"}}.
	Missing map[string][]string
	// Live is the version every node runs at first; empty means DefaultLive.
	Live string
	// Bare starts the nodes without the demo application: sshd, root's key on the master and
	// its known_hosts, cron, and cutover's package on the master, but no application, no
	// /etc/cutover/cutover.toml and no daemon, for trying an application of one's own. Live
	// and Missing must then be empty.
	Bare bool
	// Package is the path of cutover's Debian package, installed on the master with dpkg -i;
	// empty means $CUTOVER_TEST_DEB, or else one built from this module (once per process).
	Package string
	// Logf, when set, receives one line per step with its duration.
	Logf func(format string, args ...any)
}

// withDefaults validates opts and fills in the defaults.
func (o Options) withDefaults() (Options, error) {
	if !validName.MatchString(o.Name) {
		return o, fmt.Errorf("cluster name %q: want 1-48 characters of a-z, 0-9, '_', '.', '-'", o.Name)
	}
	if o.Nodes == 0 {
		o.Nodes = DefaultNodes
	}
	if o.Nodes < 1 || o.Nodes > maxNodes {
		return o, fmt.Errorf("cluster %s: %d nodes: want 1 to %d", o.Name, o.Nodes, maxNodes)
	}
	if o.Bare {
		if o.Live != "" || len(o.Missing) > 0 {
			return o, fmt.Errorf("cluster %s: a bare cluster has no demo application: its live and missing versions do not apply", o.Name)
		}
		return o.withCommonDefaults(), nil
	}
	if o.Live == "" {
		o.Live = DefaultLive
	}
	if !slices.Contains(demoapp.Versions, o.Live) {
		return o, fmt.Errorf("cluster %s: live version %q is not a demo application version %v%s", o.Name, o.Live, demoapp.Versions, bareHint)
	}
	for node, versions := range o.Missing {
		k, ok := nodeNumber(node)
		if !ok || k > o.Nodes {
			return o, fmt.Errorf("cluster %s: missing versions for %q, which is not one of node1..node%d", o.Name, node, o.Nodes)
		}
		for _, v := range versions {
			if !slices.Contains(demoapp.Versions, v) {
				return o, fmt.Errorf("cluster %s: %s: missing version %q is not a demo application version %v", o.Name, node, v, demoapp.Versions)
			}
			if v == o.Live {
				return o, fmt.Errorf("cluster %s: %s: the live version %s cannot be missing%s", o.Name, node, v, bareHint)
			}
		}
	}
	return o.withCommonDefaults(), nil
}

// withCommonDefaults fills in the defaults of a demo cluster and a bare one alike.
func (o Options) withCommonDefaults() Options {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.Package == "" {
		// The package with the test hooks (stage holds, crash points) that the tests drive;
		// $CUTOVER_DEB is the release package, which has none.
		o.Package = os.Getenv("CUTOVER_TEST_DEB")
	}
	return o
}

// nodeNumber returns K for "nodeK".
func nodeNumber(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "node")
	if !ok || rest == "" || rest[0] == '0' || len(rest) > 4 || strings.Trim(rest, "0123456789") != "" {
		return 0, false
	}
	k, _ := strconv.Atoi(rest)
	return k, true
}

// nodeName returns "nodeK".
func nodeName(k int) string { return "node" + strconv.Itoa(k) }

// specs returns what to install on each node: every version but the missing ones; nil for
// a bare cluster.
func (o Options) specs(nodes []Node) []*demoapp.NodeSpec {
	if o.Bare {
		return make([]*demoapp.NodeSpec, len(nodes))
	}
	addrs := make([]demoapp.NodeAddr, len(nodes))
	for i, n := range nodes {
		addrs[i] = demoapp.NodeAddr{Name: n.Name, Address: n.Address}
	}
	specs := make([]*demoapp.NodeSpec, len(nodes))
	for i, n := range nodes {
		var versions []string
		for _, v := range demoapp.Versions {
			if !slices.Contains(o.Missing[n.Name], v) {
				versions = append(versions, v)
			}
		}
		specs[i] = &demoapp.NodeSpec{
			Name:     n.Name,
			Master:   nodes[0].Name,
			Nodes:    addrs,
			Versions: versions,
			Live:     o.Live,
		}
	}
	return specs
}
