package upgrade

import (
	"slices"
	"testing"
)

// TestStageFacts checks the facts every consumer derives from the stage lists: one point of
// no return per direction, where a resume restarts, what a dry run runs, where each stage
// works, and that names are unique.
func TestStageFacts(t *testing.T) {
	stages := Stages()
	seen := map[string]bool{}
	for _, st := range stages {
		if seen[st.Name()] {
			t.Errorf("stage name %s appears twice", st.Name())
		}
		seen[st.Name()] = true
		switch st.Where() {
		case OnMaster, OnAll, OnOthers:
		default:
			t.Errorf("stage %s: Where() = %q", st.Name(), st.Where())
		}
	}
	names := func(list []Stage) []string {
		var out []string
		for _, st := range list {
			out = append(out, st.Name())
		}
		return out
	}
	for _, tt := range []struct {
		d                    Direction
		ponr                 string
		restart, restartPast string
	}{
		{Up, "config-upgrade", "drain", "switch"},
		{Down, "config-downgrade", "drain", "config-downgrade"},
		{Same, "switch", "drain", "switch"},
	} {
		if got := PONRStage(stages, tt.d); got != tt.ponr {
			t.Errorf("PONRStage(%s) = %q, want %q", tt.d, got, tt.ponr)
		}
		if got := stages[restartIndex(stages, tt.d, false)].Name(); got != tt.restart {
			t.Errorf("restart of a %s before the PONR = %s, want %s", tt.d, got, tt.restart)
		}
		past := restartIndex(stages, tt.d, true)
		if got := stages[past].Name(); got != tt.restartPast {
			t.Errorf("restart of a %s past the PONR = %s, want %s", tt.d, got, tt.restartPast)
		}
		// A run resumed past its point of no return restarts at or before it, so that the
		// point of no return's own stage always runs to its end.
		if ponr := slices.IndexFunc(stages, func(st Stage) bool { return st.Name() == tt.ponr }); past > ponr {
			t.Errorf("a %s resumed past the PONR restarts after the PONR stage", tt.d)
		}
	}
	if got, want := names(stages[:readOnlyHead(stages)]), []string{"preflight", "verify-installed"}; !slices.Equal(got, want) {
		t.Errorf("read-only head = %q, want %q", got, want)
	}
	// Every stage that undoes something comes after the first writer, and the intent is the
	// only releaser.
	var rel []string
	for _, st := range stages {
		if _, ok := st.(releaser); ok {
			rel = append(rel, st.Name())
		}
	}
	if !slices.Equal(rel, []string{"intent"}) {
		t.Errorf("releasers = %q, want [intent]", rel)
	}
	sync := SyncStages()
	if got := PONRStage(sync, ""); got != "switch" {
		t.Errorf("sync's PONR = %q, want switch", got)
	}
	if got, want := names(sync[:readOnlyHead(sync)]), []string{"verify-installed"}; !slices.Equal(got, want) {
		t.Errorf("sync's read-only head = %q, want %q", got, want)
	}
}
