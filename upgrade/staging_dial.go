package upgrade

import (
	"context"
	"sync"

	"github.com/cutover/cutover/nodes"
)

// aheadDialer connects to every online node once, in the background, from the moment it is
// made, parallel at a time, so that the connections are open when the check needs them: a
// stage reads (and, the first time, checksums) its source meanwhile. The first Conn for a
// node waits for that dial, and returns its error without dialing again; otherwise, and
// for later ones, the Dialer under it (a pool) hands out the connection it keeps, or dials
// anew for one lost since.
type aheadDialer struct {
	Dialer
	mu      sync.Mutex
	pending map[string]*aheadDial
	done    chan struct{} // closed once every dial ended
}

// aheadDial is one node's dial.
type aheadDial struct {
	once  sync.Once
	ended chan struct{}
	err   error
}

// end records the dial's outcome, once.
func (p *aheadDial) end(_ Conn, err error) {
	p.once.Do(func() {
		p.err = err
		close(p.ended)
	})
}

// dialAhead starts dialing list through d and returns the Dialer that hands the connections
// out, and what stops the dials still under way and waits for them to end: call it before
// the connections are closed.
func dialAhead(ctx context.Context, d Dialer, list []nodes.Node, parallel int) (*aheadDialer, func()) {
	ctx, cancel := context.WithCancel(ctx)
	a := &aheadDialer{Dialer: d, pending: map[string]*aheadDial{}, done: make(chan struct{})}
	all := make(map[string]*aheadDial, len(list))
	for _, n := range list {
		all[n.Name] = &aheadDial{ended: make(chan struct{})}
		a.pending[n.Name] = all[n.Name]
	}
	go func() {
		defer close(a.done)
		nodes.Each(ctx, list, parallel, "", func(ctx context.Context, n nodes.Node) error {
			all[n.Name].end(d.Conn(ctx, n.Name))
			return nil
		})
		for _, p := range all {
			p.end(nil, context.Canceled) // a node Each did not reach
		}
	}()
	return a, func() {
		cancel()
		<-a.done
	}
}

// Conn returns the node's connection, once the dial ahead of it ended.
func (a *aheadDialer) Conn(ctx context.Context, node string) (Conn, error) {
	a.mu.Lock()
	p, ok := a.pending[node]
	delete(a.pending, node)
	a.mu.Unlock()
	if ok {
		select {
		case <-p.ended:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if p.err != nil {
			return nil, p.err
		}
	}
	// The Dialer under it keeps the connection the dial ahead opened, and hands it out
	// while it lives.
	return a.Dialer.Conn(ctx, node)
}
