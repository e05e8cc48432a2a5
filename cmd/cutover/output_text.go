package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

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
