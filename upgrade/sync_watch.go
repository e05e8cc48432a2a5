package upgrade

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A sync watches the nodes it synced as an upgrade watches the cluster ([policy] watch,
// `sync --watch`): the same watch stage ends SyncStages, with the same checks and the same
// facts. What differs is what follows a watch that does not pass, for a sync keeps no intent
// and is never resumed: a failed watch rolls nothing back (the nodes' earlier version is not
// one the cluster runs) and a signal ends the watch early instead of leaving it pending. Both
// end the sync failed past its point of no return (exit 3), and running the same sync again
// syncs the nodes again and watches a new window.

// signalled is why a signal ended a stage that leaves on one (the cause of its context).
type signalled struct{ sig os.Signal }

func (s *signalled) Error() string { return "received " + s.name() }

// name is the signal's name as operators know it: SIGINT, SIGTERM.
func (s *signalled) name() string {
	if n, ok := s.sig.(syscall.Signal); ok && unix.SignalName(n) != "" {
		return unix.SignalName(n)
	}
	return s.sig.String()
}

// endSyncEarly ends the watch of a sync that a signal interrupted: the round's end is
// journaled as ended early, with the signal and how far the window got, and the stage fails.
func (w *watcher) endSyncEarly(ctx context.Context) error {
	r, round := w.r, w.round
	by := "a signal"
	var sig *signalled
	if errors.As(context.Cause(ctx), &sig) {
		by = sig.name()
	}
	ctx = context.WithoutCancel(ctx) // the end is journaled whatever ended the stage
	how := fmt.Sprintf("%s: by %s at %s", watchEndedEarly, by, time.Now().UTC().Format(time.RFC3339))
	if st := watchStatusOf(r.factsCopy()); st != nil && st.Round == round && st.State == "watching" {
		how += fmt.Sprintf(", %d of %d checks passed, %s of %s left", st.Passed, st.Checks, st.Left(time.Now()).Round(time.Second), st.Window)
	}
	if _, err := r.Learn(ctx, w.key("end"), how); err != nil {
		return err
	}
	why := strings.TrimPrefix(how, watchEndedEarly+": ")
	r.mu.Lock()
	r.watchWhy = "ended early " + why
	r.mu.Unlock()
	return fmt.Errorf("the watch was not completed: it ended early %s", why)
}

// syncWatchErr is the error of a sync whose watch failed or ended early: what happened, where
// the nodes are, and that the same sync run again watches them again.
func (r *Run) syncWatchErr(names []string) error {
	r.mu.Lock()
	why := r.watchWhy
	r.mu.Unlock()
	list, nodes := strings.Join(names, " "), joinNames(names)
	if strings.HasPrefix(why, "ended early ") {
		return fmt.Errorf("the watch of sync run %d of %s was not completed: it %s; %s %s runs on %s, nothing is pending, and the nodes were not watched for the whole window: run 'cutover sync %s' again to watch them again (it syncs them again first)",
			r.ID, nodes, why, r.Config.App, r.To, nodes, list)
	}
	return fmt.Errorf("the watch of sync run %d of %s failed: %s; %s %s stays on %s, for a sync rolls nothing back (the version the nodes came from is not one the cluster runs): fix the cause and run 'cutover sync %s' again, which syncs them again and watches a new window",
		r.ID, nodes, why, r.Config.App, r.To, nodes, list)
}

// watchOnly reports whether the watch is the one stage of the run that failed.
func (r *Run) watchOnly() bool {
	failed := r.Failed()
	return len(failed) == 1 && failed[0] == (watchWindow{}).Name() && len(r.Tolerated()) == 0
}
