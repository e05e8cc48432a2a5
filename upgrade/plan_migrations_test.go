package upgrade

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/config"
)

// TestPlanMigrations: plan lists one step per minor hop, with the file and its ops or "no
// file", and warns about what the newer tree holds where cutover looks but does not read.
func TestPlanMigrations(t *testing.T) {
	const rename = `{"from": "2.3", "to": "2.4",
		"up": [{"op": "move", "from": "/queue/dir", "path": "/queue/path"}],
		"down": [{"op": "move", "from": "/queue/path", "path": "/queue/dir"}]}`
	share := "usr/share/shop/2.4.0/"
	tests := []struct {
		name     string
		from, to string
		migrate  string
		files    map[string]string // relative to the root; a name ending in / is a directory
		steps    []string          // "FROM TO FILE OPS"
		warnings []string          // each a part of one warning, in order
		note     string            // a part of the migrations check's note
	}{
		{name: "one file", from: "2.3.0", to: "2.4.0",
			files: map[string]string{share + "cutover/migrations/2.3-2.4.json": rename},
			steps: []string{"2.3 2.4 2.3-2.4.json move /queue/dir to /queue/path"},
			note:  "1 step from"},
		{name: "a jump: one step per minor", from: "2.1.0", to: "2.4.0",
			files: map[string]string{share + "cutover/migrations/2.3-2.4.json": rename},
			steps: []string{"2.1 2.2  ", "2.2 2.3  ", "2.3 2.4 2.3-2.4.json move /queue/dir to /queue/path"},
			note:  "3 steps from"},
		{name: "downgrade: the newer tree's down ops", from: "2.4.0", to: "2.3.0",
			files: map[string]string{share + "cutover/migrations/2.3-2.4.json": rename},
			steps: []string{"2.4 2.3 2.3-2.4.json move /queue/path to /queue/dir"}},
		{name: "no migrations directory", from: "2.3.0", to: "2.4.0",
			files: map[string]string{share + "bin/": ""},
			steps: []string{"2.3 2.4  "},
			note:  "has no migration files"},
		{name: "misnamed directory", from: "2.3.0", to: "2.4.0",
			files:    map[string]string{share + "cutover/migration/2.3-2.4.json": rename},
			steps:    []string{"2.3 2.4  "},
			warnings: []string{"cutover/migration is not read"}},
		{name: "misnamed files", from: "2.3.0", to: "2.4.0",
			files: map[string]string{
				share + "cutover/migrations/2.3-2.4.json": rename,
				share + "cutover/migrations/2.4-2.5.yaml": "from: 2.4",
				share + "cutover/migrations/old/":         "",
				share + "cutover/policy.json":             "{}",
				share + "cutover/upgrade-policy.json":     "{}",
			},
			steps: []string{"2.3 2.4 2.3-2.4.json move /queue/dir to /queue/path"},
			warnings: []string{"cutover/policy.json is not read", "cutover/migrations/2.4-2.5.yaml is not read",
				"cutover/migrations/old is not read"}},
		{name: "wrong trees", from: "2.3.0", to: "2.4.0",
			files: map[string]string{
				share + "migrations/2.3-2.4.json":                    rename,
				"usr/lib/shop/2.4.0/cutover/migrations/2.3-2.4.json": rename,
			},
			steps:    []string{"2.3 2.4  "},
			warnings: []string{"usr/share/shop/2.4.0/migrations is not read", "usr/lib/shop/2.4.0/cutover is not read"}},
		{name: "exec mode lists no steps", from: "2.3.0", to: "2.4.0", migrate: "exec",
			files: map[string]string{share + "cutover/migrations/2.3-2.4.json": rename},
			note:  `"shop-cfgupgrade" migrates the config`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for name, content := range tt.files {
				p := filepath.Join(root, name)
				if strings.HasSuffix(name, "/") {
					if err := os.MkdirAll(p, 0o755); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r := migrationsRun(t, root, tt.from, tt.to, tt.migrate)
			steps, checks := planMigrations(r)
			var got []string
			for _, s := range steps {
				got = append(got, strings.Join([]string{s.From, s.To, filepath.Base(s.File), strings.Join(s.Ops, "; ")}, " "))
				if s.File == "" {
					got[len(got)-1] = s.From + " " + s.To + "  "
				}
			}
			if !slices.Equal(got, tt.steps) {
				t.Errorf("steps = %q, want %q", got, tt.steps)
			}
			var warnings []string
			note := ""
			for _, c := range checks {
				if c.err != nil {
					t.Errorf("check refused: %v", c.err)
				}
				if c.warn != "" {
					warnings = append(warnings, c.warn)
				}
				note += c.note
			}
			if len(warnings) != len(tt.warnings) {
				t.Fatalf("warnings = %q, want one containing each of %q", warnings, tt.warnings)
			}
			for i, w := range tt.warnings {
				if !strings.Contains(warnings[i], w) {
					t.Errorf("warning %d = %q, want it to contain %q", i, warnings[i], w)
				}
			}
			if !strings.Contains(note, tt.note) {
				t.Errorf("note = %q, want it to contain %q", note, tt.note)
			}
		})
	}
}

// migrationsRun is a Run of shop from one version to another on a single master, with its
// trees under root.
func migrationsRun(t *testing.T, root, from, to, migrate string) *Run {
	t.Helper()
	if migrate == "" {
		migrate = "builtin"
	}
	paths := layout.Paths{LibDir: root + "/usr/lib", DataDir: root + "/usr/share", SysconfDir: root + "/etc", LocalstateDir: root + "/var"}
	lay, err := layout.New("shop", paths, "full", "")
	if err != nil {
		t.Fatal(err)
	}
	inv, err := nodes.NewInventory("node1", []nodes.Node{{Name: "node1"}})
	if err != nil {
		t.Fatal(err)
	}
	target, err := newTarget(lay, from, to)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Config: config.AppConfig{Migrate: migrate, UpgradeCommand: "shop-cfgupgrade", DowngradeCommand: "shop-cfgdowngrade"}}
	return &Run{Config: cfg, Layout: lay, Inventory: inv, Online: inv.Online(), Target: target}
}
