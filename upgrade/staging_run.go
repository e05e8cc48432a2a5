package upgrade

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/config"
	"github.com/cutover/cutover/upgrade/staging"
)

// StagingOptions are what the operator asked of `cutover stage`.
type StagingOptions struct {
	// Version is the version to stage.
	Version string
	// Source is a directory or a .tar.gz holding <libdir>/<app>/<VERSIONDIR> and
	// <datadir>/<app>/<VERSIONDIR> relative to its root.
	Source string
	// Replace lets an existing, different copy of the version be replaced (never a live one,
	// nor one a pending run needs).
	Replace bool
	// DryRun runs the checks and reports what would be sent; it changes nothing.
	DryRun bool
	// Reporter receives the run's events; nil reports nothing.
	Reporter Reporter
	// Hostname is the local host's name; "" asks the system.
	Hostname string
}

// StagingResult describes a finished stage run, successful or not.
type StagingResult struct {
	Run        uint64
	App        string
	Version    string
	Nodes      []string // the online nodes
	Already    []string // nodes that held exactly this version before: nothing was sent to them
	TreeBytes  int64    // the file contents of both trees
	Sent       int64    // the bytes of file contents sent, all nodes together
	Log        string
	Duration   time.Duration
	DiskNeeded int64 // the bytes each node needs free for the trees
}

// StagingStages returns the stages of `cutover stage` in the order they run. Nothing is undone:
// an interrupted stage run leaves hidden temporary directories that the next run finishes.
func StagingStages(job *stagingJob) []Stage {
	return []Stage{
		stagingCheck{job}, // 1 all: not live, not differing (unless --replace), disk space
		stagingSend{job},  // 2 all: both trees into their temporary directories, checked
		stagingPlace{job}, // 3 all: renamed into place, share last
	}
}

// stagingJob is what the stages of one stage run share.
type stagingJob struct {
	version    layout.Version
	lib, share *staging.Tree
	libDir     string // the trees' final places on the nodes
	shareDir   string
	replace    bool
	src        *stagingSource
	pending    []string // versions a pending run needs
	mu         sync.Mutex
	states     map[string][2]treeState     // per node: what it holds of lib and share
	sent       map[string][2]*staging.Sent // per node: what send checked of lib and share
	already    map[string]bool
	replacing  map[string]bool
	bytes      atomic.Int64 // the bytes of file contents sent, all nodes together
	diskNeeded int64
}

// StageVersion puts a version's two trees on every online node ahead of a switch. It refuses,
// before sending anything: a bad version or source (IsBadInput), a run pending, a node where
// the version is live, a node holding a different copy of it (unless Replace, and never one a
// pending run needs), a node without the disk space. A node that holds exactly the version
// already is left alone. The run is journaled with Kind "stage" and writes no intent: an
// interrupted stage is finished by running it again, which sends only what is missing.
func StageVersion(ctx context.Context, cfg *config.Config, opts StagingOptions) (*StagingResult, error) {
	start := time.Now()
	s, err := openSession(ctx, cfg, modeExclusive, sessionOptions{Reporter: opts.Reporter, Hostname: opts.Hostname, HostCheck: true})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	r := s.r
	if err := s.refusePending("staging a version"); err != nil {
		return nil, err
	}
	version, err := layout.ParseVersion(opts.Version)
	if err != nil {
		return nil, badInput(fmt.Errorf("stage --version=%q: %w", opts.Version, err))
	}
	libDir, shareDir := r.Layout.Trees(version)
	names := []string{strings.TrimPrefix(libDir, "/"), strings.TrimPrefix(shareDir, "/")}
	src := &stagingSource{path: opts.Source, stateDir: cfg.Paths.StateDir, stamps: StampsPath(cfg), names: names, policy: stagingPolicy(cfg.Stage), dryRun: opts.DryRun}
	defer src.close()
	job := &stagingJob{version: version, libDir: libDir, shareDir: shareDir, replace: opts.Replace, src: src,
		states: map[string][2]treeState{}, sent: map[string][2]*staging.Sent{}, already: map[string]bool{}, replacing: map[string]bool{}}
	// The nodes are dialed while the source is read.
	ahead, stopDials := dialAhead(ctx, r.dial, r.Online, cfg.SSH.Parallel)
	defer stopDials()
	r.dial = ahead
	trees, err := src.read()
	if err != nil {
		return nil, err
	}
	job.lib, job.share = trees[0], trees[1]
	job.diskNeeded = job.lib.Bytes + job.share.Bytes
	res := &StagingResult{App: cfg.App, Version: opts.Version, TreeBytes: job.diskNeeded, DiskNeeded: job.diskNeeded}
	for _, n := range r.Online {
		res.Nodes = append(res.Nodes, n.Name)
	}
	r.To = opts.Version
	err = execute(ctx, r, recipe{
		kind: KindStaging, stages: StagingStages(job), dryRun: opts.DryRun,
		facts: map[string]string{"source": opts.Source, "bytes": fmt.Sprint(job.diskNeeded)},
		what:  fmt.Sprintf("stage %s %s (%s)", cfg.App, opts.Version, megabytes(job.diskNeeded)),
		where: fmt.Sprintf("on %s (master %s)", listOrNone(res.Nodes), r.Inventory.Master),
		begun: func(ctx context.Context, r *Run) error {
			src.logNotes(r)
			return nil
		},
	})
	res.Run, res.Log = r.ID, r.log.Path()
	res.Already, res.Sent, res.Duration = job.alreadyNodes(res.Nodes), job.bytes.Load(), time.Since(start)
	if err != nil && !opts.DryRun && r.ID != 0 && !IsBadInput(err) {
		err = fmt.Errorf("%w; run the same 'cutover stage' again to finish: it sends only what is missing, and a half-staged version never counts as installed", err)
	}
	return res, err
}

