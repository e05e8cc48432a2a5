package upgrade

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseConfigExamples(t *testing.T) {
	files, _ := filepath.Glob("../docs/examples/*.toml")
	if len(files) < 2 {
		t.Fatalf("docs/examples has %d configs, want the demo and the ganeti one", len(files))
	}
	for _, f := range files {
		if _, err := LoadConfig(f); err != nil {
			t.Errorf("LoadConfig(%s) = %v", f, err)
		}
	}
}

func TestParseConfigErrors(t *testing.T) {
	base := `app = "demoapp"
[cluster]
master = "node1"
[[cluster.node]]
name = "node1"
`
	tests := []struct {
		name, text, want string
	}{
		{"unknown top key", "colour = \"red\"\n" + base, `line 1: unknown key "colour"`},
		{"unknown nested key", strings.Replace(base, "[cluster]\n", "[cluster]\nmastr = \"x\"\n", 1), `line 3: unknown key "cluster.mastr"`},
		{"unknown node key", base + "adress = \"x\"\n", `line 6: unknown key "cluster.node.adress"`},
		{"unknown profile", "profile = \"other\"\n" + base, `unknown profile "other"`},
		{"bad app", strings.Replace(base, "demoapp", "demo app; rm", 1), `app "demo app; rm"`},
		{"bad duration", base + "[ssh]\nconnect_timeout = \"soon\"\n", `invalid duration "soon"`},
		{"syntax", base + "[ssh\n", "to end table name"},
		{"no nodes", "app = \"x\"\n[cluster]\nmaster = \"n\"\n", "no nodes"},
		{"bad encoding", base + "[config]\nfile = \"/x\"\nversion_encoding = \"roman\"\n", `version_encoding "roman"`},
		{"relative path", base + "[paths]\nlibdir = \"usr/lib\"\n", `paths.libdir "usr/lib"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tt.text))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseConfig() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestProfilesDefaults(t *testing.T) {
	cfg, err := ParseConfig([]byte("profile = \"ganeti\"\n[cluster]\nmaster = \"node1\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.App != "ganeti" || cfg.VersionDirs != "minor" || cfg.Config.VersionEncoding != "ganeti" || cfg.Config.Migrate != "exec" {
		t.Errorf("ganeti profile = %+v", cfg)
	}
	if cfg.Commands.DaemonsStop != "/usr/lib/ganeti/daemon-util stop-all" {
		t.Errorf("ganeti daemons_stop = %q", cfg.Commands.DaemonsStop)
	}
	cfg, err = ParseConfig([]byte("app = \"x\"\n[cluster]\nmaster = \"n\"\n[[cluster.node]]\nname = \"n\"\n[ssh]\nparallel = 4\n[config]\nfile = \"/var/lib/x/config.json\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SSH.Parallel != 4 || cfg.SSH.User != "root" || cfg.Paths.StateDir != "/var/lib/cutover" || cfg.VersionDirs != "full" {
		t.Errorf("generic profile with override = %+v", cfg)
	}
}

// TestGanetiExampleMatchesProfile keeps docs/examples/ganeti.toml equal to the profile's
// defaults, so the example shows exactly what the profile runs.
func TestGanetiExampleMatchesProfile(t *testing.T) {
	cfg, err := LoadConfig("../docs/examples/ganeti.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := ganetiProfile()
	want.Cluster.Master = cfg.Cluster.Master
	want.File = cfg.File
	if got, wantS := fmt.Sprintf("%+v", *cfg), fmt.Sprintf("%+v", want); got != wantS {
		t.Errorf("ganeti.toml differs from the profile:\n got %s\nwant %s", got, wantS)
	}
}
