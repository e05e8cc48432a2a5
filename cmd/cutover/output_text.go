package main

import (
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/upgrade"
)

// textOutput prints for people: one line per stage as a run goes, tables for documents.
type textOutput struct {
	mu      sync.Mutex
	w       io.Writer
	verbose bool
}

// Report prints one event.
func (o *textOutput) Report(e upgrade.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch e.Type {
	case "stage":
		if e.State == "started" {
			return
		}
		nodes := ""
		if e.Of > 0 && e.Where != string(upgrade.OnMaster) {
			nodes = nodeCount(e.OK, e.Of)
		}
		msg := e.Message
		if e.PONR && e.State == "ok" {
			msg += "  <- point of no return"
		}
		idx := fmt.Sprintf("%2d", e.Index)
		if e.Index == 0 {
			idx = " -"
		}
		line := fmt.Sprintf("[%s/%d] %-18s %-8s %-12s %6s  %s", idx, e.Total, e.Stage, stateWord(e.State), nodes, seconds(e.Duration), firstLine(msg, e.State))
		fmt.Fprintln(o.w, strings.TrimRight(line, " "))
		o.nodeLines(e)
	case "undo":
		line := fmt.Sprintf("        undo %-13s %s  %s", e.Stage, stateWord(e.State), firstLine(e.Message, e.State))
		fmt.Fprintln(o.w, strings.TrimRight(line, " "))
		o.nodeLines(e)
	case "batch":
		o.batchLine(e)
	case "run", "rollback":
		fmt.Fprintln(o.w, e.Message)
	case "wait":
		fmt.Fprintf(o.w, "        %s\n", e.Message)
	case "warn":
		fmt.Fprintf(o.w, "warning: %s\n", e.Message)
	}
}

// nodeLines shows the failed nodes of a stage (every node with --verbose) and their stderr.
func (o *textOutput) nodeLines(e upgrade.Event) {
	for _, n := range e.Nodes {
		if n.OK && !o.verbose {
			continue
		}
		status := "ok"
		if !n.OK {
			status = strings.TrimPrefix(n.Error, n.Node+": ")
		}
		fmt.Fprintf(o.w, "  %s: %s\n", n.Node, status)
		if !n.OK && n.StderrTail != "" && !strings.Contains(n.Error, n.StderrTail) {
			fmt.Fprintf(o.w, "    stderr: %s\n", n.StderrTail)
		}
	}
}

// upgradeDone prints the end of an upgrade run.
func (o *textOutput) upgradeDone(res *upgrade.Result, err error, dryRun bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if res == nil {
		return
	}
	switch {
	case res.Nothing && res.To == "":
		// A resume without a pending run: it runs at every boot, and says nothing.
	case res.Nothing:
		fmt.Fprintf(o.w, "%s is already at %s on the master; nothing to do\n", res.App, res.To)
	case dryRun && err == nil:
		fmt.Fprintf(o.w, "dry run: %s %s -> %s (%s) would proceed on %s; nothing was changed\n", res.App, res.From, res.To, res.Direction, count(res.Nodes, "node"))
	case err == nil:
		fmt.Fprintf(o.w, "done: %s %s on %s in %s", res.App, res.To, nodeCount(res.Nodes, res.Nodes+len(res.Offline)), seconds(res.Duration))
		switch {
		case len(res.Batches) > 0:
			o.rollingDowntime(res)
		case res.Downtime.Cluster > 0:
			fmt.Fprintf(o.w, "; daemons down %s", seconds(res.Downtime.Cluster))
		}
		if res.Backup != "" {
			fmt.Fprintf(o.w, "; backup %s", res.Backup)
		}
		fmt.Fprintln(o.w)
		if len(res.Offline) > 0 {
			fmt.Fprintf(o.w, "offline nodes still at %s: %s; run 'cutover sync' for them when they are back\n", res.From, strings.Join(res.Offline, ", "))
		}
	case upgrade.IsRolledBack(err) && res.Rollback != nil:
		fmt.Fprintf(o.w, "rolled back: %s %s on %s by run %d in %s; logs: %s, %s\n", res.App, res.From,
			count(res.Rollback.Nodes, "node"), res.Rollback.Run, seconds(res.Rollback.Duration), res.Log, res.Rollback.Log)
	default:
		o.failed(err, res.Log)
	}
}

