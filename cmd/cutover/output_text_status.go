package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/upgrade"
)

// The text form of `cutover status`.

// status shows the cluster's state: a header, one line per node, then verify, the pending
// run, the lock, the nodes behind and how the master resumes a run at boot.
func (o *textOutput) status(st *upgrade.StatusReport) error {
	w := o.w
	printStatusHeader(w, st)
	printStatusNodes(w, st)
	if v := st.Verify; v != nil {
		printStatusVerify(w, v)
	}
	if p := st.Pending; p != nil {
		printStatusPending(w, st, p)
	} else {
		printStatusLastRun(w, st)
	}
	printStatusLock(w, st.Lock)
	printStatusBehind(w, st)
	printStatusResume(w, st)
	return nil
}

// printStatusHeader shows the application, its version, the nodes and the master.
func printStatusHeader(w io.Writer, st *upgrade.StatusReport) {
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
}

// printStatusNodes shows one line per node: its state, its links and what it has installed.
func printStatusNodes(w io.Writer, st *upgrade.StatusReport) {
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
}

// printStatusVerify shows how the cluster's verify command went, and its output.
func printStatusVerify(w io.Writer, v *upgrade.VerifyStatus) {
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

// printStatusPending shows the pending run: where it stopped, how to end it, the nodes it
// cannot reach or that rebooted, its batches and its watch.
func printStatusPending(w io.Writer, st *upgrade.StatusReport, p *upgrade.PendingRun) {
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
		printUnreachable(w, st, p)
	}
	if len(p.Rebooted) > 0 {
		fmt.Fprintf(w, "  rebooted during the run: %s (the run stops their daemons again and redoes their steps)\n", strings.Join(p.Rebooted, ", "))
	}
	printRollingStatus(w, p.Batches)
	printPendingWatch(w, p.Watch, st.Lock != nil, p.To)
}

// printUnreachable names the nodes of pending run p that cannot be reached (and are not
// declared offline), with how the run goes on without them.
func printUnreachable(w io.Writer, st *upgrade.StatusReport, p *upgrade.PendingRun) {
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

// printStatusLastRun shows that no run is pending, and how the last run ended.
func printStatusLastRun(w io.Writer, st *upgrade.StatusReport) {
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

// printStatusResume shows how the master resumes an interrupted run at boot, and the
// problems status found.
func printStatusResume(w io.Writer, st *upgrade.StatusReport) {
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
}

// printStatusLock shows who holds the run lock, if anyone.
func printStatusLock(w io.Writer, h *journal.Holder) {
	if h == nil {
		return
	}
	fmt.Fprintf(w, "lock: held by pid %d on %s since %s", h.PID, h.Host, textTime(h.Started))
	if h.Command != "" {
		fmt.Fprintf(w, " (%s)", h.Command)
	}
	fmt.Fprintln(w)
}

// printStatusBehind shows each node behind the cluster, with the command that catches it up.
func printStatusBehind(w io.Writer, st *upgrade.StatusReport) {
	for _, b := range st.Behind {
		if b.Unconfirmed != 0 {
			fmt.Fprintf(w, "behind: run %d left %s in a state it could not confirm (its links at %s, its config and daemons unknown), the cluster at %s: run '%s'\n",
				b.Unconfirmed, b.Node, textDash(b.Version), st.Version, b.Command)
			continue
		}
		fmt.Fprintf(w, "behind: %s is at %s, the cluster at %s: run '%s'\n", b.Node, b.Version, st.Version, b.Command)
	}
}
