package upgrade

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/config"
	"github.com/cutover/cutover/upgrade/staging"
)

// StageOptions are what the operator asked of `cutover stage`.
type StageOptions struct {
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

// StageResult describes a finished stage run, successful or not.
type StageResult struct {
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

// StageStages returns the stages of `cutover stage` in the order they run. Nothing is undone:
// an interrupted stage run leaves hidden temporary directories that the next run finishes.
func StageStages(job *stageJob) []Stage {
	return []Stage{
		stageCheck{job}, // 1 all: not live, not differing (unless --replace), disk space
		stageSend{job},  // 2 all: both trees into their temporary directories, checked
		stagePlace{job}, // 3 all: renamed into place, share last
	}
}

// stageJob is what the stages of one stage run share.
type stageJob struct {
	version    string
	lib, share *staging.Tree
	libDir     string // the trees' final places on the nodes
	shareDir   string
	replace    bool
	pending    []string // versions a pending run needs
	mu         sync.Mutex
	states     map[string][2]treeState // per node: what it holds of lib and share
	already    map[string]bool
	replacing  map[string]bool
	sent       atomic.Int64
	diskNeeded int64
}

// StageVersion puts a version's two trees on every online node ahead of a switch. It refuses,
// before sending anything: a bad version or source (IsBadInput), a run pending, a node where
// the version is live, a node holding a different copy of it (unless Replace, and never one a
// pending run needs), a node without the disk space. A node that holds exactly the version
// already is left alone. The run is journaled with Kind "stage" and writes no intent: an
// interrupted stage is finished by running it again, which sends only what is missing.
func StageVersion(ctx context.Context, cfg *config.Config, opts StageOptions) (*StageResult, error) {
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
	libDir, shareDir, err := r.Layout.Trees(opts.Version)
	if err != nil {
		return nil, badInput(fmt.Errorf("stage --version=%q: %w", opts.Version, err))
	}
	root, cleanup, err := openSource(opts.Source, cfg.Paths.StateDir)
	if err != nil {
		return nil, badInput(fmt.Errorf("stage: %w", err))
	}
	defer cleanup()
	job := &stageJob{version: opts.Version, libDir: libDir, shareDir: shareDir, replace: opts.Replace,
		states: map[string][2]treeState{}, already: map[string]bool{}, replacing: map[string]bool{}}
	for _, t := range []struct {
		dst  **staging.Tree
		tree string
	}{{&job.lib, libDir}, {&job.share, shareDir}} {
		dir := filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(t.tree, "/")))
		if *t.dst, err = staging.ReadTree(dir); err != nil {
			return nil, badInput(fmt.Errorf("stage: %s must hold %s: %w", opts.Source, strings.TrimPrefix(t.tree, "/"), sourceError(err, root, opts.Source)))
		}
	}
	job.diskNeeded = job.lib.Bytes + job.share.Bytes
	res := &StageResult{App: cfg.App, Version: opts.Version, TreeBytes: job.diskNeeded, DiskNeeded: job.diskNeeded}
	for _, n := range r.Online {
		res.Nodes = append(res.Nodes, n.Name)
	}
	r.To, r.Direction = opts.Version, "stage"
	stages := StageStages(job)
	if opts.DryRun {
		err := (&Runner{Stages: stages[:1]}).Execute(ctx, r)
		res.Already, res.Duration = job.alreadyNodes(res.Nodes), time.Since(start)
		return res, err
	}

	closeOrphans(ctx, journal.NewStore(JournalPath(cfg)), r)
	store := crashJournal{journal.NewStore(JournalPath(cfg))}
	host, _ := os.Hostname()
	jr, err := store.CreateRun(ctx, journal.Run{Kind: "stage", To: opts.Version, Direction: "stage", Host: host, PID: os.Getpid(),
		Facts: map[string]string{"source": opts.Source, "bytes": fmt.Sprint(job.diskNeeded)}})
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
	r.log.Printf("run %d: stage %s %s from %s (%d bytes)", r.ID, cfg.App, opts.Version, opts.Source, job.diskNeeded)
	r.report.Report(Event{Time: time.Now(), Type: "run", Run: r.ID, Message: fmt.Sprintf("run %d: stage %s %s (%s) on %s (master %s)",
		r.ID, cfg.App, opts.Version, megabytes(job.diskNeeded), listOrNone(res.Nodes), r.Inventory.Master)})
	err = (&Runner{Stages: stages}).Execute(ctx, r)
	res.Already, res.Sent, res.Duration = job.alreadyNodes(res.Nodes), job.sent.Load(), time.Since(start)
	if err != nil && !IsBadInput(err) {
		err = fmt.Errorf("%w; run the same 'cutover stage' again to finish: it sends only what is missing, and a half-staged version never counts as installed", err)
	}
	return res, err
}

