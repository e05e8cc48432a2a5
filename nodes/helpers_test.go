package nodes_test

import (
	"context"
	"testing"
	"time"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/nodes/sshdtest"
)

// localMaster is the name of the (local) master in the tests' inventories.
const localMaster = "master"

// clusterNodes lists a local master followed by the cluster's servers.
func clusterNodes(c *sshdtest.Cluster) []nodes.Node {
	list := []nodes.Node{{Name: localMaster}}
	for _, s := range c.Servers {
		list = append(list, nodes.Node{Name: s.Name, Address: s.Addr, Port: s.Port})
	}
	return list
}

// sshConfig returns the settings that reach the cluster's servers, with
// timings shortened for tests.
func sshConfig(c *sshdtest.Cluster) nodes.SSHConfig {
	return nodes.SSHConfig{
		User:              c.User,
		IdentityFiles:     []string{c.IdentityFile},
		KnownHosts:        []string{c.KnownHosts},
		ConnectTimeout:    5 * time.Second,
		CommandTimeout:    20 * time.Second,
		KeepaliveInterval: 2 * time.Second, // loaded test machines answer late
		KeepaliveMax:      3,
	}
}

// newPool returns a pool over a local master and the cluster's servers, with
// cfg changed by edit when it is not nil. The pool is closed when t ends.
func newPool(t testing.TB, c *sshdtest.Cluster, edit func(*nodes.SSHConfig)) *nodes.Pool {
	t.Helper()
	inv, err := nodes.NewInventory(localMaster, clusterNodes(c))
	if err != nil {
		t.Fatal(err)
	}
	cfg := sshConfig(c)
	if edit != nil {
		edit(&cfg)
	}
	p, err := nodes.NewPool(inv, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// conn returns the pool's connection to name, failing the test on error.
func conn(t testing.TB, p *nodes.Pool, name string) *nodes.Conn {
	t.Helper()
	c, err := p.Conn(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
