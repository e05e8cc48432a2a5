package nodes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Outcome is one node's part of a fan-out.
type Outcome struct {
	Node     string
	Err      error
	Duration time.Duration
}

// Each runs fn for every node in list, at most parallel at once (parallel
// below 1 means 1), and starts nodes in list order. If last is the name of a
// node in list, that node runs only after all the others have finished,
// whatever their outcome: the master goes last when order matters (stopping,
// switching). Outcomes come back in list order. The error is errors.Join of
// the failed nodes' errors, each prefixed with the node's name unless its
// message already starts with it.
//
// When ctx ends, nodes not yet started are not started and their Outcome.Err
// is ctx's error; running calls see the cancellation through their ctx.
func Each(ctx context.Context, list []Node, parallel int, last string, fn func(ctx context.Context, n Node) error) ([]Outcome, error) {
	if parallel < 1 {
		parallel = 1
	}
	outcomes := make([]Outcome, len(list))
	lastIdx := -1
	for i, n := range list {
		outcomes[i].Node = n.Name
		if last != "" && n.Name == last && lastIdx < 0 {
			lastIdx = i
		}
	}

	started := make([]bool, len(list))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	start := func(i int) bool {
		select {
		case <-ctx.Done():
			return false
		case sem <- struct{}{}:
		}
		if ctx.Err() != nil { // both were ready: prefer stopping
			<-sem
			return false
		}
		started[i] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			t := time.Now()
			err := fn(ctx, list[i])
			outcomes[i].Err, outcomes[i].Duration = err, time.Since(t)
		}()
		return true
	}
	for i := range list {
		if i != lastIdx && !start(i) {
			break
		}
	}
	wg.Wait()
	if lastIdx >= 0 {
		start(lastIdx)
		wg.Wait()
	}

	var errs []error
	for i := range outcomes {
		o := &outcomes[i]
		if !started[i] {
			o.Err = ctx.Err()
		}
		if o.Err != nil {
			errs = append(errs, withNode(o.Node, o.Err))
		}
	}
	return outcomes, errors.Join(errs...)
}

// withNode prefixes err with the node's name unless it already names it.
func withNode(node string, err error) error {
	if strings.HasPrefix(err.Error(), node+": ") {
		return err
	}
	return fmt.Errorf("%s: %w", node, err)
}
