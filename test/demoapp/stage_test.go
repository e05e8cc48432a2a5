package demoapp

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// readLink returns the target of the link at the node path p under root.
func readLink(t *testing.T, root, p string) string {
	t.Helper()
	target, err := os.Readlink(filepath.Join(root, p))
	if err != nil {
		t.Fatalf("readlink %s: %v", p, err)
	}
	return target
}

// mode returns the permission bits of the node path p under root.
func mode(t *testing.T, root, p string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(filepath.Join(root, p))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestStage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		spec         NodeSpec
		wantVersions []string
		wantLive     string
		wantMaster   bool
	}{
		{"master with defaults", NodeSpec{Name: "node1", Master: "node1", Nodes: demoNodes}, Versions, "1.0.0", true},
		{"node with defaults", NodeSpec{Name: "node3", Master: "node1", Nodes: demoNodes}, Versions, "1.0.0", false},
		{"live 1.1.0", NodeSpec{Name: "node2", Master: "node1", Nodes: demoNodes, Live: "1.1.0"}, Versions, "1.1.0", false},
		{"target missing", NodeSpec{Name: "node4", Master: "node1", Nodes: demoNodes, Versions: []string{"1.0.0"}}, []string{"1.0.0"}, "1.0.0", false},
		{"master elsewhere", NodeSpec{Name: "node2", Master: "node2", Nodes: demoNodes, Versions: []string{"1.1.0", "1.2.0"}, Live: "1.2.0"}, []string{"1.1.0", "1.2.0"}, "1.2.0", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			if err := Stage(root, testBins, tt.spec); err != nil {
				t.Fatalf("Stage: %v", err)
			}
			for _, v := range Versions {
				_, libErr := os.Stat(filepath.Join(root, "usr/lib/demoapp", v, "usr/sbin/demoapp"))
				_, shareErr := os.Stat(filepath.Join(root, "usr/share/demoapp", v, "VERSION"))
				installed := slices.Contains(tt.wantVersions, v)
				if (libErr == nil) != installed || (shareErr == nil) != installed {
					t.Errorf("version %s: lib tree err %v, share tree err %v; want installed=%v", v, libErr, shareErr, installed)
				}
				if !installed {
					continue
				}
				bin, err := os.ReadFile(filepath.Join(root, "usr/lib/demoapp", v, "usr/sbin/demoapp"))
				if err != nil {
					t.Fatal(err)
				}
				want, err := os.ReadFile(testBins.Paths[v])
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(bin, want) {
					t.Errorf("version %s: the lib tree's program is not the %s binary", v, v)
				}
				if got, _ := os.ReadFile(filepath.Join(root, "usr/share/demoapp", v, "VERSION")); string(got) != v+"\n" {
					t.Errorf("version %s: VERSION = %q", v, got)
				}
			}
			links := map[string]string{
				"/etc/demoapp/lib":           "/usr/lib/demoapp/" + tt.wantLive,
				"/etc/demoapp/share":         "/usr/share/demoapp/" + tt.wantLive,
				"/usr/lib/demoapp/default":   "/etc/demoapp/lib",
				"/usr/share/demoapp/default": "/etc/demoapp/share",
			}
			for link, want := range links {
				if got := readLink(t, root, link); got != want {
					t.Errorf("link %s -> %s, want %s", link, got, want)
				}
			}
			cfg, err := os.ReadFile(filepath.Join(root, "var/lib/demoapp/config.json"))
			if err != nil {
				t.Fatal(err)
			}
			want, err := appConfig(tt.wantLive, tt.spec.Master, demoNodes)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(cfg, want) {
				t.Errorf("config.json =\n%s\nwant\n%s", cfg, want)
			}
			if got, _ := os.ReadFile(filepath.Join(root, "var/lib/demoapp/master")); string(got) != tt.spec.Master+"\n" {
				t.Errorf("master file = %q, want %q", got, tt.spec.Master+"\n")
			}
			toml, tomlErr := os.ReadFile(filepath.Join(root, "etc/cutover/cutover.toml"))
			if tt.wantMaster {
				if tomlErr != nil || !bytes.Equal(toml, CutoverConfig(tt.spec.Master, demoNodes)) {
					t.Errorf("master's cutover.toml (err %v) is not CutoverConfig(...)", tomlErr)
				}
			} else if tomlErr == nil {
				t.Errorf("a node that is not the master got cutover.toml")
			}
			// The resume at boot comes with cutover's package, not with the application.
			if _, err := os.Lstat(filepath.Join(root, "etc/cron.d/cutover")); err == nil {
				t.Errorf("%s: the demo application wrote /etc/cron.d/cutover", tt.spec.Name)
			}
		})
	}
}

