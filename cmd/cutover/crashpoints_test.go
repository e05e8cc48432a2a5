package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/nodes/sshdtest"
	"github.com/cutover/cutover/upgrade/staging"
)

// The crash-point test (docs/design.md §4, "Crash model") kills cutover with SIGKILL at every crash
// point of a run, one point per fresh fixture, runs the recovery an operator or cron would,
// and checks that the cluster ended exactly at the run's source or exactly at its target,
// with a journal that agrees, an exit code that tells the truth, and no command of the dead
// process still running.
//
// cutover numbers its crash points itself (upgrade/crashpoint.go): with CUTOVER_CRASH_LOG it
// logs every point it passes, with CUTOVER_CRASH_AT=N it kills itself at the Nth. The test
// counts the points of an uninterrupted run first, so it never hard-codes their number.
//
// To have a process to kill, the test binary runs itself as cutover: TestMain calls main when
// crashMainEnv is set.

// crashMainEnv makes the test binary run cutover's main instead of the tests.
const crashMainEnv = "CUTOVER_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(crashMainEnv) == "1" {
		main()
	}
	if code, ok := runApart(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// crashScenario is one command whose every crash point the test kills cutover at.
type crashScenario struct {
	name string
	fix  fixtureOpts
	// from and to are the run's source and target versions.
	from, to string
	// sourceOnly says the run must end at its source: an undo, an abort.
	sourceOnly bool
	// pre, when set, first kills an upgrade from -> to "before-ponr" (its master's daemons
	// just stopped), "after-ponr" (its config just migrated) or "watching" (its watch's first
	// check journaled); the scenario's command then
	// continues or undoes that run. "resume-after-ponr" also kills the first --resume of the
	// run killed "after-ponr" (when it first starts the daemons): the scenario's --resume
	// continues the run a second time.
	pre string
	// kind says what the command is and how to recover: "run" (upgrade, downgrade, undo and
	// resume, recovered by --resume), "abort" (recovered by --abort), "restore", "sync",
	// "stage", "prune" (each recovered by running it again).
	kind string
	args []string
	// powerCut runs the scenario in the power-cut mode (powercut_test.go): the fixture is on
	// a file system of its own whose power each crash point cuts.
	powerCut bool
	// nodeCut, with powerCut, cuts the power of that node's own file system (fixtureOpts's
	// nodeDisks) instead of the master's.
	nodeCut string
	// behind names a node the run leaves at its source within its failure budget while the
	// others reach the target.
	behind string
}

// crashProblem is one part of the invariant that a crash point broke. class names the kind
// of problem, the same for every point that has it; detail says what exactly.
type crashProblem struct{ class, detail string }

// crashPoint is what happened at one crash point.
type crashPoint struct {
	n         int
	desc      string
	subject   crashRun
	afterKill string
	recovery  []crashRun
	problems  []crashProblem
}

// crashReference is what a scenario's points are judged against.
type crashReference struct {
	count        int
	sourceConfig []byte
	targetConfig []byte
	preAt        int      // the point the setup kills the first upgrade at
	resumeAt     int      // with pre "resume-after-ponr", the point the setup kills its first resume at
	points       []string // the scenario command's crash log
}

// crashScenarios are the scenarios on the local one-node cluster, each with the queue and the
// reconciler as the operator left them: clear, or drained and paused.
func crashScenarios() []crashScenario {
	var out []crashScenario
	for _, flags := range []bool{false, true} {
		suffix := "/flags-clear"
		if flags {
			suffix = "/flags-set"
		}
		fix := func(live string) fixtureOpts { return fixtureOpts{live: live, flagsSet: flags} }
		undoStop := fix("1.0.0")
		undoStop.failStop = true
		undoSwitch := fix("1.0.0")
		undoSwitch.execMigrate = true
		out = append(out,
			crashScenario{name: "upgrade" + suffix, fix: fix("1.0.0"), from: "1.0.0", to: "1.1.0", kind: "run", args: []string{"upgrade", "--to=1.1.0", "--yes"}},
			crashScenario{name: "downgrade" + suffix, fix: fix("1.1.0"), from: "1.1.0", to: "1.0.0", kind: "run", args: []string{"upgrade", "--to=1.0.0", "--yes"}},
			crashScenario{name: "undo-stop" + suffix, fix: undoStop, from: "1.0.0", to: "1.1.0", sourceOnly: true, kind: "run", args: []string{"upgrade", "--to=1.1.0", "--yes"}},
			crashScenario{name: "undo-switch" + suffix, fix: undoSwitch, from: "1.0.0", to: "1.1.0", sourceOnly: true, kind: "run", args: []string{"upgrade", "--to=1.1.0", "--yes"}},
			crashScenario{name: "abort" + suffix, fix: fix("1.0.0"), from: "1.0.0", to: "1.1.0", sourceOnly: true, pre: "before-ponr", kind: "abort", args: []string{"upgrade", "--abort"}},
			crashScenario{name: "resume-before-ponr" + suffix, fix: fix("1.0.0"), from: "1.0.0", to: "1.1.0", pre: "before-ponr", kind: "run", args: []string{"upgrade", "--resume"}},
			crashScenario{name: "resume-after-ponr" + suffix, fix: fix("1.0.0"), from: "1.0.0", to: "1.1.0", pre: "after-ponr", kind: "run", args: []string{"upgrade", "--resume"}},
		)
	}
	rolling := fixtureOpts{live: "1.0.0", rolling: true}
	rollingDown := fixtureOpts{live: "1.1.0", rolling: true}
	rollingUndo := fixtureOpts{live: "1.0.0", rolling: true, failVerify: true}
	out = append(out,
		crashScenario{name: "rolling-upgrade", fix: rolling, from: "1.0.0", to: "1.1.0", kind: "run", args: []string{"upgrade", "--to=1.1.0", "--yes"}},
		crashScenario{name: "rolling-downgrade", fix: rollingDown, from: "1.1.0", to: "1.0.0", kind: "run", args: []string{"upgrade", "--to=1.0.0", "--yes"}},
		crashScenario{name: "rolling-undo", fix: rollingUndo, from: "1.0.0", to: "1.1.0", sourceOnly: true, kind: "run", args: []string{"upgrade", "--to=1.1.0", "--yes"}},
	)
	// redist_conf rewrites a file the daemons read as they start: the restart after it must
	// happen whatever execution of the run ran it.
	out = append(out, crashScenario{name: "redist", fix: fixtureOpts{live: "1.0.0", redist: true}, from: "1.0.0", to: "1.1.0", kind: "run", args: []string{"upgrade", "--to=1.1.0", "--yes"}})
	out = append(out, crashScenario{name: "resume-of-resume", fix: fixtureOpts{live: "1.0.0"}, from: "1.0.0", to: "1.1.0", pre: "resume-after-ponr", kind: "run", args: []string{"upgrade", "--resume"}})
	// The watch: an upgrade killed in its watch, which --resume takes up and ends done.
	out = append(out, crashScenario{name: "watch", fix: fixtureOpts{live: "1.0.0", watch: "2s"}, from: "1.0.0", to: "1.1.0", pre: "watching", kind: "run", args: []string{"upgrade", "--resume"}})
	out = append(out, crashScenario{name: "prune", fix: fixtureOpts{live: "1.1.0", extraVersion: pruneVersion}, from: "1.1.0", to: "1.1.0", kind: "prune", args: []string{"prune", "--yes"}})
	out = append(out, crashScenario{name: "backup-restore", fix: fixtureOpts{live: "1.0.0"}, from: "1.1.0", to: "1.0.0", kind: "restore", args: []string{"backup", "restore", "ID"}})
	out = append(out, crashScenario{name: "stage", fix: fixtureOpts{live: "1.0.0"}, from: "1.0.0", to: "1.2.0", kind: "stage", args: []string{"stage", "--version=1.2.0", "SOURCE"}})
	return out
}

// sshScenario is a scenario whose nodes besides the master are real sshd servers on this
// host, started for it.
type sshScenario struct {
	name    string
	servers int
	// views gives every node links of its own (crashnodes_test.go); nodeDisks, which runs in
	// the power-cut mode only, puts them and the node's trees on a file system of its own
	// whose power the scenario's points cut.
	views, nodeDisks bool
	// killOnly runs the scenario in the kill mode alone: what it adds to another scenario
	// writes nothing that the other does not write the same way.
	killOnly bool
	// scenario describes the scenario on a fixture with the servers (and views and disks).
	scenario func(fix fixtureOpts) crashScenario
}

// sshScenarios are the scenarios on sshd nodes.
var sshScenarios = []sshScenario{
	// The node shares the master's file system: its links and config are the master's, so
	// only its daemons tell a sync's source from its target.
	{name: "sync", servers: 1, scenario: func(fix fixtureOpts) crashScenario {
		fix.live = "1.0.0"
		return crashScenario{fix: fix, from: "1.0.0", to: "1.0.0", kind: "sync", args: []string{"sync", "--yes", "node2"}}
	}},
	// A sync that watches the node after its verify ([policy] watch): killed anywhere, even in
	// its watch, it leaves nothing pending, and running it again syncs and watches again. Its
	// watch's facts are journaled as an upgrade's, whose watch the power cut covers.
	{name: "sync-watch", servers: 1, killOnly: true, scenario: func(fix fixtureOpts) crashScenario {
		fix.live, fix.watch = "1.0.0", "1s"
		return crashScenario{fix: fix, from: "1.0.0", to: "1.0.0", kind: "sync", args: []string{"sync", "--yes", "node2"}}
	}},
	// The power cut of a node: node2's links and trees are on a file system of its own,
	// behind the master's version; the sync switches it, and each point cuts the power of
	// node2's file system (and kills cutover).
	{name: "node-sync", servers: 1, views: true, nodeDisks: true, scenario: func(fix fixtureOpts) crashScenario {
		fix.live, fix.nodeLive = "1.1.0", map[string]string{"node2": "1.0.0"}
		return crashScenario{fix: fix, from: "1.0.0", to: "1.1.0", kind: "sync", args: []string{"sync", "--yes", "node2"}, nodeCut: "node2"}
	}},
}

// crashResults collects every scenario's points for the summary.
type crashResults struct {
	mu        sync.Mutex
	scenarios map[string][]crashPoint
	counts    map[string]int // each scenario's crash points, tried or not
	broken    []string       // scenarios whose reference run failed
}

// TestCrashPoints kills cutover at a spread of the crash points (pointSpread; with
// CUTOVER_CRASH_ALL=1 at every one) of an upgrade, a downgrade, two undos, an
// abort, two resumes, a resume of a killed resume, a backup restore, a sync, a stage and a
// prune, and checks the crash model's invariant after the recovery (see the comment at the top
// of this file). Every point runs on its own fixture. Each scenario is a parallel subtest, but
// its work starts as soon as the subtest is selected, not when -parallel lets it run: the
// points of every scenario share one pool of crashSlots processes, so the test takes as long
// as its points need, not as long as GOMAXPROCS scenarios at a time would. Every scenario runs again in the power-cut mode
// (powercut/..., see powercut_test.go), at a spread of its points or, with CUTOVER_CRASH_ALL=1,
// at all of them; and powercut/node-sync cuts the power of a node's own file system instead of
// the master's, at every point of a sync that switches that node.
func TestCrashPoints(t *testing.T) {
	var err error
	if crashBinary, err = os.Executable(); err != nil {
		t.Fatal(err)
	}
	slots := make(chan struct{}, crashSlots())
	res := &crashResults{scenarios: map[string][]crashPoint{}, counts: map[string]int{}}
	start := time.Now()
	t.Run("scenario", func(t *testing.T) {
		for _, powerCut := range []bool{false, true} {
			prefix := ""
			if powerCut {
				prefix = "powercut/"
			}
			for _, sc := range crashScenarios() {
				if powerCut && sc.fix.flagsSet && os.Getenv(crashAllEnv) != "1" {
					// What the power cut tests is what is on the disk, and the queue's and
					// the reconciler's flags are not on it (run/ lives beside it): the
					// flags-set runs do the same file operations as the flags-clear ones.
					// make crash-all runs them too.
					continue
				}
				sc.name, sc.powerCut = prefix+sc.name, powerCut
				t.Run(sc.name, func(t *testing.T) {
					if powerCut {
						requirePowerCut(t)
					}
					done := sc.start(t.TempDir(), slots, newPowerDisks(t))
					t.Parallel()
					sc.finish(t, <-done, res)
				})
			}
			for _, ss := range sshScenarios {
				if ss.nodeDisks && !powerCut || ss.killOnly && powerCut {
					continue // a node's disk is there to have its power cut
				}
				t.Run(prefix+ss.name, func(t *testing.T) {
					if powerCut {
						requirePowerCut(t)
					}
					if ss.views {
						requireNodeViews(t)
					}
					c := sshdtest.Start(t, ss.servers)
					fix := fixtureOpts{ssh: c, sshDir: c.UserDir(t)}
					if ss.views {
						fix.views = startNodeViews(t, c)
					}
					disks := newPowerDisks(t)
					if ss.nodeDisks {
						fix.nodeDisks = disks
					}
					sc := ss.scenario(fix)
					sc.name, sc.powerCut = prefix+ss.name, powerCut
					done := sc.start(t.TempDir(), slots, disks)
					t.Parallel()
					sc.finish(t, <-done, res)
				})
			}
		}
	})
	res.summarize(t, time.Since(start))
}

// crashSlots is how many crash points run at once: they mostly wait (daemons_stop sleeps,
// the journal syncs), so a few per CPU.
func crashSlots() int {
	if n, err := strconv.Atoi(os.Getenv("CUTOVER_CRASH_SLOTS")); err == nil && n > 0 {
		return n
	}
	return max(4, 6*runtime.NumCPU())
}

// crashOutcome is a scenario's finished enumeration.
type crashOutcome struct {
	points []crashPoint
	count  int   // the scenario's crash points, tried or not
	err    error // the reference run failed: no point was tried
}

// start enumerates the crash points of sc in the background, on the shared pool of slots: the
// spread (pointSpread; flagsSpread with the flags set), or all of them with crashAllEnv set and
// for a node's power cut; in the power-cut mode each on a disk of disks.
func (sc crashScenario) start(base string, slots chan struct{}, disks *powerDisks) <-chan crashOutcome {
	done := make(chan crashOutcome, 1)
	go func() {
		slots <- struct{}{}
		ref, err := sc.reference(base)
		<-slots
		if err == nil && ref.count == 0 {
			err = errors.New("the run passed no crash point")
		}
		if err != nil {
			done <- crashOutcome{err: err}
			return
		}
		var which []int
		switch {
		case os.Getenv(crashAllEnv) == "1", sc.nodeCut != "":
			for n := 1; n <= ref.count; n++ {
				which = append(which, n)
			}
		case sc.fix.flagsSet:
			which = flagsSpread(ref.points)
		default:
			which = pointSpread(ref.points)
		}
		points := make([]crashPoint, len(which))
		var wg sync.WaitGroup
		for i, n := range which {
			wg.Add(1)
			go func() {
				defer wg.Done()
				slots <- struct{}{}
				defer func() { <-slots }()
				points[i] = sc.point(base, ref, n, disks)
			}()
		}
		wg.Wait()
		done <- crashOutcome{points: points, count: ref.count}
	}()
	return done
}

// finish reports a scenario's outcome.
func (sc crashScenario) finish(t *testing.T, out crashOutcome, res *crashResults) {
	t.Helper()
	res.mu.Lock()
	res.scenarios[sc.name] = out.points
	res.counts[sc.name] = out.count
	if out.err != nil {
		res.broken = append(res.broken, fmt.Sprintf("%s: %v", sc.name, out.err))
	}
	res.mu.Unlock()
	if out.err != nil {
		t.Fatalf("%s: no crash point tried: %v", sc.name, out.err)
	}
	report(t, sc, out.points, out.count)
}

// reference runs the scenario without a kill: it counts the crash points and records what
// the points are judged against.
func (sc crashScenario) reference(base string) (crashReference, error) {
	var ref crashReference
	clean := sc.fix
	clean.failStop, clean.execMigrate, clean.failVerify, clean.failVerifyNode = false, false, false, ""
	f, err := newCrashFixture(base, clean)
	if err != nil {
		return ref, err
	}
	defer func() { _ = f.release() }()
	ref.sourceConfig, _ = os.ReadFile(f.path("var/lib/app/config.json"))
	// A clean run from -> to gives the target's config bytes and the points to kill a
	// first run at.
	if sc.kind == "run" || sc.kind == "abort" || sc.kind == "restore" {
		up := sc.from
		to := sc.to
		if sc.kind == "restore" {
			up, to = sc.to, sc.from
		}
		if up != sc.fix.live {
			return ref, fmt.Errorf("scenario starts at %s but runs from %s", sc.fix.live, up)
		}
		run := f.cutover(0, "upgrade", "--to="+to, "--yes")
		if run.code != 0 || f.world().at() != to {
			return ref, fmt.Errorf("a clean upgrade to %s did not end there:\n%v\n%s", to, run, f.world().summary(nil))
		}
		ref.targetConfig, _ = os.ReadFile(f.path("var/lib/app/config.json"))
		switch sc.pre {
		case "after-ponr", "resume-after-ponr":
			// The config is migrated: right after the point of no return, before the
			// daemons start. (A point inside a command kills a moment later; near the end of
			// a fast run it may not land at all, so the setup kills at a finished one.)
			ref.preAt = run.findPoint("journal: config-upgrade done", false)
			if ref.preAt == 0 {
				ref.preAt = run.findPoint("command finished: ensure_dirs", false)
			}
		case "before-ponr":
			// Right after the master's daemons stopped: drained, paused, stopped.
			ref.preAt = run.findPoint("command finished: daemons_stop", true)
		case "watching":
			// The first check of the watch is journaled: the run is finished and watched.
			ref.preAt = run.findPoint("journal: facts map[watch.1.check.", false)
		}
		if sc.pre != "" && ref.preAt == 0 {
			return ref, fmt.Errorf("no crash point of a clean upgrade is %s:\n%s", sc.pre, strings.Join(run.points, "\n"))
		}
		if sc.pre == "resume-after-ponr" {
			if ref.resumeAt, err = sc.firstResumePoint(base, ref); err != nil {
				return ref, err
			}
		}
		if sc.kind == "restore" {
			ids, _ := filepath.Glob(f.path("state/backups/app-" + sc.to + "-to-" + sc.from + "-*.tar.gz"))
			if len(ids) != 1 {
				return ref, fmt.Errorf("backups after a clean upgrade: %v, want one", ids)
			}
		}
	}

	// The scenario's command itself, counted.
	f, err = newCrashFixture(base, sc.fix)
	if err != nil {
		return ref, err
	}
	defer func() { _ = f.release() }()
	args, err := sc.setup(f, ref)
	if err != nil {
		return ref, err
	}
	run := f.cutover(0, args...)
	ref.count, ref.points = len(run.points), run.points
	want := 0
	switch {
	case sc.kind == "run" && sc.sourceOnly:
		want = 1
	case sc.behind != "":
		want = exitPastPONR
	}
	if run.code != want {
		return ref, fmt.Errorf("uninterrupted, the scenario's command does not exit %d:\n%v", want, run)
	}
	return ref, nil
}

// setup prepares a fresh fixture for the scenario's command and returns the command.
func (sc crashScenario) setup(f *crashFixture, ref crashReference) ([]string, error) {
	switch {
	case sc.pre != "":
		run := f.cutover(ref.preAt, "upgrade", "--to="+sc.to, "--yes")
		if !run.killed {
			return nil, fmt.Errorf("setup: the first upgrade was to die at point %d (%s) but did not:\n%v", ref.preAt, sc.pre, run)
		}
		if left := f.waitCommands(crashSettle); len(left) > 0 {
			return nil, fmt.Errorf("setup: commands of the killed first upgrade still run: %v", left)
		}
		if !f.world().intent {
			return nil, fmt.Errorf("setup: the upgrade killed at point %d left no intent", ref.preAt)
		}
		if sc.pre == "resume-after-ponr" {
			run := f.cutover(ref.resumeAt, "upgrade", "--resume")
			if !run.killed {
				return nil, fmt.Errorf("setup: the first resume was to die at point %d but did not:\n%v", ref.resumeAt, run)
			}
			if left := f.waitCommands(crashSettle); len(left) > 0 {
				return nil, fmt.Errorf("setup: commands of the killed first resume still run: %v", left)
			}
			if !f.world().intent {
				return nil, fmt.Errorf("setup: the resume killed at point %d left no intent", ref.resumeAt)
			}
		}
	case sc.kind == "stage":
		src, err := f.stageSource(sc.to)
		if err != nil {
			return nil, err
		}
		return []string{"stage", "--version=" + sc.to, src}, nil
	case sc.kind == "restore":
		run := f.cutover(0, "upgrade", "--to="+sc.from, "--yes")
		if run.code != 0 {
			return nil, fmt.Errorf("setup: upgrade to %s:\n%v", sc.from, run)
		}
		for _, n := range f.nodes {
			if err := os.WriteFile(f.path("run/daemons."+n), []byte("stopped\n"), 0o666); err != nil {
				return nil, err
			}
		}
		ids, _ := filepath.Glob(f.path("state/backups/app-" + sc.to + "-to-" + sc.from + "-*.tar.gz"))
		if len(ids) != 1 {
			return nil, fmt.Errorf("setup: backups after the upgrade: %v, want one", ids)
		}
		return []string{"backup", "restore", strings.TrimSuffix(filepath.Base(ids[0]), ".tar.gz")}, nil
	}
	return sc.args, nil
}

// point kills the scenario's command at crash point n on a fresh fixture, recovers and
// checks the invariant. In the power-cut mode the fixture is on a new disk of disks, whose
// power the point cuts.
func (sc crashScenario) point(base string, ref crashReference, n int, disks *powerDisks) (p crashPoint) {
	p = crashPoint{n: n, desc: "?"}
	fail := func(class, format string, args ...any) {
		p.problems = append(p.problems, crashProblem{class, fmt.Sprintf(format, args...)})
	}
	fix := sc.fix
	if strings.Contains(crashRun{points: ref.points}.point(n), "daemons_stop") {
		// Stops may be in flight at this point: make them outlast the grace.
		fix.stopSleep = crashSlowStopSleep
	}
	var disk *powerDisk
	if sc.powerCut && sc.nodeCut == "" {
		diskBase := base
		if fix.ssh != nil {
			diskBase = fix.sshDir
		}
		var err error
		if disk, err = disks.create(diskBase); err != nil {
			fail("test setup failed", "power cut: %v", err)
			return p
		}
		fix.root = disk.root
		defer func() {
			if err := disks.release(disk); err != nil {
				fail("test setup failed", "power cut: %v", err)
			}
		}()
	}
	f, err := newCrashFixture(base, fix)
	if err != nil {
		fail("test setup failed", "%v", err)
		return p
	}
	defer func() {
		if err := f.release(); err != nil {
			fail("test setup failed", "releasing the nodes' views and disks: %v", err)
		}
		if len(p.problems) == 0 && disk == nil {
			os.RemoveAll(f.root)
		}
	}()
	if sc.nodeCut != "" {
		disk = f.nodeDisks[sc.nodeCut]
	}
	before := f.world()
	preTree := f.tree()
	prePrune := f.versionTrees()
	args, err := sc.setup(f, ref)
	if err != nil {
		fail("test setup failed", "%v", f.norm(err.Error()))
		return p
	}
	beforeTree := f.tree() // restore: the state the restore replaces
	if disk != nil {
		// The point starts from a state on disk, and the command cuts the power.
		if err := disk.sync(); err != nil {
			fail("test setup failed", "power cut: syncfs: %v", err)
			return p
		}
		f.powerCut = disk.root
	}
	nodeBefore := f.world()

	p.subject = f.cutover(n, args...)
	p.desc = p.subject.point(n)
	if last := len(p.subject.points); p.subject.killed && last > n {
		// A point in a running command kills a moment later; the run went on meanwhile.
		p.desc += fmt.Sprintf(" [the kill landed after point %s]", p.subject.points[last-1])
	}
	if !p.subject.killed {
		if p.subject.hung {
			fail("cutover hung", "%v", p.subject)
		}
		p.desc += " [not reached: the command ended by itself]"
	}
	cut := false
	if disk != nil {
		cut = disk.shutDown()
		switch {
		case p.subject.killed && !cut:
			fail("power cut: the file system was still writable after the crash point", "%v", p.subject)
		case !p.subject.killed && cut:
			fail("power cut: cutover ran on after its crash point cut the power", "%v", p.subject)
		}
	}
	if left := f.waitCommands(crashOutliveGrace); len(left) > 0 {
		for _, l := range left {
			fail("a command outlived cutover's kill -9", "%s still runs %s after cutover died", l, crashOutliveGrace)
		}
	}
	if cut {
		// The boot after the power cut: the file system is mounted again, its log replayed.
		restart := func() error {
			// The nodes' views hold the file system their directories are on: they are
			// let go first, and attached again on the new one.
			if err := f.detachViews(); err != nil {
				return err
			}
			return errors.Join(disk.restart(), f.attachViews())
		}
		if sc.nodeCut != "" {
			restart = func() error { return f.restartNodeDisk(sc.nodeCut) }
		}
		if err := restart(); err != nil {
			fail("test setup failed", "power cut: %v", err)
			return p
		}
	}
	afterKill := f.world()
	afterRuns, afterErr := f.journalRuns()
	if cut {
		p.desc += " [power cut]"
		if afterErr != nil {
			fail("power cut: the journal is unreadable after the power came back", "%v", afterErr)
		}
		sc.checkDurable(f, &p, ref, afterKill, afterRuns, restoreArchive(preTree, beforeTree))
		sc.checkNodesDurable(&p, nodeBefore, afterKill, afterRuns)
	}
	configs := map[string][]byte{"source's": ref.sourceConfig, "target's": ref.targetConfig}
	if sc.kind == "restore" {
		configs = map[string][]byte{"1.0.0 (archived)": ref.sourceConfig, "1.1.0 (before the restore)": ref.targetConfig}
	}
	kind := "upgrade"
	switch sc.kind {
	case "restore":
		kind = "restore"
	case "sync":
		kind = "sync"
	case "stage":
		kind = "stage"
	case "prune":
		kind = "prune"
	}
	p.afterKill = afterKill.summary(configs) + "; journal: " + journalLine(afterRuns, kind)

	switch sc.kind {
	case "run", "abort":
		sc.recoverRun(f, &p, ref, before, afterKill, afterRuns)
	case "restore":
		sc.recoverRestore(f, &p, before, preTree, beforeTree)
	case "sync":
		sc.recoverSync(f, &p, before)
	case "stage":
		sc.recoverStage(f, &p, before)
	case "prune":
		sc.recoverPrune(f, &p, before, prePrune)
	}

	if left := f.waitCommands(crashSettle); len(left) > 0 {
		fail("a command still runs after the recovery", "%v", left)
	}
	racing, harmful := f.staleStops()
	for _, r := range harmful {
		fail("a dead run's daemons_stop stopped the daemons after the next run started them", "%s", r)
	}
	for _, r := range racing {
		fail("a dead run's daemons_stop was still running when the next cutover began", "%s", r)
	}
	return p
}

// recover runs a recovery command up to crashRecoveryAttempts times while it exits 3.
func (p *crashPoint) recover(f *crashFixture, args ...string) crashRun {
	var run crashRun
	for range crashRecoveryAttempts {
		run = f.cutover(0, args...)
		p.recovery = append(p.recovery, run)
		if run.code != exitPastPONR {
			break
		}
	}
	return run
}

// recoverRun recovers an upgrade, a downgrade, an undo, an abort or a resume and checks
// that the cluster is exactly at the run's source or at its target.
func (sc crashScenario) recoverRun(f *crashFixture, p *crashPoint, ref crashReference, before, afterKill crashWorld, afterRuns []journal.Run) {
	fail := func(class, format string, args ...any) {
		p.problems = append(p.problems, crashProblem{class, fmt.Sprintf(format, args...)})
	}
	// Before its intent, a run has changed nothing and the journal may still call it running
	// until the next run closes it.
	subject, _ := lastRun(afterRuns, "upgrade")
	intentDone := false
	for _, e := range subject.Events {
		if e.Stage == "intent" && e.State == journal.Done {
			intentDone = true
		}
	}
	preIntent := !afterKill.intent && !intentDone

	var last crashRun
	nothing := false
	if sc.kind == "abort" {
		last = p.recover(f, "upgrade", "--abort")
		if last.code != 0 {
			fail(fmt.Sprintf("exit code: upgrade --abort exited %d after a crash in --abort", last.code), "want 0: the run is undone, or nothing is pending")
		}
		cron := f.cutover(0, "upgrade", "--resume")
		p.recovery = append(p.recovery, cron)
		if cron.code != 0 || strings.TrimSpace(cron.stdout) != "" {
			fail("upgrade --resume after a finished abort is not a silent no-op", "exit %d, stdout %q", cron.code, cron.stdout)
		}
	} else if sc.behind != "" {
		// A run that leaves a node behind ends done and exits 3 naming it: once is enough.
		last = f.cutover(0, "upgrade", "--resume")
		p.recovery = append(p.recovery, last)
		nothing = !afterKill.intent
	} else {
		last = p.recover(f, "upgrade", "--resume")
		nothing = !afterKill.intent
		if nothing && (p.recovery[0].code != 0 || strings.TrimSpace(p.recovery[0].stdout) != "") {
			fail("upgrade --resume without an intent is not a silent no-op", "exit %d, stdout %q", p.recovery[0].code, p.recovery[0].stdout)
		}
	}

	end := f.world()
	at := end.at()
	side := map[string]string{sc.from: "source", sc.to: "target"}[at]
	if at == "" {
		fail("links: on neither the source nor the target", "lib -> %s, share -> %s (source %s, target %s)", end.lib, end.share, sc.from, sc.to)
	}
	if at == sc.to && sc.sourceOnly {
		fail("end: links at the target, but this run must end at its source", "links at %s", at)
	}
	if sc.behind != "" && !nothing && at != sc.to {
		fail("end: a run whose failures were within its budget did not end at the target", "links at %q", at)
	}
	wantConfig := map[string][]byte{sc.from: ref.sourceConfig, sc.to: ref.targetConfig}[at]
	configOK := at != "" && string(end.config) == string(wantConfig)
	if at != "" && !configOK {
		fail(fmt.Sprintf("config: links at the %s but config.json is not the %s's bytes", side, side),
			"config.json is %s", strings.TrimPrefix(end.summary(map[string][]byte{"the source's": ref.sourceConfig, "the target's": ref.targetConfig}), "links "+end.lib+", "+end.share+"; config "))
	}
	// A node the run leaves behind stays at the source when the others reach the target.
	wantOf := func(n string) string {
		if n == sc.behind && at == sc.to {
			return sc.from
		}
		return at
	}
	daemonsOK := at != ""
	for _, n := range f.nodes {
		if got, want := end.daemons[n], "running "+wantOf(n); at != "" && got != want {
			daemonsOK = false
			fail(fmt.Sprintf("daemons: %q with the links at the %s", strings.Fields(got + " ?")[0], side), "%s: daemons %q, want %q", n, got, want)
		}
		if sc.fix.redist {
			read, _ := os.ReadFile(f.path("run/read." + n))
			now, _ := os.ReadFile(f.path("var/lib/app/ssconf_version"))
			if string(read) != string(now) {
				daemonsOK = false
				fail("redist: the daemons run with what redist_conf replaced: no restart after it", "%s: the daemons read %q, the file holds %q", n, read, now)
			}
		}
		if own, ok := end.nodeAt[n]; ok && at != "" && own != wantOf(n) {
			daemonsOK = false
			fail(fmt.Sprintf("links: a node's own links are not where the run left it, with the master's at the %s", side), "%s: %s, want %s", n, end.nodeLinks[n], wantOf(n))
		}
	}
	// Exactly at one end: what the exit code must say.
	exact := ""
	if configOK && daemonsOK {
		exact = side
	}
	if end.drained != before.drained {
		fail(fmt.Sprintf("queue drain flag changed (was %v before the run)", before.drained), "drained = %v", end.drained)
	}
	if end.paused != before.paused {
		fail(fmt.Sprintf("reconciler pause flag changed (was %v before the run)", before.paused), "paused = %v", end.paused)
	}
	if len(end.nodesDrained) > 0 {
		fail("node_drain: a node is still drained after the recovery", "%v", end.nodesDrained)
	}
	if end.intent {
		fail("intent: still there after the recovery", "%s exists", "state/intent.json")
	}
	if len(end.temps) > 0 {
		fail("temporary files left", "%v", end.temps)
	}

	// The journal says which end, and why.
	runs, err := f.journalRuns()
	if err != nil {
		fail("journal: unreadable", "%v", err)
	}
	run, ok := lastRun(runs, "upgrade")
	for _, r := range runs {
		if r.Outcome == journal.Running && !(preIntent && r.ID == run.ID) {
			fail("journal: a run is still 'running' after the recovery, with no intent", "run %d (%s -> %s): %s", r.ID, r.From, r.To, journalLine([]journal.Run{r}, r.Kind))
		}
	}
	switch {
	case !ok:
		if !preIntent || at != sc.from {
			fail("journal: no upgrade run", "the journal has %d runs", len(runs))
		}
	case at == sc.to && !sc.sourceOnly && run.Outcome != journal.Succeeded:
		fail(fmt.Sprintf("journal: outcome %q at the target", run.Outcome), "%s", journalLine(runs, "upgrade"))
	case at == sc.from && run.Outcome != journal.RolledBack && run.Outcome != journal.Aborted &&
		!(preIntent && run.Outcome == journal.Running):
		fail(fmt.Sprintf("journal: outcome %q at the source", run.Outcome), "%s", journalLine(runs, "upgrade"))
	}
	if sc.kind == "abort" && at == sc.from && ok && run.Outcome == journal.RolledBack {
		fail("journal: an aborted run is recorded as rolled back", "%s", journalLine(runs, "upgrade"))
	}

	// The exit code tells the truth (docs/design.md §2): 0 done, 1 as before, 3 neither.
	if sc.kind == "run" && !nothing {
		want := exitPastPONR
		switch {
		case exact == "target" && sc.behind != "":
			// Done, with a node left behind: 3, naming it.
			if !strings.Contains(last.stdout+last.stderr, sc.behind) {
				fail("output: the node left behind is not named", "%s", last)
			}
		case exact == "target":
			want = exitOK
		case exact == "source":
			want = exitFailed
		}
		where := "exactly at the " + exact
		if exact == "" {
			where = "at neither end exactly"
		}
		switch {
		case last.hung:
			fail("cutover hung", "%v", last)
		case last.code != want:
			fail(fmt.Sprintf("exit code: upgrade --resume exited %d with the cluster %s", last.code, where), "want %d", want)
		}
	}
}

// recoverRestore: a restore killed anywhere leaves the state exactly as before it or exactly
// as the archive, with the daemons never started; cron's resume does nothing and running the
// restore again restores the archive.
func (sc crashScenario) recoverRestore(f *crashFixture, p *crashPoint, before crashWorld, preTree, beforeTree map[string]string) {
	fail := func(class, format string, args ...any) {
		p.problems = append(p.problems, crashProblem{class, fmt.Sprintf(format, args...)})
	}
	archive := restoreArchive(preTree, beforeTree)
	// A restore killed after its intent is pending: cron's resume finishes it (exit 0). One
	// killed before its intent changed nothing but the journal, and the resume has nothing to
	// do: the operator runs it again (the next run's warning says so).
	check := func(when string) {
		w := f.world()
		for _, n := range f.nodes {
			if w.daemons[n] != "stopped" {
				fail("restore: the daemons were started", "%s, %s: daemons %q", when, n, w.daemons[n])
			}
		}
		if w.drained != before.drained || w.paused != before.paused {
			fail("restore: flags changed", "%s: %s", when, w.summary(nil))
		}
	}
	check("after the kill")
	pending := f.world().intent
	cron := f.cutover(0, "upgrade", "--resume")
	p.recovery = append(p.recovery, cron)
	switch {
	case cron.code != 0:
		fail(fmt.Sprintf("restore: upgrade --resume after the kill exited %d", cron.code), "%v", cron)
	case !pending && strings.TrimSpace(cron.stdout) != "":
		fail("upgrade --resume after a restore killed before its intent is not a silent no-op", "stdout %q", cron.stdout)
	}
	if f.world().intent {
		fail("restore: the intent is still there after the resume", "%v", cron)
	}
	if !pending {
		again := f.cutover(0, p.subject.args...)
		p.recovery = append(p.recovery, again)
		if again.code != 0 {
			fail(fmt.Sprintf("restore: running it again exited %d", again.code), "%v", again)
		}
	}
	end, temps := withoutTemps(f.tree())
	if d := treeDiff(end, archive); len(d) > 0 {
		fail("restore: run again, the state is not the archive's", "%s", strings.Join(d, "; "))
	}
	if len(temps) > 0 {
		fail("restore: run again, temporary files are still there", "%s", strings.Join(temps, "; "))
	}
	check("after the recovery")
	runs, err := f.journalRuns()
	if err != nil {
		fail("journal: unreadable", "%v", err)
	}
	for _, r := range runs {
		if r.Outcome == journal.Running {
			fail("journal: a run is still 'running' after the recovery, with no intent", "run %d (%s)", r.ID, r.Kind)
		}
	}
	if r, ok := lastRun(runs, "restore"); !ok || r.Outcome != journal.Succeeded {
		fail("journal: the recovered restore is not done", "%s", journalLine(runs, "restore"))
	}
}

// restoreArchive is the state a restore of the backup taken before the upgrade writes: the
// archive holds the state before the upgrade; files it does not hold are left alone.
func restoreArchive(preTree, beforeTree map[string]string) map[string]string {
	archive := map[string]string{}
	for k, v := range beforeTree {
		archive[k] = v
	}
	for k, v := range preTree {
		archive[k] = v
	}
	return archive
}

// recoverSync: an interrupted sync is finished by running it again (cron's resume has nothing
// to do); the node then runs the live version and nothing else changed.
func (sc crashScenario) recoverSync(f *crashFixture, p *crashPoint, before crashWorld) {
	fail := func(class, format string, args ...any) {
		p.problems = append(p.problems, crashProblem{class, fmt.Sprintf(format, args...)})
	}
	cron := f.cutover(0, "upgrade", "--resume")
	p.recovery = append(p.recovery, cron)
	if cron.code != 0 || strings.TrimSpace(cron.stdout) != "" {
		fail("upgrade --resume after a killed sync is not a silent no-op", "exit %d, stdout %q", cron.code, cron.stdout)
	}
	again := p.recover(f, p.subject.args...)
	if again.code != 0 {
		fail(fmt.Sprintf("sync: running it again exited %d", again.code), "%v", again)
	}
	end := f.world()
	if end.at() != sc.to || string(end.config) != string(before.config) {
		fail("sync: links or config changed", "%s", end.summary(nil))
	}
	for n, v := range end.nodeAt {
		if v != sc.to {
			fail("sync: a node's own links are not at the live version after the sync ran again", "%s: %s", n, end.nodeLinks[n])
		}
	}
	for _, n := range f.nodes {
		if end.daemons[n] != "running "+sc.to {
			fail(fmt.Sprintf("daemons: %q after the sync ran again", strings.Fields(end.daemons[n] + " ?")[0]), "%s: %q", n, end.daemons[n])
		}
	}
	if end.drained != before.drained || end.paused != before.paused || end.intent || len(end.temps) > 0 {
		fail("sync: flags, intent or temporary files changed", "%s", end.summary(nil))
	}
	runs, err := f.journalRuns()
	if err != nil {
		fail("journal: unreadable", "%v", err)
	}
	for _, r := range runs {
		if r.Outcome == journal.Running {
			fail("journal: a run is still 'running' after the recovery, with no intent", "run %d (%s)", r.ID, r.Kind)
		}
	}
	if r, ok := lastRun(runs, "sync"); !ok || r.Outcome != journal.Succeeded {
		fail("journal: the sync run again is not done", "%s", journalLine(runs, "sync"))
	}
}

// recoverStage: at the kill, the version being staged is either installed exactly as the
// source holds it or not installed at all (a half-staged version never counts); nothing else
// changed. Running the stage again finishes it and leaves no hidden directory behind.
func (sc crashScenario) recoverStage(f *crashFixture, p *crashPoint, before crashWorld) {
	fail := func(class, format string, args ...any) {
		p.problems = append(p.problems, crashProblem{class, fmt.Sprintf(format, args...)})
	}
	check := func(when string) {
		lib, share := f.path("usr/lib/app/"+sc.to), f.path("usr/share/app/"+sc.to)
		_, errLib := os.Stat(lib)
		_, errShare := os.Stat(share)
		if errShare == nil && errLib != nil {
			fail("stage: the share tree is in place without the lib tree", "%s", when)
		}
		if errLib == nil && errShare == nil {
			for _, pair := range [][2]string{{lib, f.path("src" + f.path("usr/lib/app/"+sc.to))}, {share, f.path("src" + f.path("usr/share/app/"+sc.to))}} {
				got, err1 := staging.ReadTree(pair[0])
				want, err2 := staging.ReadTree(pair[1])
				if err1 != nil || err2 != nil || !got.Equal(want) {
					fail("stage: an installed version differs from the source", "%s: %s (%v %v)", when, pair[0], err1, err2)
				}
			}
		}
		w := f.world()
		if w.at() != before.at() || string(w.config) != string(before.config) || w.intent {
			fail("stage: links, config or intent changed", "%s: %s", when, w.summary(nil))
		}
	}
	check("after the kill")
	cron := f.cutover(0, "upgrade", "--resume")
	p.recovery = append(p.recovery, cron)
	if cron.code != 0 || strings.TrimSpace(cron.stdout) != "" {
		fail("upgrade --resume after a killed stage is not a silent no-op", "exit %d, stdout %q", cron.code, cron.stdout)
	}
	again := p.recover(f, p.subject.args...)
	if again.code != 0 {
		fail(fmt.Sprintf("stage: running it again exited %d", again.code), "%v", again)
	}
	check("after running it again")
	for _, base := range []string{"usr/lib/app", "usr/share/app"} {
		entries, _ := os.ReadDir(f.path(base))
		names := []string{}
		for _, e := range entries {
			if e.Name() == "."+sc.to+".cutover-manifest" && e.Type().IsRegular() {
				continue // the staged tree's manifest, kept beside it
			}
			names = append(names, e.Name())
		}
		if strings.Join(names, " ") != "1.0.0 1.1.0 "+sc.to {
			fail("stage: after running it again the version directories are not the three versions", "%s: %v", base, names)
		}
	}
	runs, err := f.journalRuns()
	if err != nil {
		fail("journal: unreadable", "%v", err)
	}
	for _, r := range runs {
		if r.Outcome == journal.Running {
			fail("journal: a run is still 'running' after the recovery, with no intent", "run %d (%s)", r.ID, r.Kind)
		}
	}
	if r, ok := lastRun(runs, "stage"); !ok || r.Outcome != journal.Succeeded {
		fail("journal: the stage run again is not done", "%s", journalLine(runs, "stage"))
	}
}

// report logs a scenario's points, and fails the test with one readable entry per kind of
// problem: every point that has it, and the whole story of the first.
func report(t *testing.T, sc crashScenario, points []crashPoint, count int) {
	t.Helper()
	passed := 0
	classes := map[string][]crashPoint{}
	var order []string
	var lines []string
	for _, p := range points {
		if len(p.problems) == 0 {
			passed++
			continue
		}
		var names []string
		for _, pr := range p.problems {
			if !slices.Contains(names, pr.class) {
				names = append(names, pr.class)
			}
			if _, ok := classes[pr.class]; !ok {
				order = append(order, pr.class)
			}
			if ps := classes[pr.class]; len(ps) == 0 || ps[len(ps)-1].n != p.n {
				classes[pr.class] = append(ps, p)
			}
		}
		var recovery []string
		for _, r := range p.recovery {
			exit := strconv.Itoa(r.code)
			if r.hung {
				exit = "hung"
			}
			recovery = append(recovery, fmt.Sprintf("%s: %s", strings.Join(r.args, " "), exit))
		}
		lines = append(lines, fmt.Sprintf("  point %3d %s\n            broke: %s\n            recovery exits: %s", p.n, p.desc, strings.Join(names, "; "), strings.Join(recovery, ", ")))
	}
	t.Logf("%s: %d crash points of %d, %d passed, %d failed", sc.name, len(points), count, passed, len(points)-passed)
	if passed == len(points) {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s): %d of %d crash points broke the invariant\n", sc.name, strings.Join(sc.args, " "), len(points)-passed, len(points))
	b.WriteString(strings.Join(lines, "\n"))
	for _, class := range order {
		ps := classes[class]
		var nums []string
		for _, p := range ps {
			nums = append(nums, strconv.Itoa(p.n))
		}
		p := ps[0]
		fmt.Fprintf(&b, "\n\n  PROBLEM %q at points %s; first, point %d:\n", class, strings.Join(nums, ", "), p.n)
		fmt.Fprintf(&b, "    killed at: %s\n", p.desc)
		fmt.Fprintf(&b, "    after the kill: %s\n", p.afterKill)
		for _, r := range p.recovery {
			fmt.Fprintf(&b, "    recovery: %v\n", r)
		}
		for _, pr := range p.problems {
			if pr.class == class {
				fmt.Fprintf(&b, "    broke: %s\n", pr.detail)
			}
		}
	}
	t.Error(b.String())
}

// summarize logs the whole test: points and passes per scenario, and every kind of problem
// with the scenarios and points that have it.
func (res *crashResults) summarize(t *testing.T, took time.Duration) {
	t.Helper()
	res.mu.Lock()
	defer res.mu.Unlock()
	names := make([]string, 0, len(res.scenarios))
	for n := range res.scenarios {
		names = append(names, n)
	}
	sort.Strings(names)
	type where struct {
		scenario string
		n        int
		desc     string
	}
	classes := map[string][]where{}
	var b strings.Builder
	total, passed := 0, 0
	fmt.Fprintf(&b, "crash points in %s:\n", took.Round(time.Second))
	for _, name := range names {
		ok := 0
		for _, p := range res.scenarios[name] {
			if len(p.problems) == 0 {
				ok++
			}
			seen := map[string]bool{}
			for _, pr := range p.problems {
				if !seen[pr.class] {
					seen[pr.class] = true
					classes[pr.class] = append(classes[pr.class], where{name, p.n, p.desc})
				}
			}
		}
		total += len(res.scenarios[name])
		passed += ok
		of := ""
		if c := res.counts[name]; c != len(res.scenarios[name]) {
			of = fmt.Sprintf(" (of %d)", c)
		}
		fmt.Fprintf(&b, "  %-41s %4d points %4d passed %4d failed%s\n", name, len(res.scenarios[name]), ok, len(res.scenarios[name])-ok, of)
	}
	fmt.Fprintf(&b, "  %-41s %4d points %4d passed %4d failed\n", "total", total, passed, total-passed)
	for _, s := range res.broken {
		fmt.Fprintf(&b, "  NOT RUN: %s\n", s)
	}
	if len(classes) > 0 {
		b.WriteString("distinct problems (points that have each; up to 3 examples):\n")
		cls := make([]string, 0, len(classes))
		for c := range classes {
			cls = append(cls, c)
		}
		sort.Slice(cls, func(i, j int) bool { return len(classes[cls[i]]) > len(classes[cls[j]]) })
		for _, c := range cls {
			ws := classes[c]
			var scen []string
			for _, w := range ws {
				if !slices.Contains(scen, w.scenario) {
					scen = append(scen, w.scenario)
				}
			}
			fmt.Fprintf(&b, "  %4d  %s\n        in %s\n", len(ws), c, strings.Join(scen, ", "))
			for _, w := range ws[:min(3, len(ws))] {
				fmt.Fprintf(&b, "        e.g. %s point %d: %s\n", w.scenario, w.n, w.desc)
			}
		}
	}
	t.Log(b.String())
}

// TestCutoverStacks keeps the goroutines in cutover's code, each with its frames there and
// their files, from a dump as Go prints it on SIGQUIT; a dump it cannot pair line by line
// does not stop it.
func TestCutoverStacks(t *testing.T) {
	dump := `
goroutine 1 gp=0x1 m=nil [select]:
github.com/cutover/cutover/nodes.(*localProc).closeOutput(0x1, 0x2)
	/src/nodes/local.go:184 +0x10
github.com/cutover/cutover/upgrade.drain.Run({}, {0x3, 0x4}, 0x5)
	/src/upgrade/drain.go:37 +0x20
...additional frames elided...
github.com/cutover/cutover/cmd/cutover.main()
	/src/cmd/cutover/main.go:20 +0x30

goroutine 7 gp=0x2 m=nil [IO wait]:
internal/poll.runtime_pollWait(0x1, 0x72)
	/usr/local/go/src/runtime/netpoll.go:351 +0x85
created by os/exec.(*Cmd).Start in goroutine 1
	/usr/local/go/src/os/exec/exec.go:756 +0x92e

goroutine 9 gp=0x3 m=nil [chan receive]:
github.com/cutover/cutover/upgrade.(*Runner).Execute.func1()
`
	want := `              goroutine 1 gp=0x1 m=nil [select]:
                  github.com/cutover/cutover/nodes.(*localProc).closeOutput(0x1, 0x2) /src/nodes/local.go:184
                  github.com/cutover/cutover/upgrade.drain.Run({}, {0x3, 0x4}, 0x5) /src/upgrade/drain.go:37
              goroutine 9 gp=0x3 m=nil [chan receive]:
                  github.com/cutover/cutover/upgrade.(*Runner).Execute.func1()`
	if got := cutoverStacks(dump); got != want {
		t.Errorf("cutoverStacks() =\n%s\nwant\n%s", got, want)
	}
}
