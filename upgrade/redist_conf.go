package upgrade

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/cutover/cutover/nodes"
)

// redistConf runs the application's own redistribution command on the master (Ganeti's
// redist-conf needs the daemons up). Without one, cutover copied the config right after the
// config stage instead, and this stage is skipped.
//
// With restart_watch set, it reads the watched files on every node before and after the
// command, and learns which nodes' files changed (factRestartNodes): the restart stage
// restarts only those. The state before is learned before the command runs, so a resumed
// run compares with the files as they were before the first execution's command, not with
// what that command already wrote.
type redistConf struct{}

func (redistConf) Name() string { return "redist-conf" }

func (redistConf) Where() Where { return OnMaster }

func (redistConf) Skip(r *Run) bool { return r.Config.Commands.RedistConf == "" }

// The facts of the watched files: their digest on every node before redist-conf (JSON, node
// to digest), and the nodes whose digest changed, by name, space-separated, or "none".
const (
	factWatchBefore  = "restart-watch-before"
	factRestartNodes = "restart-nodes"
)

func (redistConf) Run(ctx context.Context, r *Run) error {
	watch := r.Config.Commands.RestartWatch
	_, compared := r.Fact(factRestartNodes)
	restarts := slices.ContainsFunc(r.stages(), func(s Stage) bool { _, ok := s.(restart); return ok })
	if len(watch) == 0 || !restarts || compared {
		// Nothing to compare; no restart follows (a rolling run restarted each batch); or
		// an earlier execution compared already, and running the command again changes
		// nothing the comparison would catch.
		if _, err := r.OnMaster(ctx, r.Config.Commands.RedistConf); err != nil {
			return err
		}
		return syncRedist(ctx, r)
	}
	now, err := watchedFiles(ctx, r, watch)
	if err != nil {
		return err
	}
	digests := map[string]string{}
	for node, w := range now {
		digests[node] = w.digest
	}
	enc, err := json.Marshal(digests)
	if err != nil {
		return err
	}
	stored, err := r.Learn(ctx, factWatchBefore, string(enc))
	if err != nil {
		return err
	}
	before := map[string]string{}
	if err := json.Unmarshal([]byte(stored), &before); err != nil {
		return fmt.Errorf("journal: %s: %w", factWatchBefore, err)
	}
	if _, err := r.OnMaster(ctx, r.Config.Commands.RedistConf); err != nil {
		return err
	}
	if err := syncRedist(ctx, r); err != nil {
		return err
	}
	after, err := watchedFiles(ctx, r, watch)
	if err != nil {
		return err
	}
	var changed, what []string
	for node, w := range after {
		if b, ok := before[node]; ok && b == w.digest {
			continue
		}
		changed = append(changed, node)
		// What changed is known when this execution read the files before the command.
		if b, ok := now[node]; ok && b.digest == before[node] {
			what = append(what, node+": "+strings.Join(changedFiles(b.listing, w.listing), ", "))
		}
	}
	sort.Strings(changed)
	sort.Strings(what)
	if len(what) > 0 {
		r.log.Printf("redist-conf changed what the daemons read: %s", strings.Join(what, "; "))
	}
	value := "none"
	if len(changed) > 0 {
		value = strings.Join(changed, " ")
	}
	if _, err := r.Learn(ctx, factRestartNodes, value); err != nil {
		return err
	}
	if len(changed) == 0 {
		r.Note("nothing the daemons read changed")
	} else {
		r.Note("changed on %s", strings.Join(changed, ", "))
	}
	return nil
}

// syncRedist makes what redist-conf wrote durable on every online node and on the master,
// where the command ran (a sync run's online nodes are only the nodes it brings back), before
// the stage is done: the command is the application's, and nothing says it synced the files
// it wrote, yet the journal is about to record the stage done and the daemons are about to
// read them. A power cut of a node after that would otherwise bring back the files of before,
// with daemons and journal that had gone on from the new ones.
func syncRedist(ctx context.Context, r *Run) error {
	line := nodes.QuoteArgs(append([]string{"sh", "-c", syncFSScript, "cutover-sync"}, redistDirs(r)...))
	list := r.Online
	if m := r.MasterNode(); !slices.ContainsFunc(list, func(n nodes.Node) bool { return n.Name == m.Name }) {
		list = append([]nodes.Node{m}, list...)
	}
	return r.OnNodes(ctx, list, false, func(ctx context.Context, c Conn, n nodes.Node) error {
		if _, err := c.RunShell(ctx, line); err != nil {
			return onNode(n.Name, fmt.Errorf("sync what redist-conf wrote: %w", err))
		}
		return nil
	})
}

