package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cutover/cutover/journal"
)

// The prune scenario of TestCrashPoints and the first resume of the resume-of-resume one.

// pruneVersion is the version the prune scenario's fixture installs besides the others, and
// that its prune removes: older than the live version 1.1.0 and its previous minor 1.0.0,
// which prune keeps.
const pruneVersion = "0.9.0"

// versionTrees describes every entry of every installed version's trees, hidden ones (a
// prune's leftovers, manifests) included, by path below the root.
func (f *crashFixture) versionTrees() map[string]string {
	return f.treeOf("usr/lib/app", "usr/share/app")
}

// versionState says how one version's trees are found against before: "installed" (both
// trees, exactly as before), "gone" (neither tree under its name), "not counted" (one tree
// is gone, so the version does not count as installed), or what is wrong.
func versionState(now, before map[string]string, v string) string {
	var trees []string
	for _, base := range []string{"usr/share/app/", "usr/lib/app/"} {
		dir := base + v
		same, present := true, false
		for p, e := range before {
			if p == dir || strings.HasPrefix(p, dir+"/") {
				if now[p] != e {
					same = false
				}
			}
		}
		for p, e := range now {
			if p == dir || strings.HasPrefix(p, dir+"/") {
				present = present || p == dir
				if before[p] != e {
					same = false
				}
			}
		}
		switch {
		case !present:
			trees = append(trees, "gone")
		case same:
			trees = append(trees, "whole")
		default:
			trees = append(trees, "changed")
		}
	}
	switch {
	case trees[0] == "whole" && trees[1] == "whole":
		return "installed"
	case trees[0] == "gone" && trees[1] == "gone":
		return "gone"
	case trees[0] == "gone" || trees[1] == "gone":
		// Installed means both trees: one gone is enough to count as not installed.
		return "not counted"
	}
	return fmt.Sprintf("counted as installed but not whole (share %s, lib %s)", trees[0], trees[1])
}

// recoverPrune: at the kill every version is either installed exactly as before or not
// counted as installed, and the live and previous versions are untouched; cron's resume
// does nothing, and running prune again removes the pruned version without a trace.
func (sc crashScenario) recoverPrune(f *crashFixture, p *crashPoint, before crashWorld, pre map[string]string) {
	fail := func(class, format string, args ...any) {
		p.problems = append(p.problems, crashProblem{class, fmt.Sprintf(format, args...)})
	}
	check := func(when string, end bool) {
		now := f.versionTrees()
		for _, v := range []string{"1.0.0", "1.1.0"} {
			if s := versionState(now, pre, v); s != "installed" {
				fail("prune: the live or the previous version was touched", "%s: %s is %s", when, v, s)
			}
		}
		switch s := versionState(now, pre, pruneVersion); {
		case end && s != "gone":
			fail("prune: run again, the pruned version is not gone", "%s: %s is %s", when, pruneVersion, s)
		case s != "installed" && s != "gone" && s != "not counted":
			fail("prune: a version counts as installed but is not whole", "%s: %s is %s", when, pruneVersion, s)
		}
		if end {
			for p := range now {
				if base := filepath.Base(p); strings.HasPrefix(base, ".") && strings.Count(p, "/") == 3 {
					fail("prune: run again, hidden leftovers are still there", "%s: %s", when, p)
				}
			}
		}
		w := f.world()
		if w.at() != before.at() || string(w.config) != string(before.config) || w.intent {
			fail("prune: links, config or intent changed", "%s: %s", when, w.summary(nil))
		}
	}
	check("after the kill", false)
	cron := f.cutover(0, "upgrade", "--resume")
	p.recovery = append(p.recovery, cron)
	if cron.code != 0 || strings.TrimSpace(cron.stdout) != "" {
		fail("upgrade --resume after a killed prune is not a silent no-op", "exit %d, stdout %q", cron.code, cron.stdout)
	}
	again := p.recover(f, p.subject.args...)
	if again.code != 0 {
		fail(fmt.Sprintf("prune: running it again exited %d", again.code), "%v", again)
	}
	check("after running it again", true)
	runs, err := f.journalRuns()
	if err != nil {
		fail("journal: unreadable", "%v", err)
	}
	for _, r := range runs {
		if r.Outcome == journal.Running {
			fail("journal: a run is still 'running' after the recovery, with no intent", "run %d (%s)", r.ID, r.Kind)
		}
	}
	if r, ok := lastRun(runs, "prune"); !ok || r.Outcome != journal.Succeeded {
		fail("journal: the prune run again is not done", "%s", journalLine(runs, "prune"))
	}
}

// checkPruned checks, after a power cut, that a prune the journal says removed its versions
// did: the pruned version is not installed on the disk.
func (sc crashScenario) checkPruned(f *crashFixture, fail func(what, format string, args ...any), why string) {
	for _, base := range []string{"usr/share/app/", "usr/lib/app/"} {
		if _, err := os.Lstat(f.path(base + pruneVersion)); err == nil {
			fail(why+" but the pruned version is back", "%s%s exists", base, pruneVersion)
		}
	}
}

// firstResumePoint returns the point to kill the first resume of a run killed at ref.preAt
// at: the first start of the daemons, a resume past the point of no return having stopped
// them again and switched; or, without one, the middle of the resume.
func (sc crashScenario) firstResumePoint(base string, ref crashReference) (int, error) {
	f, err := newCrashFixture(base, sc.fix)
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.release() }()
	if run := f.cutover(ref.preAt, "upgrade", "--to="+sc.to, "--yes"); !run.killed {
		return 0, fmt.Errorf("the first upgrade was to die at point %d but did not:\n%v", ref.preAt, run)
	}
	f.waitCommands(crashSettle)
	run := f.cutover(0, "upgrade", "--resume")
	if run.code != 0 {
		return 0, fmt.Errorf("an uninterrupted resume did not end done:\n%v", run)
	}
	if n := run.findPoint("command finished: daemons_start", false); n > 0 {
		return n, nil
	}
	if len(run.points) < 2 {
		return 0, fmt.Errorf("the resume passed %d crash points", len(run.points))
	}
	return len(run.points) / 2, nil
}

// treeOf describes every entry under the directories dirs of the root.
func (f *crashFixture) treeOf(dirs ...string) map[string]string {
	out := map[string]string{}
	for _, dir := range dirs {
		_ = filepath.WalkDir(f.path(dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			rel, _ := filepath.Rel(f.root, p)
			out[rel] = describeEntry(f, p)
			return nil
		})
	}
	return out
}
