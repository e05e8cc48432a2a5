package upgrade

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/upgrade/config"
)

// DefaultKeep is how many of the newest installed versions `cutover prune` keeps besides the
// ones a run needs.
const DefaultKeep = 2

// PruneOptions are what the operator asked of `cutover prune`.
type PruneOptions struct {
	// Keep is how many of the newest installed versions are kept whatever else holds.
	Keep int
	// Versions are versions to remove even though they are newer than the live one or among
	// the Keep newest: prune removes a version newer than the live one only when it is named
	// here. The live and previous versions and a pending run's are never removed.
	Versions []string
	// DryRun lists what would be removed; it changes nothing.
	DryRun bool
	// Confirm, when set, is asked after the check and before the first removal.
	Confirm func(ctx context.Context, r *Run) error
	// Reporter receives the run's events; nil reports nothing.
	Reporter Reporter
	// Hostname is the local host's name; "" asks the system.
	Hostname string
}

// PruneResult describes a finished prune run, successful or not.
type PruneResult struct {
	Run      uint64
	App      string
	Remove   map[string][]string // per node, the version directories removed (or, dry, to remove)
	Log      string
	Duration time.Duration
}

// PruneStages returns the stages of `cutover prune` in the order they run.
func PruneStages(job *pruneJob) []Stage {
	return []Stage{
		pruneCheck{job},  // 1 all: which versions no run needs
		pruneRemove{job}, // 2 all: moved out of sight (share first), then removed
	}
}

// pruneJob is what the stages of one prune run share.
type pruneJob struct {
	keep   int
	guard  pruneGuard
	mu     sync.Mutex
	remove map[string][]string
	// kept is, per version kept on some node, why (the first node's reason), and installed
	// every version some node has.
	kept      map[string]string
	installed map[string]bool
}

// Prune removes, on every online node, the installed versions that no run needs: not the
// cluster's live one (the master's links), not the previous one (the downgrade target: the
// source of the journal's last done run that switched versions, or, when the journal has
// none, the newest installed below the live version), not the source or target of a pending
// run, not one newer than the live one unless Versions names it, not among the Keep newest
// unless Versions names it. A node's own links never count: a node that lags behind the
// cluster keeps the cluster's versions and loses the others. A version is moved out of sight
// first, its share tree before its lib tree, so that it stops counting as installed at
// once, and only then removed; an interrupted prune leaves hidden directories that the next
// prune removes. Journaled as a run of KindPrune.
func Prune(ctx context.Context, cfg *config.Config, opts PruneOptions) (*PruneResult, error) {
	start := time.Now()
	if opts.Keep < 0 {
		return nil, badInput(fmt.Errorf("prune --keep=%d: must be 0 or more", opts.Keep))
	}
	s, err := openSession(ctx, cfg, modeExclusive, sessionOptions{Reporter: opts.Reporter, Hostname: opts.Hostname, HostCheck: true})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	r := s.r
	job := &pruneJob{keep: opts.Keep, remove: map[string][]string{}}
	if job.guard, err = clusterGuard(ctx, r, s.intent, opts.Versions); err != nil {
		return nil, err
	}
	res := &PruneResult{App: cfg.App, Remove: job.remove}
	err = execute(ctx, r, recipe{
		kind: KindPrune, stages: PruneStages(job), dryRun: opts.DryRun, confirm: opts.Confirm, details: job.details,
		facts: map[string]string{"keep": fmt.Sprint(opts.Keep), "guard": job.guard.String(opts.Versions)},
		what:  pruneWhat(cfg.App, opts),
		where: fmt.Sprintf("on %s (master %s)", plural(len(r.Online), "node"), r.Inventory.Master),
	})
	res.Run, res.Log = r.ID, r.log.Path()
	res.Duration = time.Since(start)
	if err != nil && !opts.DryRun && r.ID != 0 && !IsBadInput(err) {
		err = fmt.Errorf("%w; run 'cutover prune' again to finish", err)
	}
	return res, err
}

// pruneWhat is the run's title: what is removed, what kept.
func pruneWhat(app string, opts PruneOptions) string {
	if len(opts.Versions) > 0 {
		return fmt.Sprintf("prune %s (removing %s as named; of the others, keeping the live, previous and newer versions and the %d newest)",
			app, strings.Join(opts.Versions, ", "), opts.Keep)
	}
	return fmt.Sprintf("prune %s (keeping the live, previous and newer versions and the %d newest)", app, opts.Keep)
}

// details says, a line per node, what the check found to remove.
func (j *pruneJob) details() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []string
	for node, v := range j.remove {
		if len(v) > 0 {
			out = append(out, fmt.Sprintf("%s: remove %s", node, strings.Join(v, ", ")))
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		out = append(out, "nothing to remove")
	}
	return out
}

// pruneGuard is what prune protects, judged for the whole cluster, never from one node's
// links.
type pruneGuard struct {
	live     string          // the cluster's live VERSIONDIR: the master's links; "" when a pending run switches them
	previous []string        // the journal's last done switch: its source (the downgrade target) and target
	pending  []string        // the VERSIONDIRs a pending run needs: its source and target
	named    map[string]bool // VERSIONDIRs the operator named for removal
}

// String says what the guard protects, for the journal and the log.
func (g pruneGuard) String(named []string) string {
	return fmt.Sprintf("live %q, previous %v, pending %v, named %v", g.live, g.previous, g.pending, named)
}