// syncFSScript syncs the file systems that hold its arguments, those that exist (syncfs, by
// sync -f); where sync cannot name a file system, it syncs them all.
const syncFSScript = `for d in "$@"; do
	[ -e "$d" ] || continue
	sync -f -- "$d" 2>/dev/null || { sync; exit 0; }
done`

// redistDirs are the directories whose file systems hold what redist-conf writes: the
// application's state and its directory in sysconfdir, and the directories of the
// restart_watch files.
func redistDirs(r *Run) []string {
	dirs := r.Config.BackupDirs()
	for _, p := range r.Config.Commands.RestartWatch {
		if strings.HasPrefix(p, "!") {
			continue
		}
		if i := strings.IndexAny(p, "*?["); i >= 0 {
			p = p[:i]
		}
		if d := path.Dir(p); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// watchScript prints the SHA-256 of every regular file that matches one of its arguments,
// globs expanded (and nothing else: IFS is empty, so no word splitting), one line per file,
// leaving out the files that match an argument written with a leading "!". A pattern that
// matches nothing prints nothing.
const watchScript = `set -e
IFS=
for p in "$@"; do
	case $p in '!'*) continue;; esac
	for f in $p; do
		[ -f "$f" ] || continue
		keep=1
		for x in "$@"; do
			case $x in '!'*) case $f in ${x#!}) keep=;; esac;; esac
		done
		if [ -n "$keep" ]; then sha256sum -- "$f"; fi
	done
done`

// watchedNode is what the watched files of one node are: the script's listing, one line per
// file, and a short digest of it, which the journal keeps.
type watchedNode struct{ listing, digest string }

// watchedFiles reads the watched files on every online node.
func watchedFiles(ctx context.Context, r *Run, watch []string) (map[string]watchedNode, error) {
	var mu sync.Mutex
	out := map[string]watchedNode{}
	line := nodes.QuoteArgs(append([]string{"sh", "-c", watchScript, "cutover-watch"}, watch...))
	err := r.OnNodes(ctx, r.Online, false, func(ctx context.Context, c Conn, n nodes.Node) error {
		res, err := c.RunShell(ctx, line)
		if err != nil {
			return onNode(n.Name, fmt.Errorf("read the restart_watch files: %w", err))
		}
		sum := sha256.Sum256(res.Stdout)
		mu.Lock()
		out[n.Name] = watchedNode{string(res.Stdout), hex.EncodeToString(sum[:8])}
		mu.Unlock()
		return nil
	})
	return out, err
}

// changedFiles names the files whose line differs between two listings of a node.
func changedFiles(before, after string) []string {
	lines := func(s string) map[string]string {
		m := map[string]string{}
		for _, l := range strings.Split(s, "\n") {
			if sum, name, ok := strings.Cut(l, "  "); ok {
				m[name] = sum
			}
		}
		return m
	}
	b, a := lines(before), lines(after)
	var names []string
	for name, sum := range a {
		if b[name] != sum {
			names = append(names, path.Base(name))
		}
	}
	for name := range b {
		if _, ok := a[name]; !ok {
			names = append(names, path.Base(name)+" (gone)")
		}
	}
	sort.Strings(names)
	return names
}

// restartNodes returns the nodes of list the restart stage of run r restarts: those where redist-conf
// changed a watched file, as an earlier stage learned, or all of them when it learned
// nothing (no restart_watch).
func restartNodes(r *Run, list []nodes.Node) []nodes.Node {
	v, ok := r.Fact(factRestartNodes)
	if !ok {
		return list
	}
	names := strings.Fields(v)
	return slices.DeleteFunc(slices.Clone(list), func(n nodes.Node) bool { return !slices.Contains(names, n.Name) })
}