func TestStageModes(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "node1")
	if err := Stage(root, testBins, NodeSpec{Name: "node1", Master: "node1", Nodes: demoNodes}); err != nil {
		t.Fatal(err)
	}
	want := map[string]fs.FileMode{
		"/":        0o755,
		"/usr":     0o755,
		"/etc":     0o755,
		"/var/lib": 0o755,
		"/usr/lib/demoapp/1.1.0/usr/sbin/demoapp": 0o755,
		"/usr/share/demoapp/1.1.0/VERSION":        0o644,
		"/var/lib/demoapp":                        0o755,
		"/var/lib/demoapp/config.json":            0o600,
		"/var/lib/demoapp/master":                 0o644,
		"/var/lib/demoapp/queue":                  0o700,
		"/var/lib/demoapp/queue/waiting":          0o700,
		"/var/lib/demoapp/queue/running":          0o700,
		"/var/lib/demoapp/queue/done":             0o700,
		"/var/log/demoapp":                        0o750,
		"/etc/boot.d/demoapp":                     0o755,
		"/etc/cutover":                            0o700,
		"/etc/cutover/cutover.toml":               0o600,
	}
	for p, m := range want {
		if got := mode(t, root, p); got != m {
			t.Errorf("mode of %s = %o, want %o", p, got, m)
		}
	}
	hook, err := os.ReadFile(filepath.Join(root, "etc/boot.d/demoapp"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(hook, []byte("/usr/lib/demoapp/default/usr/sbin/demoapp daemon start")) {
		t.Errorf("boot hook does not start the daemon:\n%s", hook)
	}
}

func TestStageMigrations(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := Stage(root, testBins, NodeSpec{Name: "node2", Master: "node1", Nodes: demoNodes}); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"1.0.0": nil,
		"1.1.0": {"1.0-1.1.json"},
		"1.2.0": {"1.0-1.1.json", "1.1-1.2.json"},
	}
	for v, files := range want {
		entries, _ := os.ReadDir(filepath.Join(root, "usr/share/demoapp", v, "cutover/migrations"))
		var got []string
		for _, e := range entries {
			got = append(got, e.Name())
			data, err := os.ReadFile(filepath.Join(root, "usr/share/demoapp", v, "cutover/migrations", e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			src, err := migrations.ReadFile("migrations/" + e.Name())
			if err != nil || !bytes.Equal(data, src) {
				t.Errorf("version %s: %s differs from migrations/%s (%v)", v, e.Name(), e.Name(), err)
			}
		}
		if !slices.Equal(got, files) {
			t.Errorf("version %s ships migrations %v, want %v", v, got, files)
		}
	}
}

func TestStageRefusesBadSpec(t *testing.T) {
	t.Parallel()
	noBin := &Binaries{Paths: map[string]string{"1.0.0": testBins.Paths["1.0.0"]}}
	tests := []struct {
		name string
		bins *Binaries
		spec NodeSpec
	}{
		{"no nodes", testBins, NodeSpec{Name: "node1", Master: "node1"}},
		{"node not listed", testBins, NodeSpec{Name: "node9", Master: "node1", Nodes: demoNodes}},
		{"master not listed", testBins, NodeSpec{Name: "node1", Master: "node9", Nodes: demoNodes}},
		{"duplicate node", testBins, NodeSpec{Name: "node1", Master: "node1", Nodes: append(slices.Clone(demoNodes), demoNodes[1])}},
		{"bad node name", testBins, NodeSpec{Name: "node1", Master: "node1", Nodes: append(slices.Clone(demoNodes), NodeAddr{"a b", "10.0.0.1"})}},
		{"bad address", testBins, NodeSpec{Name: "node1", Master: "node1", Nodes: append(slices.Clone(demoNodes), NodeAddr{"node5", "10.0.0.1; rm -rf /"})}},
		{"unknown version", testBins, NodeSpec{Name: "node1", Master: "node1", Nodes: demoNodes, Versions: []string{"1.0.0", "2.0.0"}}},
		{"duplicate version", testBins, NodeSpec{Name: "node1", Master: "node1", Nodes: demoNodes, Versions: []string{"1.0.0", "1.0.0"}}},
		{"live not installed", testBins, NodeSpec{Name: "node1", Master: "node1", Nodes: demoNodes, Versions: []string{"1.1.0"}}},
		{"no binary", noBin, NodeSpec{Name: "node1", Master: "node1", Nodes: demoNodes}},
		{"nil binaries", nil, NodeSpec{Name: "node1", Master: "node1", Nodes: demoNodes}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := filepath.Join(t.TempDir(), "root")
			err := Stage(root, tt.bins, tt.spec)
			if err == nil {
				t.Fatal("Stage succeeded, want an error")
			}
			if _, statErr := os.Lstat(root); statErr == nil {
				t.Errorf("Stage failed (%v) but wrote %s", err, root)
			}
		})
	}
}

// TestStageConfigGolden checks the config each version starts with against testdata, the
// fixtures the migration tests convert into each other.
func TestStageConfigGolden(t *testing.T) {
	t.Parallel()
	for _, v := range Versions {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			if err := Stage(root, testBins, NodeSpec{Name: "node1", Master: "node1", Nodes: demoNodes, Live: v}); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(root, "var/lib/demoapp/config.json"))
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "config-"+v+".json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("config.json of %s =\n%s\nwant (%s)\n%s", v, got, golden, want)
			}
		})
	}
}
