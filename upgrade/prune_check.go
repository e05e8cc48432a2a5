package upgrade

import (
	"context"
	"slices"
	"sort"
	"strings"

	"github.com/cutover/cutover/nodes"
)

// pruneCheck finds, on every online node, the installed versions that no run needs, as the
// cluster judges them (pruneGuard): a node's own links do not count.
type pruneCheck struct{ job *pruneJob }

func (pruneCheck) Name() string { return "check" }
func (pruneCheck) Where() Where { return OnAll }

// ReadOnly marks a stage that changes nothing.
func (pruneCheck) ReadOnly() {}

func (s pruneCheck) Run(ctx context.Context, r *Run) error {
	j := s.job
	err := r.OnNodes(ctx, r.Online, false, func(ctx context.Context, c Conn, n nodes.Node) error {
		installed, err := r.Layout.Installed(ctx, c)
		if err != nil {
			return onNode(n.Name, err)
		}
		// A node that lags behind keeps what it runs: removing it would break the node
		// before a sync brings it to the cluster's version.
		own, err := r.Layout.Live(ctx, c)
		if err == nil && own != j.guard.live {
			installed = slices.DeleteFunc(installed, func(v string) bool { return v == own })
		}
		if remove := prunable(installed, j.guard, j.keep); len(remove) > 0 {
			j.mu.Lock()
			j.remove[n.Name] = remove
			j.mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return err
	}
	var lines []string
	for node, list := range j.remove {
		lines = append(lines, node+": "+strings.Join(list, ", "))
	}
	sort.Strings(lines)
	// A version named for removal that no node removes is kept on purpose (the way back) or
	// not installed: the operator hears which, instead of a silent "nothing to remove".
	var named []string
	for v := range j.guard.named {
		named = append(named, v)
	}
	sort.Strings(named)
	for _, v := range named {
		removed := false
		for _, list := range j.remove {
			removed = removed || slices.Contains(list, v)
		}
		if !removed {
			lines = append(lines, v+" kept: the previous version (the way back) or not installed")
		}
	}
	if len(lines) == 0 {
		r.Note("nothing to remove")
	} else {
		r.Note("%s", strings.Join(lines, "; "))
	}
	return nil
}
