package upgrade

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	goversion "github.com/hashicorp/go-version"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/upgrade/config"
)

// DefaultKeep is how many of the newest installed versions `cutover prune` keeps besides the
// ones a run needs.
const DefaultKeep = 2

// PruneOptions are what the operator asked of `cutover prune`.
type PruneOptions struct {
	// Keep is how many of the newest installed versions are kept whatever else holds.
	Keep int
	// DryRun lists what would be removed; it changes nothing.
	DryRun bool
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
	keep    int
	pending []string // version directories a pending run needs
	mu      sync.Mutex
	remove  map[string][]string
}

// Prune removes, on every online node, the installed versions that no run needs: not the live
// one, not the previous one (the downgrade target: the newest installed below the live
// version), not the source or target of a pending run, not among the Keep newest. A version
// is moved out of sight first, its share tree before its lib tree, so that it stops counting
// as installed at once, and only then removed; an interrupted prune leaves hidden directories
// that the next prune removes. Journaled with Kind "prune".
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
	if in := s.intent; in != nil {
		for _, v := range []string{in.From, in.To} {
			if dir, err := r.Layout.VersionDir(v); err == nil {
				job.pending = append(job.pending, dir)
			}
		}
	}
	res := &PruneResult{App: cfg.App, Remove: job.remove}
	r.Direction = "prune"
	stages := PruneStages(job)
	if opts.DryRun {
		err := (&Runner{Stages: stages[:1]}).Execute(ctx, r)
		res.Duration = time.Since(start)
		return res, err
	}
	closeOrphans(ctx, journal.NewStore(JournalPath(cfg)), r)
	store := crashJournal{journal.NewStore(JournalPath(cfg))}
	host, _ := os.Hostname()
	jr, err := store.CreateRun(ctx, journal.Run{Kind: "prune", Direction: "prune", Host: host, PID: os.Getpid(),
		Facts: map[string]string{"keep": fmt.Sprint(opts.Keep)}})
	if err != nil {
		return res, fmt.Errorf("journal: %w", err)
	}
	r.ID, r.journal, r.facts = jr.ID, store, jr.Facts
	if err := r.tagCommands(); err != nil {
		return res, err
	}
	res.Run = jr.ID
	if r.log, err = openRunLog(cfg.Paths.StateDir, r.ID); err != nil {
		return res, err
	}
	defer r.log.Close()
	res.Log = r.log.Path()
	r.report.Report(Event{Time: time.Now(), Type: "run", Run: r.ID, Message: fmt.Sprintf("run %d: prune %s on %s (keeping the %d newest)",
		r.ID, cfg.App, plural(len(r.Online), "node"), opts.Keep)})
	err = (&Runner{Stages: stages}).Execute(ctx, r)
	res.Duration = time.Since(start)
	if err != nil && !IsBadInput(err) {
		err = fmt.Errorf("%w; run 'cutover prune' again to finish", err)
	}
	return res, err
}

// prunable returns the installed version directories (sorted oldest first) that no run needs.
func prunable(installed []string, live string, pending []string, keep int) []string {
	sorted := slices.Clone(installed)
	sort.SliceStable(sorted, func(i, j int) bool { return versionLess(sorted[i], sorted[j]) })
	protect := map[string]bool{live: true}
	for _, p := range pending {
		protect[p] = true
	}
	for i := len(sorted) - 1; i >= 0; i-- {
		if versionLess(sorted[i], live) {
			protect[sorted[i]] = true // the previous version: the downgrade target
			break
		}
	}
	for i := len(sorted) - 1; i >= 0 && i >= len(sorted)-keep; i-- {
		protect[sorted[i]] = true
	}
	var out []string
	for _, v := range sorted {
		if !protect[v] {
			out = append(out, v)
		}
	}
	return out
}

// versionLess orders version directories by version, then by spelling.
func versionLess(a, b string) bool {
	va, errA := goversion.NewVersion(a)
	vb, errB := goversion.NewVersion(b)
	if errA == nil && errB == nil && !va.Equal(vb) {
		return va.LessThan(vb)
	}
	return strings.Compare(a, b) < 0
}
