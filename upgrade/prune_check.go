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
		lagging := err == nil && own != j.guard.live && slices.Contains(installed, own)
		if lagging {
			installed = slices.DeleteFunc(installed, func(v string) bool { return v == own })
		}
		remove, kept := pruneVerdict(installed, j.guard, j.keep)
		if lagging {
			kept[own] = keptOwn + " (" + n.Name + ")"
		}
		j.mu.Lock()
		defer j.mu.Unlock()
		if len(remove) > 0 {
			j.remove[n.Name] = remove
		}
		if j.kept == nil {
			j.kept, j.installed = map[string]string{}, map[string]bool{}
		}
		for v, why := range kept {
			j.installed[v] = true
			if j.kept[v] == "" || why == keptOwn+" ("+n.Name+")" && j.kept[v] != keptLive {
				j.kept[v] = why
			}
		}
		for _, v := range remove {
			j.installed[v] = true
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
	// A version named for removal that no node removes: the operator hears exactly why
	// (the way back, not installed, ...), instead of a silent "nothing to remove".
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
		switch {
		case removed:
		case !j.installed[v]:
			lines = append(lines, v+" kept: not installed on any node")
		default:
			lines = append(lines, v+" kept: "+j.kept[v]+", which prune never removes")
		}
	}
	// The rules, as they held: why every other installed version stays.
	var kept []string
	for v, why := range j.kept {
		if !j.guard.named[v] {
			kept = append(kept, v+" "+why)
		}
	}
	sort.Strings(kept)
	if len(kept) > 0 {
		lines = append(lines, "kept: "+strings.Join(kept, "; "))
	}
	if len(j.remove) == 0 {
		lines = append([]string{"nothing to remove"}, lines...)
	}
	if len(lines) == 0 {
		r.Note("nothing to remove")
	} else {
		r.Note("%s", strings.Join(lines, "; "))
	}
	return nil
}
