package main

import "testing"

// TestRunTitle checks how status and journal name a run: both versions where a run goes from
// one to another, the one version of a stage or a prune's none without a stray arrow.
func TestRunTitle(t *testing.T) {
	for _, c := range []struct{ kind, from, to, want string }{
		{"upgrade", "1.0.0", "1.1.0", "upgrade 1.0.0 -> 1.1.0"},
		{"stage", "", "1.2.0", "stage 1.2.0"},
		{"prune", "", "", "prune"},
	} {
		if got := runTitle(c.kind, c.from, c.to); got != c.want {
			t.Errorf("runTitle(%q, %q, %q) = %q, want %q", c.kind, c.from, c.to, got, c.want)
		}
	}
}