// clusterGuard reads what prune must protect: the live version from the master's links, the
// pending run's versions from its intent, the previous version from the journal's last done
// run, and the versions named for removal.
func clusterGuard(ctx context.Context, r *Run, in *journal.Intent, named []string) (pruneGuard, error) {
	g := pruneGuard{named: map[string]bool{}}
	namedDirs := make([]string, len(named))
	for i, s := range named {
		v, err := layout.ParseVersion(s)
		if err != nil {
			return g, badInput(fmt.Errorf("prune --version=%q: %w", s, err))
		}
		namedDirs[i] = r.Layout.DirOf(v)
		g.named[namedDirs[i]] = true
	}
	if in != nil {
		g.pending = versionDirsOf(r.Layout, in.From, in.To)
	}
	c, err := r.dial.Conn(ctx, r.Inventory.Master)
	if err == nil {
		g.live, err = r.Layout.Live(ctx, c)
	}
	if err != nil && len(g.pending) == 0 {
		// Without the cluster's live version nothing can be judged.
		return g, fmt.Errorf("%s: the cluster's live version: %w", r.Inventory.Master, err)
	}
	// Naming a version the cluster runs or a pending run needs is a mistake to say, not to
	// pass over with "nothing to remove".
	for i, v := range named {
		dir := namedDirs[i]
		switch {
		case dir == g.live:
			return g, badInput(fmt.Errorf("prune --version=%q: it is the cluster's live version, which prune never removes", v))
		case slices.Contains(g.pending, dir):
			return g, badInput(fmt.Errorf("prune --version=%q: the pending run needs it; end the run first ('cutover upgrade --resume' or '--abort')", v))
		}
	}
	runs, err := journal.NewStore(JournalPath(r.Config)).Runs(ctx)
	if err != nil {
		return g, fmt.Errorf("journal: %w", err)
	}
	for i := len(runs) - 1; i >= 0; i-- {
		run := runs[i]
		if run.Outcome != journal.Succeeded || !kindOf(run.Kind).traits().switches || run.From == "" || run.From == run.To {
			continue
		}
		g.previous = versionDirsOf(r.Layout, run.From, run.To)
		break
	}
	return g, nil
}

// versionDirsOf returns the VERSIONDIRs of the versions an intent or a journal record names,
// in their order; a version that does not parse names none.
func versionDirsOf(lay *layout.Layout, versions ...string) []string {
	var out []string
	for _, s := range versions {
		if v, err := layout.ParseVersion(s); err == nil {
			out = append(out, lay.DirOf(v))
		}
	}
	return out
}

// Why prune keeps an installed version, as the check's line says it.
const (
	keptLive     = "the live version"
	keptPending  = "a pending run needs it"
	keptPrevious = "the previous version (the way back)"
	keptNewer    = "newer than the live version (name it with --version to remove it)"
	keptNewest   = "among the --keep newest"
	keptOwn      = "the version a node behind the cluster runs"
)

// prunable returns the installed version directories (sorted oldest first) that no run
// needs, as g judges them for the cluster.
func prunable(installed []string, g pruneGuard, keep int) []string {
	out, _ := pruneVerdict(installed, g, keep)
	return out
}

// pruneVerdict returns what prunable returns, and why each other installed version is kept.
func pruneVerdict(installed []string, g pruneGuard, keep int) (out []string, kept map[string]string) {
	versions := parseDirs(append(append([]string{g.live}, g.pending...), installed...))
	sorted := slices.Clone(installed)
	layout.SortVersionDirs(sorted)
	protect := map[string]string{}
	protect[g.live] = keptLive
	for _, v := range g.pending {
		protect[v] = keptPending
	}
	// The previous version is the way back: the newest installed version of the minor before
	// the live one, which the default path policy (downgrade = "previous-minor") allows, or
	// when none is installed, the version the journal's last done switch came from.
	prevMinor := ""
	if live, ok := versions[g.live]; ok && live.Minor() > 0 {
		for i := len(sorted) - 1; i >= 0; i-- {
			if v, ok := versions[sorted[i]]; ok && v.Major() == live.Major() && v.Minor() == live.Minor()-1 {
				prevMinor = sorted[i]
				break
			}
		}
	}
	if prevMinor != "" {
		protect[prevMinor] = keptPrevious
	} else {
		for _, v := range g.previous {
			if protect[v] == "" {
				protect[v] = keptPrevious
			}
		}
	}
	// The version newer ones are judged against: the live one, or while a pending run
	// switches the links, the newest it needs.
	ref := g.live
	for _, p := range g.pending {
		if ref == "" || versions.less(ref, p) {
			ref = p
		}
	}
	if prevMinor == "" && len(g.previous) == 0 && g.live != "" {
		// No switch in the journal: the previous version is the newest below the live one.
		for i := len(sorted) - 1; i >= 0; i-- {
			if versions.less(sorted[i], g.live) {
				protect[sorted[i]] = keptPrevious
				break
			}
		}
	}
	kept = map[string]string{}
	for i, v := range sorted {
		switch {
		case protect[v] != "":
			kept[v] = protect[v]
		case g.named[v]:
			out = append(out, v)
		case ref == "" || versions.less(ref, v):
			// Newer than the live version: only when named.
			kept[v] = keptNewer
		case i >= len(sorted)-keep:
			kept[v] = keptNewest
		default:
			out = append(out, v)
		}
	}
	return out, kept
}

// dirVersions are version directory names parsed, each once; a name that does not parse is
// not among them.
type dirVersions map[string]layout.Version

// parseDirs parses version directory names.
func parseDirs(names []string) dirVersions {
	d := make(dirVersions, len(names))
	for _, name := range names {
		if v, err := layout.ParseVersion(name); err == nil {
			d[name] = v
		}
	}
	return d
}

// less orders version directories by version, then by spelling.
func (d dirVersions) less(a, b string) bool {
	va, okA := d[a]
	vb, okB := d[b]
	if okA && okB {
		if c := va.Compare(vb); c != 0 {
			return c < 0
		}
	}
	return a < b
}
