package upgrade

import (
	"slices"
	"testing"
)

// TestPrunable checks what prune removes on one node from what the cluster protects: the
// live version, the journal's previous one, a pending run's, versions newer than the live one
// unless named, the Keep newest unless named.
func TestPrunable(t *testing.T) {
	t.Parallel()
	installed := []string{"1.10.0", "0.8.0", "1.0.0", "0.9.0", "1.1.0", "1.2.0"}
	named := func(v ...string) map[string]bool {
		m := map[string]bool{}
		for _, x := range v {
			m[x] = true
		}
		return m
	}
	tests := []struct {
		name  string
		guard pruneGuard
		keep  int
		want  []string
	}{
		{"keep none: newer ones stay", pruneGuard{live: "1.0.0"}, 0, []string{"0.8.0"}},
		{"named newer ones go", pruneGuard{live: "1.0.0", named: named("1.1.0", "1.10.0")}, 0, []string{"0.8.0", "1.1.0", "1.10.0"}},
		{"keep the newest two", pruneGuard{live: "1.0.0"}, 2, []string{"0.8.0"}},
		{"the journal's previous", pruneGuard{live: "1.0.0", previous: []string{"0.8.0", "1.0.0"}}, 0, []string{"0.9.0"}},
		{"a pending run's versions", pruneGuard{pending: []string{"1.0.0", "1.1.0"}, previous: []string{"0.9.0", "1.0.0"}}, 0, []string{"0.8.0"}},
		{"a pending run's, the live and named", pruneGuard{live: "1.0.0", pending: []string{"1.0.0", "1.1.0"}, named: named("1.1.0", "1.2.0")}, 1,
			[]string{"0.8.0", "1.2.0"}},
		{"live is the oldest", pruneGuard{live: "0.8.0"}, 0, nil},
		{"live is the newest", pruneGuard{live: "1.10.0"}, 0, []string{"0.8.0", "0.9.0", "1.0.0", "1.1.0"}},
		{"keep more than installed", pruneGuard{live: "1.10.0"}, 10, nil},
		{"named never the live or previous", pruneGuard{live: "1.0.0", previous: []string{"0.9.0", "1.0.0"}, named: named("1.0.0", "0.9.0")}, 0,
			[]string{"0.8.0"}},
		// A jump from 1.0 to 1.2: the way back is 1.1, the previous minor, not 1.0.
		{"the previous minor after a jump", pruneGuard{live: "1.2.0", previous: []string{"1.0.0", "1.2.0"}}, 0,
			[]string{"0.8.0", "0.9.0", "1.0.0"}},
	}
	for _, tt := range tests {
		got := prunable(installed, tt.guard, tt.keep)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: prunable = %v, want %v", tt.name, got, tt.want)
		}
	}
}
