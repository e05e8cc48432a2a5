package upgrade

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/staging"
)

// stagingSend brings both trees into their hidden temporary directories on every node that
// lacks them, sending only what is missing, and checks them against the manifest.
type stagingSend struct{ job *stagingJob }

func (stagingSend) Name() string { return "send" }
func (stagingSend) Where() Where { return OnAll }

func (s stagingSend) Run(ctx context.Context, r *Run) error {
	j := s.job
	var done atomic.Int64
	total := int64(len(r.Online) - len(j.alreadyNodes(nodeNames(r.Online))))
	need := j.diskNeeded * total
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				r.Wait("%s of at most %s sent, %d of %d nodes done", megabytes(j.bytes.Load()), megabytes(need), done.Load(), total)
			}
		}
	}()
	if err := j.readAgain(r); err != nil {
		return err
	}
	defer j.encode(r)()
	err := r.OnNodes(ctx, r.Online, false, func(ctx context.Context, lc Conn, n nodes.Node) error {
		defer done.Add(1)
		c, err := streamConn(lc)
		if err != nil {
			return onNode(n.Name, err)
		}
		states := j.nodeStates(n.Name)
		for i, t := range []struct {
			tree *staging.Tree
			dir  string
		}{{j.lib, j.libDir}, {j.share, j.shareDir}} {
			if states[i].held() {
				continue
			}
			// The progress is shown as it comes; the count is Send's (see staging.Send).
			var shown atomic.Int64
			sent, err := staging.Send(ctx, c, t.tree, t.dir, func(b int64) { shown.Add(b); j.bytes.Add(b) })
			j.bytes.Add(sent.Bytes - shown.Load())
			if err != nil {
				return err
			}
			j.setSent(n.Name, i, sent)
		}
		return nil
	})
	r.Note("%s sent", megabytes(j.bytes.Load()))
	return err
}

// readAgain reads the trees from the source when the check judged them by the stamps of an
// unchanged archive (stagingSource.readAgain) and a node lacks one of them.
func (j *stagingJob) readAgain(r *Run) error {
	j.mu.Lock()
	lacking := false
	for _, st := range j.states {
		lacking = lacking || !st[0].held() || !st[1].held()
	}
	j.mu.Unlock()
	if !lacking {
		return nil
	}
	trees, err := j.src.readAgain()
	j.src.logNotes(r)
	if err != nil || trees == nil {
		return err
	}
	r.log.Printf("staging: %s unpacked again: a node lacks its trees", j.src.path)
	j.lib, j.share = trees[0], trees[1]
	return nil
}

// nodeNames lists the nodes' names.
func nodeNames(list []nodes.Node) []string {
	var out []string
	for _, n := range list {
		out = append(out, n.Name)
	}
	return out
}

// encode writes each tree that two or more nodes lack as one tar stream to an unnamed file in
// cutover's state directory (staging.Tree.Encode), so that the master reads and checksums
// its files once rather than once a node, and returns what closes those streams. Where it
// cannot, each node's stream is written as it is sent, as for a single node; the run log
// says why.
func (j *stagingJob) encode(r *Run) (release func()) {
	var releases []func()
	for i, t := range []*staging.Tree{j.lib, j.share} {
		lacking := 0
		for _, n := range r.Online {
			if !j.nodeStates(n.Name)[i].held() {
				lacking++
			}
		}
		if lacking < 2 {
			continue
		}
		rel, err := t.Encode(r.Config.Paths.StateDir)
		if err != nil {
			r.log.Printf("staging: %v; each node's stream is written as it is sent", err)
			continue
		}
		releases = append(releases, rel)
		r.log.Printf("staging: %s encoded once for the %d nodes that lack it", t.Dir, lacking)
	}
	return func() {
		for _, rel := range releases {
			rel()
		}
	}
}
