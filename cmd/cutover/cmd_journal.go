package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cutover/cutover/upgrade"
)

func journalCommand() *cli.Command {
	return &cli.Command{
		Name:         "journal",
		OnUsageError: journalUsageError,
		Usage:        "show past runs, or one run's stages, durations and per-node results",
		UsageText:    "cutover journal [RUN]",
		Description: "Without RUN, lists every run in the journal, oldest first: its id, kind, versions, direction,\n" +
			"start, duration, outcome and the nodes it skipped as offline. With RUN, shows that run's stage\n" +
			"transitions in order, each with its state, duration and every node's result (exit code, error,\n" +
			"the tail of its stderr), and the facts the run learned. It only reads: it works during a run.\n" +
			"A run id that is malformed or not in the journal is refused with exit code 2.",
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return usagef("journal takes at most one run id, got %d arguments", c.NArg())
			}
			cfg, err := loadConfig(c)
			if err != nil {
				return err
			}
			rep, err := upgrade.ReadJournal(c.Context, cfg, upgrade.JournalOptions{Run: c.Args().First()})
			if err != nil {
				return err
			}
			if c.String("output") == "json" {
				return writeJournalJSON(c.App.Writer, rep)
			}
			if rep.Detail {
				printJournalRun(c.App.Writer, rep.Runs[0])
				return nil
			}
			printJournalList(c.App.Writer, rep)
			return nil
		},
	}
}

// journalUsageError makes a flag the command does not know, such as "-1", a usage error.
func journalUsageError(_ *cli.Context, err error, _ bool) error {
	return usagef("%v", err)
}

// journalDocument is the JSON form of `cutover journal`.
type journalDocument struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	*upgrade.JournalReport
}

func writeJournalJSON(w io.Writer, rep *upgrade.JournalReport) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(journalDocument{APIVersion: "cutover/v1", Kind: "Journal", JournalReport: rep})
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
		lw.printf("%-5d %-8s %-20s %-10s %-20s %-9s %-12s %s", r.ID, r.Kind, r.From+" -> "+r.To, journalDash(r.Direction),
			journalTime(r.Started), journalDash(seconds(r.Duration)), journalOutcome(r), journalDash(strings.Join(r.Offline, ",")))
	}
}

// printJournalRun shows one run: its header, its facts, then its stage transitions in order
// with each node's result. A stage's "started" is folded into the transition that ends it
// (shown at the time the stage started); one that nothing ended shows as started.
func printJournalRun(w io.Writer, r upgrade.RunReport) {
	lw := &trimWriter{w: w}
	lw.printf("run %d: %s %s -> %s (%s): %s", r.ID, r.Kind, r.From, r.To, journalDash(r.Direction), journalOutcome(r))
	lw.printf("  started  %s on %s (pid %d)", journalTime(r.Started), r.Host, r.PID)
	if !r.Ended.IsZero() {
		lw.printf("  ended    %s after %s", journalTime(r.Ended), seconds(r.Duration))
	}
	lw.printf("  offline  %s", journalNone(strings.Join(r.Offline, ", ")))
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
		lw.printf("%-5s %-18s %-12s %-9s %-20s %s", idx, e.Stage, e.State, journalDash(seconds(e.Duration)), journalTime(at), msg)
		for _, n := range e.Nodes {
			status := "ok"
			if !n.OK {
				status = "FAILED"
			}
			line := fmt.Sprintf("      %s: %s, exit %d, %s", n.Node, status, n.ExitCode, journalDash(seconds(n.Duration)))
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

func journalTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func journalDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func journalNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
