package main

import (
	"fmt"
	"io"
	"time"

	"github.com/cutover/cutover/upgrade"
)

// watchText says in one line how a run's watch stands at now: the time left and the checks
// passed while it watches, and how it ended once it did.
func watchText(w *upgrade.WatchStatus, now time.Time) string {
	switch w.State {
	case "waiting":
		return fmt.Sprintf("%s after the finish, a check every %s; not begun", w.Window, w.Interval)
	case "watching":
		s := fmt.Sprintf("%s of %s left, %d of %d checks passed (a check every %s)", w.Left(now).Round(time.Second), w.Window, w.Passed, w.Checks, w.Interval)
		if w.Failures > 0 {
			s += fmt.Sprintf("; %d of %d allowed failures in a row, the last at %s: %s", w.Failures, w.MaxFailures, textTime(w.LastFailureAt), w.LastFailure)
		}
		if w.FailedBoots > 0 {
			s += fmt.Sprintf("; %d of %d boots of the master failed", w.FailedBoots, w.MaxBoots)
		}
		return s
	}
	if w.Round > 1 {
		return fmt.Sprintf("%s (window %d)", w.End, w.Round)
	}
	return w.End
}

// printPendingWatch shows the watch of a pending run in `cutover status`, with what ends it.
func printPendingWatch(out io.Writer, w *upgrade.WatchStatus, inProgress bool, to string) {
	if w == nil {
		return
	}
	fmt.Fprintf(out, "  watch: %s\n", watchText(w, time.Now()))
	switch {
	case inProgress:
	case w.State == "failed":
		fmt.Fprintf(out, "  the watch failed: 'cutover upgrade --resume' watches again once the cause is fixed; 'cutover upgrade --abort' ends the watch and keeps %s\n", to)
	case w.State == "watching" || w.State == "waiting":
		fmt.Fprintln(out, "  'cutover upgrade --resume' takes the watch up again; 'cutover upgrade --abort' ends it early")
	}
}
