package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/upgrade"
)

// The text form of `cutover journal`: one run in detail, or one line per run.

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
