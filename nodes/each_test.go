package nodes_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cutover/cutover/nodes"
)

// nodeList returns n nodes called node1..noden.
func nodeList(n int) []nodes.Node {
	list := make([]nodes.Node, n)
	for i := range list {
		list[i] = nodes.Node{Name: fmt.Sprintf("node%d", i+1)}
	}
	return list
}

func TestEachParallelBound(t *testing.T) {
	t.Parallel()
	tests := []struct {
		nodes, parallel, wantMax int
	}{
		{nodes: 10, parallel: 3, wantMax: 3},
		{nodes: 10, parallel: 1, wantMax: 1},
		{nodes: 10, parallel: 0, wantMax: 1},
		{nodes: 10, parallel: -5, wantMax: 1},
		{nodes: 4, parallel: 32, wantMax: 4},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("nodes=%d,parallel=%d", tt.nodes, tt.parallel), func(t *testing.T) {
			t.Parallel()
			var running, max atomic.Int32
			var calls atomic.Int32
			outcomes, err := nodes.Each(context.Background(), nodeList(tt.nodes), tt.parallel, "",
				func(ctx context.Context, n nodes.Node) error {
					now := running.Add(1)
					for {
						m := max.Load()
						if now <= m || max.CompareAndSwap(m, now) {
							break
						}
					}
					time.Sleep(50 * time.Millisecond)
					running.Add(-1)
					calls.Add(1)
					return nil
				})
			if err != nil {
				t.Fatal(err)
			}
			if int(max.Load()) != tt.wantMax {
				t.Errorf("max concurrency = %d, want %d", max.Load(), tt.wantMax)
			}
			if int(calls.Load()) != tt.nodes || len(outcomes) != tt.nodes {
				t.Errorf("calls = %d, outcomes = %d, want %d each", calls.Load(), len(outcomes), tt.nodes)
			}
			for _, o := range outcomes {
				if o.Duration < 50*time.Millisecond {
					t.Errorf("%s: Duration = %s, want at least the 50ms it took", o.Node, o.Duration)
				}
			}
		})
	}
}

func TestEachFailures(t *testing.T) {
	t.Parallel()
	list := nodeList(5)
	errStop := errors.New("exit 1")
	var ran sync.Map
	outcomes, err := nodes.Each(context.Background(), list, 5, "", func(ctx context.Context, n nodes.Node) error {
		ran.Store(n.Name, true)
		switch n.Name {
		case "node2":
			return errStop
		case "node4":
			return fmt.Errorf("node4: run %q: exit 2", "stop") // already names the node
		}
		return nil
	})
	for _, n := range list {
		if _, ok := ran.Load(n.Name); !ok {
			t.Errorf("%s did not run; every node must run despite failures", n.Name)
		}
	}
	var gotNodes []string
	for _, o := range outcomes {
		gotNodes = append(gotNodes, o.Node)
	}
	if want := "node1 node2 node3 node4 node5"; strings.Join(gotNodes, " ") != want {
		t.Errorf("outcome order = %v, want %s", gotNodes, want)
	}
	for i, o := range outcomes {
		failed := o.Node == "node2" || o.Node == "node4"
		if (o.Err != nil) != failed {
			t.Errorf("outcome %d (%s): Err = %v, want failure %v", i, o.Node, o.Err, failed)
		}
	}
	if !errors.Is(outcomes[1].Err, errStop) {
		t.Errorf("node2 Outcome.Err = %v, want the error fn returned", outcomes[1].Err)
	}
	want := "node2: exit 1\nnode4: run \"stop\": exit 2"
	if err == nil || err.Error() != want {
		t.Errorf("err = %q, want %q", err, want)
	}
	if !errors.Is(err, errStop) {
		t.Errorf("errors.Is(err, errStop) = false, want the joined error to wrap the node's error")
	}
}

func TestEachLast(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		last string
		want string // the node that must finish last; "" for none
	}{
		{name: "master last", last: "node1", want: "node1"},
		{name: "middle node last", last: "node3", want: "node3"},
		{name: "unknown name ignored", last: "node9"},
		{name: "no last", last: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var started, finished []string
			var othersDone atomic.Int32
			var violated atomic.Bool
			list := nodeList(6)
			outcomes, err := nodes.Each(context.Background(), list, 3, tt.last, func(ctx context.Context, n nodes.Node) error {
				if n.Name == tt.last && int(othersDone.Load()) != len(list)-1 {
					violated.Store(true)
				}
				mu.Lock()
				started = append(started, n.Name)
				mu.Unlock()
				time.Sleep(10 * time.Millisecond)
				mu.Lock()
				finished = append(finished, n.Name)
				mu.Unlock()
				if n.Name != tt.last {
					othersDone.Add(1)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(finished) != len(list) || len(outcomes) != len(list) {
				t.Fatalf("%d nodes ran and %d outcomes, want %d", len(finished), len(outcomes), len(list))
			}
			if violated.Load() {
				t.Errorf("%s started before all others finished (started %v)", tt.last, started)
			}
			if tt.want != "" && finished[len(finished)-1] != tt.want {
				t.Errorf("finish order %v, want %s last", finished, tt.want)
			}
			for i, o := range outcomes {
				if o.Node != list[i].Name {
					t.Errorf("outcome %d is %s, want %s (list order)", i, o.Node, list[i].Name)
				}
			}
		})
	}
}

func TestEachCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	list := nodeList(6)
	var sawCancel atomic.Int32
	var firstTwo sync.WaitGroup
	firstTwo.Add(2)
	outcomes, err := nodes.Each(ctx, list, 2, "node6", func(ctx context.Context, n nodes.Node) error {
		firstTwo.Done() // only node1 and node2 may ever start
		if n.Name == "node1" {
			firstTwo.Wait()
			cancel()
		}
		select {
		case <-ctx.Done():
			sawCancel.Add(1)
			return ctx.Err()
		case <-time.After(5 * time.Second):
			return nil
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	// node1 and node2 were running and saw the cancellation; the rest,
	// including the last node, never started.
	if n := sawCancel.Load(); n != 2 {
		t.Errorf("%d running calls saw the cancellation, want 2", n)
	}
	for i, o := range outcomes {
		if o.Node != list[i].Name || !errors.Is(o.Err, context.Canceled) {
			t.Errorf("outcome %d = %s %v, want %s with context.Canceled", i, o.Node, o.Err, list[i].Name)
		}
		if i >= 2 && o.Duration != 0 {
			t.Errorf("%s has Duration %s, want 0 for a node never started", o.Node, o.Duration)
		}
	}
	if !strings.Contains(err.Error(), "node6: context canceled") {
		t.Errorf("err = %q, want it to name node6", err)
	}
}

func TestEachEmpty(t *testing.T) {
	t.Parallel()
	outcomes, err := nodes.Each(context.Background(), nil, 4, "node1", func(context.Context, nodes.Node) error {
		t.Error("fn called for an empty list")
		return nil
	})
	if err != nil || len(outcomes) != 0 {
		t.Errorf("Each(nil) = %v, %v; want no outcomes and no error", outcomes, err)
	}
}