// setSent notes what send checked of the i-th tree (lib, share) on node.
func (j *stagingJob) setSent(node string, i int, s *staging.Sent) {
	j.mu.Lock()
	defer j.mu.Unlock()
	sent := j.sent[node]
	sent[i] = s
	j.sent[node] = sent
}

// nodeSent returns what send checked on node.
func (j *stagingJob) nodeSent(node string) [2]*staging.Sent {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.sent[node]
}

// nodeStates returns what the check found on node.
func (j *stagingJob) nodeStates(node string) [2]treeState {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.states[node]
}

func (j *stagingJob) alreadyNodes(all []string) []string {
	var out []string
	for _, n := range all {
		if j.already[n] {
			out = append(out, n)
		}
	}
	return out
}

// megabytes formats a byte count for people (HumanBytes).
func megabytes(n int64) string { return HumanBytes(n) }

// HumanBytes says a byte count for people: in MB from 0.1 MB on, in kB or bytes below, so
// that a small transfer never reads "0.0 MB".
func HumanBytes(n int64) string {
	switch {
	case n >= 100_000:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1000:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	case n == 1:
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}

// stagingPolicy is what [stage] allows a staged tree to hold.
func stagingPolicy(c config.StageConfig) staging.Policy {
	return staging.Policy{MaxBytes: c.MaxBytes, MaxFiles: c.MaxFiles, MaxDepth: c.MaxDepth,
		AllowSetuid: c.AllowSetuid, AllowSetgid: c.AllowSetgid, AllowWorldWritable: c.AllowWorldWritable,
		AllowDevices: c.AllowDevices, AllowFifos: c.AllowFifos, AllowHardlinks: c.AllowHardlinks}
}

// streamConn returns the node connection under c that can run argv commands and stream
// standard input to them, as staging needs (every real connection can), with its commands
// logged and crash points around them, like every command a stage runs.
func streamConn(c Conn) (staging.Conn, error) {
	lc, logged := c.(*loggedConn)
	if logged {
		c = lc.Conn
	}
	sc, ok := c.(staging.Conn)
	if !ok {
		return nil, fmt.Errorf("the connection cannot stream files")
	}
	if !logged {
		return sc, nil
	}
	return loggedStream{sc, lc}, nil
}

// loggedStream logs the commands of a staging connection to the run's log.
type loggedStream struct {
	staging.Conn
	lc *loggedConn
}

// Each command is a crash point at its start and its end, and the log gets it with its
// output, as every command of a stage (loggedConn.command).

func (l loggedStream) Run(ctx context.Context, argv ...string) (nodes.Result, error) {
	return l.lc.command(nodes.QuoteArgs(argv), func() (nodes.Result, error) { return l.Conn.Run(ctx, argv...) })
}

func (l loggedStream) RunOutput(ctx context.Context, out io.Writer, argv ...string) (nodes.Result, error) {
	return l.lc.command(nodes.QuoteArgs(argv)+" > (stream)", func() (nodes.Result, error) { return l.Conn.RunOutput(ctx, out, argv...) })
}

// RunOutputOwnSession runs the command in a session of its own where the connection can
// (staging.ReadFinals), as RunOutput otherwise.
func (l loggedStream) RunOutputOwnSession(ctx context.Context, out io.Writer, argv ...string) (nodes.Result, error) {
	run := l.Conn.RunOutput
	if own, ok := l.Conn.(interface {
		RunOutputOwnSession(context.Context, io.Writer, ...string) (nodes.Result, error)
	}); ok {
		run = own.RunOutputOwnSession
	}
	return l.lc.command(nodes.QuoteArgs(argv)+" > (stream)", func() (nodes.Result, error) { return run(ctx, out, argv...) })
}

func (l loggedStream) RunInput(ctx context.Context, input io.Reader, argv ...string) (nodes.Result, error) {
	return l.lc.command(nodes.QuoteArgs(argv)+" < (stream)", func() (nodes.Result, error) { return l.Conn.RunInput(ctx, input, argv...) })
}
