package upgradetest

import (
	"context"
	"testing"

	"github.com/cutover/cutover/nodes"
)

// LocalConn returns a connection to this host as a cluster's master: the real local transport
// of package nodes, with its watchdog, for tests that run cutover's node commands and file
// operations here. Its pool is closed when t ends.
func LocalConn(t testing.TB) *nodes.Conn {
	t.Helper()
	inv, err := nodes.NewInventory("master", []nodes.Node{{Name: "master"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := nodes.NewPool(inv, nodes.SSHConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c, err := p.Conn(context.Background(), "master")
	if err != nil {
		t.Fatal(err)
	}
	return c
}
