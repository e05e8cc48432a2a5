package demoapp

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cutover/cutover/cfgupgrade"
)

// TestCfgupgradeMigrations runs the migration files through cutover's own engine, as
// cutover loads them from the installed trees: every switch gives exactly the target's
// config, one its daemon accepts, and down(up(x)) == x.
func TestCfgupgradeMigrations(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := Stage(root, testBins, NodeSpec{Name: "node1", Master: "node1", Nodes: demoNodes}); err != nil {
		t.Fatal(err)
	}
	spec := cfgupgrade.Spec{File: "/var/lib/demoapp/config.json", VersionKey: "/version", Encoding: cfgupgrade.Semver}
	tests := []struct {
		from, to string
		tree     string // the version whose migrations are used: the newer one
	}{
		{"1.0.0", "1.1.0", "1.1.0"},
		{"1.1.0", "1.2.0", "1.2.0"},
		{"1.0.0", "1.2.0", "1.2.0"},
		{"1.2.0", "1.1.0", "1.2.0"},
		{"1.1.0", "1.0.0", "1.1.0"},
		{"1.2.0", "1.0.0", "1.2.0"},
	}
	for _, tt := range tests {
		t.Run(tt.from+" to "+tt.to, func(t *testing.T) {
			t.Parallel()
			migs, err := cfgupgrade.LoadMigrations(filepath.Join(root, "usr/share/demoapp", tt.tree, "cutover/migrations"))
			if err != nil {
				t.Fatal(err)
			}
			from := readFixture(t, tt.from)
			got, _, err := cfgupgrade.Migrate(from, spec, tt.from, tt.to, migs)
			if err != nil {
				t.Fatalf("Migrate %s -> %s: %v", tt.from, tt.to, err)
			}
			if want := readFixture(t, tt.to); !sameJSON(t, got, want) {
				t.Errorf("Migrate %s -> %s =\n%s\nwant\n%s", tt.from, tt.to, got, want)
			}
			back, _, err := cfgupgrade.Migrate(got, spec, tt.to, tt.from, migs)
			if err != nil {
				t.Fatalf("Migrate back %s -> %s: %v", tt.to, tt.from, err)
			}
			if !sameJSON(t, back, from) {
				t.Errorf("Migrate %s -> %s -> %s =\n%s\nwant it unchanged\n%s", tt.from, tt.to, tt.from, back, from)
			}

			n := singleNode(t, tt.to)
			if err := os.WriteFile(n.path("var/lib/demoapp/config.json"), got, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, errOut, code := n.run("daemon", "start"); code != 0 {
				t.Fatalf("daemon %s on the migrated config: exit %d, %s", tt.to, code, errOut)
			}
			n.must("daemon", "stop")
		})
	}
}

// readFixture returns testdata/config-VERSION.json.
func readFixture(t *testing.T, version string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "config-"+version+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// sameJSON reports whether a and b hold the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	if bytes.Equal(a, b) {
		return true
	}
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, a)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return reflect.DeepEqual(va, vb)
}
