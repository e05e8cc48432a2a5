package upgrade

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/cutover/cutover/nodes"
)

// countingDialer counts the dials of each node and fails those of the nodes in down; like a
// pool, it keeps a connection once made.
type countingDialer struct {
	mu        sync.Mutex
	dials     map[string]int
	down      map[string]bool
	connected map[string]bool
}

var errDown = errors.New("down")

func (d *countingDialer) Conn(_ context.Context, node string) (Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.connected[node] {
		return nil, nil
	}
	d.dials[node]++
	if d.down[node] {
		return nil, errDown
	}
	d.connected[node] = true
	return nil, nil
}

// TestDialAhead dials every node once, ahead of the first Conn, which waits for that dial and
// gets its outcome, an error included (the node is not dialed twice for it); a later Conn
// dials anew.
func TestDialAhead(t *testing.T) {
	d := &countingDialer{dials: map[string]int{}, down: map[string]bool{"node3": true}, connected: map[string]bool{}}
	list := []nodes.Node{{Name: "node1"}, {Name: "node2"}, {Name: "node3"}}
	ahead, stop := dialAhead(context.Background(), d, list, 2)
	<-ahead.done // every node dialed, before any Conn
	for _, n := range list {
		if d.dials[n.Name] != 1 {
			t.Errorf("%s was dialed %d times ahead, want once", n.Name, d.dials[n.Name])
		}
	}
	ctx := context.Background()
	for _, n := range list {
		_, err := ahead.Conn(ctx, n.Name)
		if want := d.down[n.Name]; (err != nil) != want || (want && !errors.Is(err, errDown)) {
			t.Errorf("Conn(%s) = %v, want an error %v", n.Name, err, want)
		}
	}
	stop()
	for _, n := range list {
		if d.dials[n.Name] != 1 {
			t.Errorf("%s was dialed %d times by the first Conn, want once", n.Name, d.dials[n.Name])
		}
	}
	if _, err := ahead.Conn(ctx, "node3"); !errors.Is(err, errDown) || d.dials["node3"] != 2 {
		t.Errorf("a second Conn(node3) = %v after %d dials, want a dial of its own", err, d.dials["node3"])
	}
	// Stopped before they ended: a Conn does not wait for ever.
	ahead, stop = dialAhead(context.Background(), d, list, 1)
	stop()
	for _, n := range list {
		ahead.Conn(ctx, n.Name)
	}
}
