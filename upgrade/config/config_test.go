package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseConfigExamples(t *testing.T) {
	files, _ := filepath.Glob("../../docs/examples/*.toml")
	if len(files) < 2 {
		t.Fatalf("docs/examples has %d configs, want the demo and the ganeti one", len(files))
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Errorf("Load(%s) = %v", f, err)
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
		{"state dir in the app's state", base + "[paths]\nstate_dir = \"/var/lib/demoapp/cutover\"\n", `overlaps /var/lib/demoapp`},
		{"backup exclude outside the backup", base + "[paths]\nbackup_exclude = [\"/var/lib/other\"]\n", `paths.backup_exclude "/var/lib/other": must be a clean absolute path inside /var/lib/demoapp or /etc/demoapp`},
		{"backup exclude of a whole root", base + "[paths]\nbackup_exclude = [\"/etc/demoapp\"]\n", `paths.backup_exclude "/etc/demoapp"`},
		{"backup exclude relative", base + "[paths]\nbackup_exclude = [\"queue/archive\"]\n", `paths.backup_exclude "queue/archive"`},
		{"state dir in the app's sysconfdir", base + "[paths]\nstate_dir = \"/etc/demoapp\"\n", `overlaps /etc/demoapp`},
		{"state dir above the app's state", base + "[paths]\nstate_dir = \"/var/lib\"\n", `overlaps /var/lib/demoapp`},
		{"unknown strategy", base + "[strategy]\nmode = \"canary\"\n", `strategy.mode "canary": must be "all-at-once" or "rolling"`},
		{"strategy typo", base + "[strategy]\nbatchsize = 2\n", `unknown key "strategy.batchsize"`},
		{"zero batch", base + "[strategy]\nmode = \"rolling\"\nbatch_size = 0\n", `strategy.batch_size 0: must be at least 1`},
		{"negative budget", base + "[strategy]\nmax_failed = -1\n", `strategy.max_failed -1`},
		{"bad timeout", base + "[strategy]\nbatch_timeout = \"0s\"\n", `strategy.batch_timeout must be positive`},
		{"bad order", base + "[strategy]\norder = [\"random\"]\n", `strategy.order ["random"]`},
		{"two orders", base + "[strategy]\norder = [\"master-last\", \"master-first\"]\n", `strategy.order`},
		{"canary not a host", base + "[strategy]\ncanaries = [\"node2; rm -rf /\"]\n", `strategy.canaries: "node2; rm -rf /" is not a host name`},
		{"canary twice", base + "[strategy]\ncanaries = [\"node1\", \"node1\"]\n", `node1 is named twice`},
		{"node command without node", base + "[commands]\nnode_verify = \"curl localhost\"\n", `commands.node_verify runs on the master for each node and must name it with {node}`},
		{"stage typo", base + "[stage]\nallow_suid = [\"usr/sbin/x\"]\n", `unknown key "stage.allow_suid"`},
		{"stage zero bound", base + "[stage]\nmax_files = 0\n", `stage.max_files 0: must be at least 1`},
		{"stage negative bytes", base + "[stage]\nmax_bytes = -1\n", `stage.max_bytes -1`},
		{"stage absolute pattern", base + "[stage]\nallow_setuid = [\"/usr/sbin/x\"]\n", `stage.allow_setuid: "/usr/sbin/x" must be a clean pattern`},
		{"stage pattern above the tree", base + "[stage]\nallow_devices = [\"../dev/null\"]\n", `stage.allow_devices: "../dev/null"`},
		{"stage bad pattern", base + "[stage]\nallow_fifos = [\"run/[\"]\n", `stage.allow_fifos: "run/["`},
		{"metrics typo", base + "[metrics]\ntextfiles = \"/var/lib/prometheus/node-exporter/cutover.prom\"\n", `unknown key "metrics.textfiles"`},
		{"metrics relative", base + "[metrics]\ntextfile = \"node-exporter/cutover.prom\"\n", `metrics.textfile "node-exporter/cutover.prom": must be a clean absolute path`},
		{"metrics not .prom", base + "[metrics]\ntextfile = \"/var/lib/prometheus/node-exporter/cutover.txt\"\n", `metrics.textfile "/var/lib/prometheus/node-exporter/cutover.txt"`},
		{"metrics unclean", base + "[metrics]\ntextfile = \"/var/lib/prometheus/../x/cutover.prom\"\n", `metrics.textfile "/var/lib/prometheus/../x/cutover.prom"`},
		{"metrics hidden", base + "[metrics]\ntextfile = \"/var/lib/prometheus/node-exporter/.prom\"\n", `metrics.textfile "/var/lib/prometheus/node-exporter/.prom"`},
		{"drain without undrain", base + "[strategy]\nmode = \"rolling\"\n[commands]\nnode_drain = \"lb drain {node}\"\n", `node_drain and commands.node_undrain go together`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.text))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestProfilesDefaults(t *testing.T) {
	cfg, err := Parse([]byte("profile = \"ganeti\"\n[cluster]\nmaster = \"node1\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.App != "ganeti" || cfg.VersionDirs != "minor" || cfg.Config.VersionEncoding != "ganeti" || cfg.Config.Migrate != "exec" {
		t.Errorf("ganeti profile = %+v", cfg)
	}
	if cfg.Commands.DaemonsStop != "/usr/lib/ganeti/daemon-util stop-all" {
		t.Errorf("ganeti daemons_stop = %q", cfg.Commands.DaemonsStop)
	}
	cfg, err = Parse([]byte("app = \"x\"\n[cluster]\nmaster = \"n\"\n[[cluster.node]]\nname = \"n\"\n[ssh]\nparallel = 4\n[config]\nfile = \"/var/lib/x/config.json\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SSH.Parallel != 4 || cfg.SSH.User != "root" || cfg.Paths.StateDir != "/var/lib/cutover" || cfg.VersionDirs != "full" {
		t.Errorf("generic profile with override = %+v", cfg)
	}
}

func TestStrategy(t *testing.T) {
	base := "app = \"x\"\n[cluster]\nmaster = \"n\"\n[[cluster.node]]\nname = \"n\"\n[config]\nfile = \"/var/lib/x/config.json\"\n"
	cfg, err := Parse([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Strategy.IsRolling() || cfg.Strategy.BatchSize != 1 || cfg.Strategy.BatchTimeout.Minutes() != 10 || cfg.Strategy.MasterFirst() {
		t.Errorf("default strategy = %+v, want all-at-once, batches of 1, 10m, master last", cfg.Strategy)
	}
	cfg, err = Parse([]byte(base + "[strategy]\nmode = \"rolling\"\nbatch_size = 2\ncanaries = [\"n\"]\nmax_failed = 1\nbatch_timeout = \"90s\"\norder = [\"master-first\"]\n[commands]\nnode_drain = \"lb drain {node}\"\nnode_undrain = \"lb undrain {node}\"\nnode_verify = \"curl -f http://{node}/\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Strategy
	if !s.IsRolling() || s.BatchSize != 2 || len(s.Canaries) != 1 || s.MaxFailed != 1 || s.BatchTimeout.Seconds() != 90 || !s.MasterFirst() || cfg.Commands.NodeVerify == "" {
		t.Errorf("rolling strategy = %+v", s)
	}
}

// TestGanetiExampleMatchesProfile keeps docs/examples/ganeti.toml equal to the profile's
// defaults, so the example shows exactly what the profile runs.
func TestGanetiExampleMatchesProfile(t *testing.T) {
	cfg, err := Load("../../docs/examples/ganeti.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := ganetiProfile(basePaths())
	want.Cluster.Master = cfg.Cluster.Master
	want.File = cfg.File
	if got, wantS := fmt.Sprintf("%+v", *cfg), fmt.Sprintf("%+v", want); got != wantS {
		t.Errorf("ganeti.toml differs from the profile:\n got %s\nwant %s", got, wantS)
	}
}

// TestParseHostile: inputs that used to cost a gigabyte or flood the terminal get a short,
// clear error.
func TestParseHostile(t *testing.T) {
	base := "app = \"demoapp\"\n[cluster]\nmaster = \"node1\"\n[[cluster.node]]\nname = \"node1\"\n"
	tests := []struct{ name, text, want string }{
		{"inline tables 4000 deep", base + "x = " + strings.Repeat("{a=", 4000) + "1" + strings.Repeat("}", 4000) + "\n", "nested more than 16 deep"},
		{"arrays 4000 deep", base + "x = " + strings.Repeat("[", 4000) + strings.Repeat("]", 4000) + "\n", "nested more than 16 deep"},
		{"dotted keys 4000 deep", base + strings.Repeat("a.", 4000) + "a = 1\n", "nested more than 16 deep"},
		{"table header 4000 deep", base + "[" + strings.Repeat("a.", 4000) + "a]\n", "nested more than 16 deep"},
		{"unknown key on a long line", base + strings.Repeat(" ", 70000) + "colour = 1\n", "line 6: unknown key"},
	}
	many := base
	for i := 0; i < 5000; i++ {
		many += fmt.Sprintf("k%d = 1\n", i)
	}
	tests = append(tests, struct{ name, text, want string }{"5000 unknown keys", many, "and 4980 more unknown keys"})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.text))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse() = %.300v, want an error containing %q", err, tt.want)
			}
			if len(err.Error()) > 4096 {
				t.Errorf("the error is %d bytes long", len(err.Error()))
			}
		})
	}
	// Strings and comments may hold brackets and dots freely.
	ok := base + "# [[[[[[[[[[[[[[[[[[[[[[[[ ... .................................\n[commands]\nverify = \"echo '{{{{{{{{{{{{{{{{{{{{{{{{{{{' ................................\"\n[config]\nfile = \"/var/lib/x/config.json\"\n"
	if _, err := Parse([]byte(ok)); err != nil {
		t.Errorf("Parse(brackets in strings and comments) = %v", err)
	}
}

// FuzzParse: no input makes the parser panic, hang or return a config that fails its own
// validation.
func FuzzParse(f *testing.F) {
	for _, file := range []string{"../../docs/examples/demo.toml", "../../docs/examples/ganeti.toml"} {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("app = \"x\"\n[cluster]\nmaster = \"n\"\n[[cluster.node]]\nname = \"n\"\n[config]\nfile = \"/x\"\n"))
	f.Add([]byte("x = {a={a={a=[[[1]]]}}}\n"))
	f.Add([]byte("a.b.c.d = '''\n[[[\n'''\n# {{{\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err == nil {
			if verr := cfg.validate(); verr != nil {
				t.Fatalf("Parse accepted a config its validation refuses: %v", verr)
			}
		}
	})
}

// TestStageDefaults checks the bounds every profile gives a staged source and that [stage]
// overrides them.
func TestStageDefaults(t *testing.T) {
	for _, text := range []string{
		"app = \"demoapp\"\n[cluster]\nmaster = \"node1\"\n[[cluster.node]]\nname = \"node1\"\n[config]\nfile = \"/x\"\n",
		"profile = \"ganeti\"\n[cluster]\nmaster = \"node1\"\n",
	} {
		cfg, err := Parse([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		if s := cfg.Stage; s.MaxBytes != 4<<30 || s.MaxFiles != 200_000 || s.MaxDepth != 64 || len(s.AllowSetuid) != 0 {
			t.Errorf("profile %s: [stage] = %+v, want 4 GiB, 200,000 files, depth 64, nothing allowed", cfg.Profile, s)
		}
	}
	cfg, err := Parse([]byte("app = \"demoapp\"\n[cluster]\nmaster = \"node1\"\n[[cluster.node]]\nname = \"node1\"\n[config]\nfile = \"/x\"\n" +
		"[stage]\nmax_bytes = 1024\nallow_setuid = [\"usr/sbin/helper\"]\nallow_devices = [\"dev/*\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.Stage; s.MaxBytes != 1024 || s.MaxFiles != 200_000 || s.AllowSetuid[0] != "usr/sbin/helper" || s.AllowDevices[0] != "dev/*" {
		t.Errorf("[stage] = %+v, want max_bytes 1024 and the allow lists, the rest defaults", s)
	}
}

func TestMetricsTextfile(t *testing.T) {
	base := "app = \"demoapp\"\n[cluster]\nmaster = \"node1\"\n[[cluster.node]]\nname = \"node1\"\n[config]\nfile = \"/var/lib/demoapp/config.json\"\n"
	cfg, err := Parse([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Metrics.Textfile != "" {
		t.Errorf("Parse without [metrics]: textfile = %q, want unset (off)", cfg.Metrics.Textfile)
	}
	cfg, err = Parse([]byte(base + "[metrics]\ntextfile = \"/var/lib/prometheus/node-exporter/cutover.prom\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Metrics.Textfile != "/var/lib/prometheus/node-exporter/cutover.prom" {
		t.Errorf("Parse with [metrics] textfile: %q", cfg.Metrics.Textfile)
	}
}