// failed ends a failed run's output: that nothing changed, when the exit code says so, and
// where the run's log is.
func (o *textOutput) failed(err error, log string) {
	switch {
	case exitCode(err) == exitFailed && log != "":
		fmt.Fprintf(o.w, "nothing was changed. log: %s\n", log)
	case exitCode(err) == exitFailed:
		fmt.Fprintln(o.w, "nothing was changed.")
	case log != "":
		fmt.Fprintf(o.w, "log: %s\n", log)
	}
}

// abortDone prints the end of `upgrade --abort`.
func (o *textOutput) abortDone(res *upgrade.Result, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case res == nil:
	case res.Nothing:
		fmt.Fprintln(o.w, "no run is pending; nothing to abort")
	case err == nil && res.WatchEnded:
		fmt.Fprintf(o.w, "ended the watch of run %d early: %s %s stays on %s\n", res.Run, res.App, res.To, count(res.Nodes, "node"))
	case err == nil:
		fmt.Fprintf(o.w, "aborted run %d: %s is back at %s on %s\n", res.Run, res.App, res.From, count(res.Nodes, "node"))
	}
}

// syncDone prints the end of a sync.
func (o *textOutput) syncDone(res *upgrade.SyncResult, err error, dryRun bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if res == nil {
		return
	}
	var names, withVersion []string
	for _, n := range res.Nodes {
		names = append(names, n.Name)
		withVersion = append(withVersion, fmt.Sprintf("%s (at %s)", n.Name, n.From))
	}
	switch {
	case dryRun && err == nil:
		fmt.Fprintf(o.w, "dry run: %s would be brought to %s %s; nothing was changed\n", strings.Join(withVersion, ", "), res.App, res.To)
	case err == nil:
		fmt.Fprintf(o.w, "done: %s %s on %s in %s\n", res.App, res.To, strings.Join(names, ", "), seconds(res.Duration))
	default:
		o.failed(err, res.Log)
	}
}

// stageDone prints the end of a stage run.
func (o *textOutput) stageDone(res *upgrade.StagingResult, err error, dryRun bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case res == nil:
	case dryRun && err == nil:
		fmt.Fprintf(o.w, "dry run: %s %s (%s) would be staged on %s; nothing was changed\n", res.App, res.Version, mb(res.TreeBytes), count(len(res.Nodes)-len(res.Already), "node"))
	case err == nil:
		fmt.Fprintf(o.w, "done: %s %s staged on %s (%s sent) in %s\n", res.App, res.Version, count(len(res.Nodes), "node"), mb(res.Sent), seconds(res.Duration))
	default:
		o.failed(err, res.Log)
	}
}

// pruneDone prints the end of a prune run.
func (o *textOutput) pruneDone(res *upgrade.PruneResult, err error, dryRun bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if res == nil {
		return
	}
	if err != nil {
		o.failed(err, res.Log)
		return
	}
	var lines []string
	for node, list := range res.Remove {
		lines = append(lines, fmt.Sprintf("  %s: %s", node, strings.Join(list, ", ")))
	}
	sort.Strings(lines)
	if len(lines) == 0 {
		fmt.Fprintln(o.w, "nothing to remove: every installed version is needed or kept")
		return
	}
	verb := "removed"
	if dryRun {
		verb = "would remove"
	}
	fmt.Fprintf(o.w, "%s:\n%s\n", verb, strings.Join(lines, "\n"))
	if dryRun {
		fmt.Fprintln(o.w, "dry run: nothing was changed")
	}
}

// cfgupgrade says what a migration of the master's config did, or would do.
func (o *textOutput) cfgupgrade(rep *upgrade.CfgupgradeReport, dryRun bool) error {
	switch {
	case rep.From == rep.To:
		fmt.Fprintf(o.w, "config %s is already at %s; nothing to do\n", rep.File, rep.To)
	case dryRun:
		fmt.Fprintf(o.w, "config %s: %s -> %s (dry run, nothing written)\n%s", rep.File, rep.From, rep.To, rep.Diff)
	default:
		fmt.Fprintf(o.w, "config %s: %s -> %s", rep.File, rep.From, rep.To)
		if rep.Backup != "" {
			fmt.Fprintf(o.w, "; previous config kept as %s", rep.Backup)
		}
		fmt.Fprintln(o.w)
	}
	return nil
}

