package main

import (
	"strings"
	"testing"
)

// TestPruneSaysWhyItKeeps: prune's output says why each installed version stays (the live,
// the previous one, one newer than the live one), answers a version named for removal that it
// keeps with the exact reason, and its title does not claim to keep the newest when a version
// was named.
func TestPruneSaysWhyItKeeps(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    []string
		notWant []string
	}{
		{"the rules", []string{"prune", "--yes"},
			[]string{"1.1.0 the live version", "1.0.0 the previous version (the way back)", "1.2.0 newer than the live version", "keeping the live, previous and newer versions and the 2 newest"},
			nil},
		{"the previous version named", []string{"prune", "--yes", "--version=1.0.0"},
			[]string{"1.0.0 kept: the previous version (the way back), which prune never removes", "removing 1.0.0 as named"},
			[]string{"(keeping the 2 newest)", "or not installed"}},
		{"a version not installed named", []string{"prune", "--yes", "--version=1.3.0"},
			[]string{"1.3.0 kept: not installed on any node"},
			[]string{"the way back) or", "(keeping the 2 newest)"}},
		{"a newer version named", []string{"prune", "--dry-run", "--version=1.2.0"},
			[]string{"vm: 1.2.0"},
			[]string{"1.2.0 kept"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lc := newLocalCluster(t, "1.1.0", "1.0.0", "1.1.0", "1.2.0")
			code, out, errOut := lc.cutover(tt.args...)
			if code != exitOK {
				t.Fatalf("%v: exit %d\n%s\n%s", tt.args, code, out, errOut)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("%v does not say %q:\n%s", tt.args, w, out)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(out, w) {
					t.Errorf("%v says %q:\n%s", tt.args, w, out)
				}
			}
		})
	}
}