// nodeStates returns what the check found on node.
func (j *stageJob) nodeStates(node string) [2]treeState {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.states[node]
}

func (j *stageJob) alreadyNodes(all []string) []string {
	var out []string
	for _, n := range all {
		if j.already[n] {
			out = append(out, n)
		}
	}
	return out
}

// megabytes formats a byte count for people.
func megabytes(n int64) string {
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}

// sourceError is err about the trees of source as found in root: for a .tar.gz, the names in
// it are those of the archive's entries, not of the private directory it was unpacked into.
func sourceError(err error, root, source string) error {
	if root == source {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), root+string(filepath.Separator), ""))
}

// maxSourceFiles bounds the entries of a .tar.gz source.
const maxSourceFiles = 1 << 20

// openSource returns the directory a SOURCE holds its trees in: the directory itself, or a
// .tar.gz unpacked into a private temporary directory under stateDir (removed by cleanup).
// The archive may hold directories, regular files and symbolic links with clean relative
// names; anything else is refused.
func openSource(source, stateDir string) (dir string, cleanup func(), err error) {
	noop := func() {}
	fi, err := os.Stat(source)
	if err != nil {
		return "", noop, err
	}
	if fi.IsDir() {
		return source, noop, nil
	}
	if !strings.HasSuffix(source, ".tar.gz") && !strings.HasSuffix(source, ".tgz") {
		return "", noop, fmt.Errorf("%s is neither a directory nor a .tar.gz", source)
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return "", noop, err
	}
	tmp, err := os.MkdirTemp(stateDir, "stage-source-")
	if err != nil {
		return "", noop, err
	}
	cleanup = func() { os.RemoveAll(tmp) }
	if err := unpack(source, tmp); err != nil {
		cleanup()
		return "", noop, fmt.Errorf("%s: %w", source, err)
	}
	return tmp, cleanup, nil
}

// unpack extracts a .tar.gz into dir, which must be empty.
func unpack(source, dir string) error {
	f, err := os.Open(source)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for n := 0; ; n++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if n >= maxSourceFiles {
			return fmt.Errorf("more than %d entries", maxSourceFiles)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if name == "." {
			continue
		}
		if !fs.ValidPath(name) {
			return fmt.Errorf("entry %q: not a clean relative name", h.Name)
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := noLinkBelow(dir, filepath.Dir(p)); err != nil {
			return fmt.Errorf("entry %q: %w", h.Name, err)
		}
		mode := fs.FileMode(h.Mode) & fs.ModePerm
		if h.Mode&0o4000 != 0 {
			mode |= fs.ModeSetuid
		}
		if h.Mode&0o2000 != 0 {
			mode |= fs.ModeSetgid
		}
		if h.Mode&0o1000 != 0 {
			mode |= fs.ModeSticky
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			if err := os.Chmod(p, mode); err != nil {
				return err
			}
		case tar.TypeReg:
			out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return fmt.Errorf("entry %q: %w", h.Name, err)
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				err = os.Chmod(p, mode)
			}
			if err == nil {
				err = os.Chtimes(p, h.ModTime, h.ModTime)
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, p); err != nil {
				return fmt.Errorf("entry %q: %w", h.Name, err)
			}
		default:
			return fmt.Errorf("entry %q: type %q: a version tree holds directories, files and links only", h.Name, h.Typeflag)
		}
	}
}

// noLinkBelow refuses a path under root that passes through a symbolic link: an archive must
// not write through a link it made itself.
func noLinkBelow(root, p string) error {
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == "." {
		return err
	}
	cur := root
	for _, el := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, el)
		fi, err := os.Lstat(cur)
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s is a link: an archive may not write through it", cur)
		}
	}
	return nil
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

func (l loggedStream) Run(ctx context.Context, argv ...string) (nodes.Result, error) {
	line := nodes.QuoteArgs(argv)
	crashPoint(true, "%s: command started: %s", l.lc.node, line)
	res, err := l.Conn.Run(ctx, argv...)
	crashPoint(false, "%s: command finished: %s", l.lc.node, line)
	l.lc.log.Command(l.lc.node, line, res, err)
	return res, err
}

func (l loggedStream) RunInput(ctx context.Context, input io.Reader, argv ...string) (nodes.Result, error) {
	line := nodes.QuoteArgs(argv) + " < (stream)"
	crashPoint(true, "%s: command started: %s", l.lc.node, line)
	res, err := l.Conn.RunInput(ctx, input, argv...)
	crashPoint(false, "%s: command finished: %s", l.lc.node, line)
	l.lc.log.Command(l.lc.node, line, res, err)
	return res, err
}