// version prints cutover's version.
func (o *textOutput) version(v string) error {
	_, err := fmt.Fprintln(o.w, "cutover", v)
	return err
}

// mb formats a byte count.
// mb says a byte count for people (upgrade.HumanBytes).
func mb(n int64) string { return upgrade.HumanBytes(n) }

func stateWord(s string) string {
	switch s {
	case "failed", "undo-failed":
		return "FAILED"
	}
	return s
}

func seconds(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

// firstLine keeps a failed stage's line short: the node lines below carry the details.
func firstLine(msg, state string) string {
	if state != "failed" && state != "undo-failed" {
		return msg
	}
	for i, r := range msg {
		if r == '\n' {
			return msg[:i] + " ..."
		}
	}
	return msg
}

// status shows the cluster's state: a header, one line per node, then verify, the pending
// run, the lock, the nodes behind and how the master resumes a run at boot.
func (o *textOutput) status(st *upgrade.StatusReport) error {
	w := o.w
	offline := []string{}
	for _, n := range st.Nodes {
		if n.Offline {
			offline = append(offline, n.Name)
		}
	}
	version := st.Version
	if version == "" {
		version = "version unknown"
	}
	fmt.Fprintf(w, "%s %s on %s (master %s, offline: %s)\n", st.App, version, count(len(st.Nodes), "node"), st.Master, textNone(offline))
	if st.VersionError != "" {
		fmt.Fprintf(w, "  %s: %s\n", st.Master, textOneLine(st.VersionError))
	}

	behind := map[string]bool{}
	for _, b := range st.Behind {
		behind[b.Node] = true
	}
	rows := [][]string{{"NODE", "STATE", "LIB", "SHARE", "INSTALLED", ""}}
	for _, n := range st.Nodes {
		state, note := "ok", n.Error
		switch {
		case !n.Reachable:
			state = "unreachable"
		case n.LinkError != "":
			state, note = "broken", n.LinkError
		case n.Error != "":
			state = "error"
		case behind[n.Name]:
			state = "behind"
		}
		if n.Offline {
			state += " (offline)"
		}
		installed := ""
		if n.Reachable {
			installed = strings.Join(n.Installed, " ")
		}
		rows = append(rows, []string{n.Name, state, textDash(n.Lib), textDash(n.Share), textDash(installed), textOneLine(note)})
	}
	writeTable(w, rows)

	if v := st.Verify; v != nil {
		switch {
		case !v.Ran:
			fmt.Fprintf(w, "verify: %s\n", v.Skipped)
		case v.OK:
			fmt.Fprintln(w, "verify: ok")
		case v.ExitCode > 0 && len(v.Output) > 0:
			// The output below says why.
			fmt.Fprintf(w, "verify: FAILED (exit %d)\n", v.ExitCode)
		default:
			fmt.Fprintf(w, "verify: FAILED: %s\n", textOneLine(v.Error))
		}
		for _, line := range v.Output {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}

	if p := st.Pending; p != nil {
		what := textDash(p.Direction)
		if p.Kind != "" && p.Kind != string(upgrade.KindUpgrade) {
			what = p.Kind
		}
		fmt.Fprintf(w, "pending: run %d, %s %s -> %s", p.Run, what, p.From, p.To)
		if p.Stage != "" {
			fmt.Fprintf(w, ", at %s (%s %s)", p.Stage, p.State, textTime(p.At))
		}
		ponr := "before the point of no return"
		if p.PastPONR {
			ponr = "past the point of no return"
		}
		switch {
		case st.Lock != nil:
			fmt.Fprintf(w, ", %s; in progress\n", ponr)
		case p.PastPONR:
			fmt.Fprintf(w, ", %s; interrupted\n  finish it with 'cutover upgrade --resume'\n", ponr)
		default:
			fmt.Fprintf(w, ", %s; interrupted\n  continue it with 'cutover upgrade --resume' or undo it with 'cutover upgrade --abort'\n", ponr)
		}
		if p.Error != "" {
			fmt.Fprintf(w, "  journal: %s\n", textOneLine(p.Error))
		}
		if st.Lock == nil {
			var gone []string
			for _, n := range st.Nodes {
				if !n.Reachable && !n.Offline {
					gone = append(gone, n.Name)
				}
			}
			if len(gone) > 0 {
				verb := "--resume"
				if !p.PastPONR {
					verb = "--resume (or --abort)"
				}
				fmt.Fprintf(w, "  cannot be reached: %s; if it stays gone, 'cutover upgrade %s --skip-node %s' goes on without it, and 'cutover sync %s' catches it up later\n",
					strings.Join(gone, ", "), verb, gone[0], gone[0])
			}
		}
		if len(p.Rebooted) > 0 {
			fmt.Fprintf(w, "  rebooted during the run: %s (the run stops their daemons again and redoes their steps)\n", strings.Join(p.Rebooted, ", "))
		}
		printRollingStatus(w, p.Batches)
		printPendingWatch(w, p.Watch, st.Lock != nil, p.To)
	} else {
		fmt.Fprint(w, "pending: none")
		if r := st.LastRun; r != nil {
			fmt.Fprintf(w, "; last run %d, %s: %s", r.Run, runTitle(r.Kind, r.From, r.To), r.Outcome)
			if !r.Ended.IsZero() {
				fmt.Fprintf(w, " %s", textTime(r.Ended))
			}
		}
		fmt.Fprintln(w)
		if r := st.LastRun; r != nil && r.Watch != nil {
			// A sync's watch, under way or ended, or how the last upgrade's ended.
			fmt.Fprintf(w, "  watch: %s\n", watchText(r.Watch, time.Now()))
		}
	}
	if h := st.Lock; h != nil {
		fmt.Fprintf(w, "lock: held by pid %d on %s since %s", h.PID, h.Host, textTime(h.Started))
		if h.Command != "" {
			fmt.Fprintf(w, " (%s)", h.Command)
		}
		fmt.Fprintln(w)
	}
	for _, b := range st.Behind {
		if b.Unconfirmed != 0 {
			fmt.Fprintf(w, "behind: run %d left %s in a state it could not confirm (its links at %s, its config and daemons unknown), the cluster at %s: run '%s'\n",
				b.Unconfirmed, b.Node, textDash(b.Version), st.Version, b.Command)
			continue
		}
		fmt.Fprintf(w, "behind: %s is at %s, the cluster at %s: run '%s'\n", b.Node, b.Version, st.Version, b.Command)
	}
	notRun := ""
	if len(st.ResumeProblems) > 0 {
		notRun = ", which would not run"
	}
	switch r := st.Resume; {
	case r.Both():
		fmt.Fprintf(w, "resume at boot: %s and @reboot in %s%s\n", upgrade.ResumeUnit, strings.Join(r.Cron, ", "), notRun)
		fmt.Fprintf(w, "warning: both would resume an interrupted run at boot; keep one (the package enables %s where systemd runs)\n", upgrade.ResumeUnit)
	case r.Unit:
		fmt.Fprintf(w, "resume at boot: %s%s\n", upgrade.ResumeUnit, notRun)
	case len(r.Cron) > 0:
		fmt.Fprintf(w, "resume at boot: @reboot in %s%s\n", strings.Join(r.Cron, ", "), notRun)
	default:
		fmt.Fprintln(w, "resume at boot: none")
		fmt.Fprintln(w, "warning: nothing resumes an interrupted run at boot: install cutover's package, or put the @reboot line of the guide in /etc/cron.d/cutover")
	}
	for _, problem := range st.ResumeProblems {
		fmt.Fprintf(w, "warning: %s\n", textOneLine(problem))
	}
	for _, problem := range st.Problems {
		fmt.Fprintf(w, "warning: %s\n", textOneLine(problem))
	}
	return nil
}

// plan shows a plan: the checks, the stages, and the verdict.
func (o *textOutput) plan(p *upgrade.PlanReport) error {
	w, verbose := o.w, o.verbose
	from, dir := p.From, string(p.Direction)
	if from == "" {
		from, dir = "?", "version unknown"
	}
	fmt.Fprintf(w, "plan: %s %s -> %s (%s) on %s (master %s, offline: %s)\n",
		p.App, from, p.To, dir, count(len(p.Nodes), "node"), p.Master, textNone(p.Offline))

	fmt.Fprintln(w, "\nchecks")
	var rows [][]string
	for _, c := range p.Checks {
		verdict := "ok"
		switch {
		case !c.OK:
			verdict = "REFUSED"
		case c.Warning:
			verdict = "warning"
		}
		rows = append(rows, []string{verdict, c.Name, textDash(c.Node), textOneLine(c.Message)})
	}
	writeTable(w, rows)

	if len(p.Migrations) > 0 {
		fmt.Fprintln(w, "\nconfig migrations")
		rows = nil
		for _, m := range p.Migrations {
			file, ops := "no file", "no change between "+m.From+" and "+m.To
			if m.File != "" {
				file, ops = filepath.Base(m.File), "no ops"
				if len(m.Ops) > 0 {
					ops = strings.Join(m.Ops, "; ")
				}
			}
			rows = append(rows, []string{m.From + " -> " + m.To, file, textOneLine(ops)})
		}
		writeTable(w, rows)
	}

	if len(p.Stages) > 0 {
		fmt.Fprintln(w, "\nstages")
		rows = nil
		for _, s := range p.Stages {
			where, on := s.Where, textDash(nodeList(s.Nodes, verbose))
			if s.Skipped {
				where, on = "skipped", ""
			}
			if s.PONR {
				on += "  <- point of no return"
			}
			rows = append(rows, []string{fmt.Sprintf("[%2d/%d]", s.Index, len(p.Stages)), s.Name, where, on})
		}
		writeTable(w, rows)
	}

	fmt.Fprintln(w)
	switch {
	case !p.Proceed:
		fmt.Fprintf(w, "refused: %s; nothing was changed\n", count(len(p.Refusals), "refusal"))
		for _, r := range p.Refusals {
			fmt.Fprintf(w, "  %s\n", textOneLine(r))
		}
	case p.Nothing:
		fmt.Fprintf(w, "nothing to do: %s already runs %s\n", p.App, p.To)
	default:
		fmt.Fprintf(w, "would proceed: 'cutover upgrade --to=%s' runs these stages\n", p.To)
	}
	return nil
}

// nodeList names the nodes of a stage; a long list is cut short unless verbose.
func nodeList(names []string, verbose bool) string {
	const shown = 6
	if len(names) <= shown || verbose {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s, ... (%d nodes)", strings.Join(names[:shown-1], ", "), len(names))
}

// backupList shows one line per archive.
func (o *textOutput) backupList(list *upgrade.BackupList) error {
	w := o.w
	if len(list.Backups) == 0 {
		fmt.Fprintf(w, "no backups yet in %s\n", list.Dir)
		return nil
	}
	fmt.Fprintf(w, "backups in %s:\n", list.Dir)
	fmt.Fprintf(w, "%-48s %-24s %-5s %-20s %-6s %-10s %s\n", "ID", "FROM -> TO", "RUN", "CREATED", "FILES", "SIZE", "CHECK")
	for _, b := range list.Backups {
		versions := b.From + " -> " + b.To
		if b.Kind == upgrade.BackupBeforeRestore {
			versions = "before restore at " + b.From
		}
		if b.From == "" {
			versions = "-"
		}
		run := "-"
		if b.Run != 0 {
			run = fmt.Sprint(b.Run)
		}
		check := "manifest ok"
		switch {
		case b.Problem != "":
			check = "BAD: " + b.Problem
		case b.Verified:
			check = "verified"
		}
		fmt.Fprintf(w, "%-48s %-24s %-5s %-20s %-6d %-10s %s\n", b.ID, versions, run, textTime(b.Created), b.Files, backupSize(b.Size), check)
	}
	return nil
}

// backupRestore says what a restore did and what is left to do.
func (o *textOutput) backupRestore(rep *upgrade.RestoreReport) error {
	w, verbose := o.w, o.verbose
	fmt.Fprintf(w, "restored %s on the master: it is at %s again (was %s)\n", rep.ID, rep.Version, rep.Previous)
	fmt.Fprintf(w, "  the state before the restore is kept in %s\n", rep.Kept)
	links := make([]string, 0, len(rep.Links))
	for l := range rep.Links {
		links = append(links, l)
	}
	sort.Strings(links)
	for _, l := range links {
		fmt.Fprintf(w, "  link %s -> %s\n", l, rep.Links[l])
	}
	fmt.Fprintf(w, "  %s, %s, %s restored\n", count(len(rep.Files), "file"), count(len(rep.Dirs), "directory"), count(len(rep.Symlinks), "symlink"))
	if verbose {
		for _, group := range []struct {
			what  string
			paths []string
		}{{"file", rep.Files}, {"directory", rep.Dirs}, {"symlink", rep.Symlinks}} {
			for _, p := range group.paths {
				fmt.Fprintf(w, "    %-9s %s\n", group.what, p)
			}
		}
	}
	if len(rep.Skipped) > 0 {
		names := make([]string, len(rep.Skipped))
		for i, s := range rep.Skipped {
			names[i] = s.String()
		}
		fmt.Fprintf(w, "  not in the archive, so not restored: %s\n", strings.Join(names, ", "))
	}
	if rep.Run != 0 {
		fmt.Fprintf(w, "  journal: run %d\n", rep.Run)
	}
	for _, warn := range rep.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	fmt.Fprintf(w, "only the master was restored: the other nodes keep their config and links; bring them to %s with 'cutover sync NODE...' (or a run), then start the daemons\n", rep.Version)
	return nil
}

// backupSize formats a size in bytes for people.
func backupSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// journal shows one run in detail, or one line per run.
func (o *textOutput) journal(rep *upgrade.JournalReport) error {
	if rep.Timeline != nil {
		return printTimeline(o.w, rep.Runs[0], rep.Timeline)
	}
	if rep.Detail {
		printJournalRun(o.w, rep.Runs[0])
		return nil
	}
	printJournalList(o.w, rep)
	return nil
}

// printJournalList shows one line per run.
func printJournalList(w io.Writer, rep *upgrade.JournalReport) {
	if len(rep.Runs) == 0 {
		fmt.Fprintln(w, "no runs yet")
		return
	}
	lw := &trimWriter{w: w}
	lw.printf("%-5s %-8s %-20s %-10s %-20s %-9s %-12s %s", "RUN", "KIND", "FROM -> TO", "DIRECTION", "STARTED", "DURATION", "OUTCOME", "OFFLINE")
	for _, r := range rep.Runs {
		lw.printf("%-5d %-8s %-20s %-10s %-20s %-9s %-12s %s", r.ID, r.Kind, runVersions(r.From, r.To), textDash(r.Direction),
			textTime(r.Started), textDash(seconds(r.Duration)), journalOutcome(r), textDash(strings.Join(r.Offline, ",")))
	}
}

// runTitle names a run by its kind and versions: "upgrade 1.0.0 -> 1.1.0", "stage 1.2.0".
func runTitle(kind, from, to string) string {
	// An upgrade run to an older version is a downgrade: it is called one.
	if kind == string(upgrade.KindUpgrade) || kind == "" {
		if f, err := layout.ParseVersion(from); err == nil {
			if t, err := layout.ParseVersion(to); err == nil && t.Compare(f) < 0 {
				kind = string(upgrade.Down)
			}
		}
	}
	if v := runVersions(from, to); v != "" {
		return kind + " " + v
	}
	return kind
}

// runVersions is a run's versions: "1.0.0 -> 1.1.0", or the one version of a run that has
// only one, such as a stage.
func runVersions(from, to string) string {
	if from != "" && to != "" {
		return from + " -> " + to
	}
	return from + to
}

// printJournalRun shows one run: its header, its facts, then its stage transitions in order
// with each node's result. A stage's "started" is folded into the transition that ends it
// (shown at the time the stage started); one that nothing ended shows as started.
func printJournalRun(w io.Writer, r upgrade.RunReport) {
	lw := &trimWriter{w: w}
	lw.printf("run %d: %s (%s): %s", r.ID, runTitle(r.Kind, r.From, r.To), textDash(r.Direction), journalOutcome(r))
	lw.printf("  started  %s on %s (pid %d)", textTime(r.Started), r.Host, r.PID)
	if !r.Ended.IsZero() {
		lw.printf("  ended    %s after %s", textTime(r.Ended), seconds(r.Duration))
	}
	lw.printf("  offline  %s", textNone(r.Offline))
	if r.Watch != nil {
		lw.printf("  watch    %s", watchText(r.Watch, time.Now()))
	}
	keys := make([]string, 0, len(r.Facts))
	for k := range r.Facts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		label := ""
		if i == 0 {
			label = "facts"
		}
		lw.printf("  %-8s %s = %s", label, k, r.Facts[k])
	}
	if len(r.Events) == 0 {
		lw.printf("no stage recorded")
		return
	}
	lw.printf("")
	lw.printf("%-5s %-18s %-12s %-9s %-20s %s", "#", "STAGE", "STATE", "DURATION", "AT", "MESSAGE")
	for i := 0; i < len(r.Events); i++ {
		e := r.Events[i]
		at, msg := e.At, e.Message
		if e.State == "started" && i+1 < len(r.Events) && r.Events[i+1].Stage == e.Stage && r.Events[i+1].State != "started" {
			i++
			e = r.Events[i]
			msg = joinMessages(msg, e.Message)
		}
		idx := "-"
		if e.Index > 0 {
			idx = fmt.Sprint(e.Index)
		}
		lw.printf("%-5s %-18s %-12s %-9s %-20s %s", idx, e.Stage, e.State, textDash(seconds(e.Duration)), textTime(at), msg)
		for _, n := range e.Nodes {
			status := "ok"
			if !n.OK {
				status = "FAILED"
			}
			line := fmt.Sprintf("      %s: %s, exit %d, %s", n.Node, status, n.ExitCode, textDash(seconds(n.Duration)))
			if n.Error != "" {
				line += ": " + strings.TrimPrefix(n.Error, n.Node+": ")
			}
			lw.printf("%s", line)
			if n.StderrTail != "" && !strings.Contains(n.Error, n.StderrTail) {
				lw.printf("        stderr: %s", strings.ReplaceAll(n.StderrTail, "\n", "\n                "))
			}
		}
	}
}

func joinMessages(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// trimWriter prints lines without the spaces an empty last column leaves at their end.
type trimWriter struct{ w io.Writer }

func (t *trimWriter) printf(format string, args ...any) {
	fmt.Fprintln(t.w, strings.TrimRight(fmt.Sprintf(format, args...), " "))
}

// journalOutcome is a run's outcome, with what a pending run waits for.
func journalOutcome(r upgrade.RunReport) string {
	if r.Pending {
		return r.Outcome + " (pending)"
	}
	return r.Outcome
}

// textTime formats a time for text output: RFC 3339 in UTC to the second, "-" for none.
func textTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// count says a count in words: "1 node", "4 nodes", "2 directories".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(noun, "y"))
	}
	if strings.HasSuffix(noun, "ch") || strings.HasSuffix(noun, "s") || strings.HasSuffix(noun, "x") {
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// nodeCount says how many of the nodes worked on succeeded: "4 nodes", "1 node", "3 of 4 nodes".
func nodeCount(ok, of int) string {
	if ok == of {
		return count(of, "node")
	}
	return fmt.Sprintf("%d of %s", ok, count(of, "node"))
}

// writeTable prints rows as an aligned table, indented by two spaces, with two spaces
// between columns and no trailing blanks.
func writeTable(w io.Writer, rows [][]string) {
	var widths []int
	for _, row := range rows {
		for i, cell := range row {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	for _, row := range rows {
		var b strings.Builder
		b.WriteString("  ")
		for i, cell := range row {
			b.WriteString(cell)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell)+2))
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// textNone lists names, or says none.
func textNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// textDash shows an empty field as "-".
func textDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// textOneLine keeps a message on one line of a table.
func textOneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
