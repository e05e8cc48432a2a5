package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// withReconciler adds a reconciler to lc's config that records its pause and continue in
// calls, was not paused before the run, and is renewed every renew ("" for never).
func withReconciler(lc *localCluster, renew string) {
	calls, paused := filepath.Join(lc.root, "calls"), filepath.Join(lc.root, "paused")
	extra := fmt.Sprintf("[commands]\nreconciler_pause = %q\nreconciler_continue = %q\nreconciler_paused = %q\n",
		"echo pause >> "+calls+"; touch "+paused, "echo continue >> "+calls+"; rm -f "+paused, "test -e "+paused)
	if renew != "" {
		extra += fmt.Sprintf("reconciler_pause_renew = %q\n", renew)
	}
	lc.writeConfig(strings.Replace(lc.read("cutover.toml"), "[commands]\n", extra, 1))
}

// pauses counts the reconciler's pauses in calls and says whether it was let continue after
// the last one.
func pauses(lc *localCluster) (n int, continuedLast bool) {
	for _, c := range strings.Split(strings.TrimSpace(lc.read("calls")), "\n") {
		switch c {
		case "pause":
			n, continuedLast = n+1, false
		case "continue":
			continuedLast = true
		}
	}
	return n, continuedLast
}

// TestReconcilerPauseRenewed checks that a run which paused the reconciler pauses it again as
// reconciler_pause_renew passes, before it lets it continue, and not at all without the
// setting; and that a run resumed past its pause renews the pause before anything else.
func TestReconcilerPauseRenewed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		renew string
		more  bool // more than the one pause of the pause-reconciler stage
	}{{"", false}, {"1ns", true}} {
		lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
		withReconciler(lc, tc.renew)
		if code, out, errOut := lc.cutover("upgrade", "--to=1.1.0", "--yes"); code != 0 {
			t.Fatalf("renew %q: upgrade exit %d\n%s\n%s", tc.renew, code, out, errOut)
		}
		n, continued := pauses(lc)
		if (n > 1) != tc.more || n == 0 || !continued {
			t.Errorf("renew %q: %d pauses, continued after the last: %v; want more than one: %v, and continued", tc.renew, n, continued, tc.more)
		}
	}

	// Resumed after the point of no return: the pause of the earlier execution may have
	// expired meanwhile, so the resume pauses again first.
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	withReconciler(lc, "1h")
	interrupted(t, lc, execution{through: "config-upgrade", facts: map[string]string{"reconciler_was_paused": "no"}})
	if code, out, errOut := lc.cutover("upgrade", "--resume"); code != 0 {
		t.Fatalf("resume: exit %d\n%s\n%s", code, out, errOut)
	}
	calls := strings.Fields(lc.read("calls"))
	if len(calls) == 0 || calls[0] != "pause" {
		t.Errorf("the resume's calls begin %v, want the renewed pause first", calls)
	}
	if n, continued := pauses(lc); n != 1 || !continued {
		t.Errorf("the resume paused %d times (continued after: %v), want once, then continued", n, continued)
	}
}
