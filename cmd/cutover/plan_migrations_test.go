package main

import (
	"os"
	"strings"
	"testing"
)

// TestPlanShowsMigrations: plan lists the config's migration steps of a real cluster, one per
// minor with its file or "no file", and warns about a migrations directory it does not read,
// which would otherwise leave the config with only its version changed.
func TestPlanShowsMigrations(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, lc *localCluster)
		want  []string // parts of the output
		not   []string // parts the output must not have
	}{
		{"the migration file", func(*testing.T, *localCluster) {}, []string{
			"\nconfig migrations\n  1.0 -> 1.1  1.0-1.1.json  ",
		}, []string{"warning  migrations"}},
		{"a misnamed migrations directory", func(t *testing.T, lc *localCluster) {
			if err := os.Rename(lc.path("usr/share/app/1.1.0/cutover/migrations"), lc.path("usr/share/app/1.1.0/cutover/migration")); err != nil {
				t.Fatal(err)
			}
		}, []string{
			"\n  1.0 -> 1.1  no file  no change between 1.0 and 1.1\n",
			"warning  migrations", "cutover/migration is not read",
		}, []string{"1.0-1.1.json  "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
			tt.setup(t, lc)
			code, out, errOut := lc.cutover("plan", "--to=1.1.0")
			if code != exitOK {
				t.Fatalf("plan exit %d, want 0\nstderr:\n%s", code, errOut)
			}
			for _, want := range tt.want {
				if !strings.Contains(out, want) {
					t.Errorf("plan output lacks %q:\n%s", want, out)
				}
			}
			for _, not := range tt.not {
				if strings.Contains(out, not) {
					t.Errorf("plan output has %q:\n%s", not, out)
				}
			}
		})
	}
}
