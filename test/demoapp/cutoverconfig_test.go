package demoapp

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/BurntSushi/toml"
)

// demoTOML is the documented copy of the default demo cluster's cutover config.
var demoTOML = filepath.Join("..", "..", "docs", "examples", "demo.toml")

// TestDemoTOML keeps docs/examples/demo.toml equal to what Stage writes on the master of
// the default demo cluster (go test -update rewrites it).
func TestDemoTOML(t *testing.T) {
	t.Parallel()
	got := CutoverConfig("node1", demoNodes)
	if *update {
		if err := os.WriteFile(demoTOML, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(demoTOML)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("CutoverConfig(node1..node4) differs from %s; run go test ./test/demoapp -update after checking the change", demoTOML)
	}
}

// cutoverFile is cutover.toml's format: decoding into it with no key left over proves the
// demo config uses only cutover's keys.
type cutoverFile struct {
	App         string `toml:"app"`
	Profile     string `toml:"profile"`
	VersionDirs string `toml:"version_dirs"`
	Paths       struct {
		Libdir, Datadir, Sysconfdir, Localstatedir string
		StateDir                                   string `toml:"state_dir"`
	} `toml:"paths"`
	Cluster struct {
		Master        string `toml:"master"`
		MasterCommand string `toml:"master_command"`
		Node          []struct {
			Name    string `toml:"name"`
			Address string `toml:"address"`
		} `toml:"node"`
	} `toml:"cluster"`
	SSH struct {
		User           string   `toml:"user"`
		IdentityFiles  []string `toml:"identity_files"`
		KnownHosts     []string `toml:"known_hosts"`
		ConnectTimeout string   `toml:"connect_timeout"`
		CommandTimeout string   `toml:"command_timeout"`
		Parallel       int      `toml:"parallel"`
	} `toml:"ssh"`
	Commands map[string]string `toml:"commands"`
	Config   struct {
		File            string   `toml:"file"`
		VersionKey      string   `toml:"version_key"`
		VersionEncoding string   `toml:"version_encoding"`
		Migrate         string   `toml:"migrate"`
		Redistribute    []string `toml:"redistribute"`
	} `toml:"config"`
	Policy struct {
		AllowMinorJump bool   `toml:"allow_minor_jump"`
		Downgrade      string `toml:"downgrade"`
		DrainTimeout   string `toml:"drain_timeout"`
		BackupKeep     int    `toml:"backup_keep"`
	} `toml:"policy"`
	Daemons struct {
		Users    []string `toml:"users"`
		PidFiles []string `toml:"pidfiles"`
	} `toml:"daemons"`
}

func TestCutoverConfigContent(t *testing.T) {
	t.Parallel()
	nodes := []NodeAddr{{"node1", "10.77.1.11"}, {"node2", "10.77.1.12"}, {"odd\"name", "10.77.1.13"}}
	var c cutoverFile
	md, err := toml.Decode(string(CutoverConfig("node2", nodes)), &c)
	if err != nil {
		t.Fatalf("CutoverConfig is not valid TOML: %v", err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		t.Errorf("keys that are not cutover's: %v", und)
	}
	if len(c.Daemons.Users) != 1 || c.Daemons.Users[0] != "root" || len(c.Daemons.PidFiles) != 1 || c.Daemons.PidFiles[0] != "/run/demoapp/*.pid" {
		t.Errorf("daemons = %+v, want root's, named by /run/demoapp/*.pid", c.Daemons)
	}
	if c.App != "demoapp" || c.Profile != "generic" || c.VersionDirs != "full" {
		t.Errorf("app, profile, version_dirs = %q, %q, %q", c.App, c.Profile, c.VersionDirs)
	}
	if c.Paths.Libdir != "/usr/lib" || c.Paths.Datadir != "/usr/share" || c.Paths.Sysconfdir != "/etc" ||
		c.Paths.Localstatedir != "/var" || c.Paths.StateDir != "/var/lib/cutover" {
		t.Errorf("paths = %+v", c.Paths)
	}
	if c.Cluster.Master != "node2" || c.Cluster.MasterCommand != "cat /var/lib/demoapp/master" {
		t.Errorf("cluster master %q, master_command %q", c.Cluster.Master, c.Cluster.MasterCommand)
	}
	if len(c.Cluster.Node) != len(nodes) {
		t.Fatalf("%d [[cluster.node]], want %d", len(c.Cluster.Node), len(nodes))
	}
	for i, n := range nodes {
		if c.Cluster.Node[i].Name != n.Name || c.Cluster.Node[i].Address != n.Address {
			t.Errorf("node %d = %+v, want %+v", i, c.Cluster.Node[i], n)
		}
	}
	if c.SSH.User != "root" || !slices.Equal(c.SSH.IdentityFiles, []string{"/root/.ssh/id_ed25519"}) ||
		!slices.Equal(c.SSH.KnownHosts, []string{"/root/.ssh/known_hosts"}) || c.SSH.ConnectTimeout != "5s" ||
		c.SSH.CommandTimeout != "2m" || c.SSH.Parallel != 32 {
		t.Errorf("ssh = %+v", c.SSH)
	}
	const d = "/usr/lib/demoapp/default/usr/sbin/demoapp"
	wantCommands := map[string]string{
		"daemons_stop":        d + " daemon stop",
		"daemons_start":       d + " daemon start",
		"queue_drain":         d + " queue drain",
		"queue_undrain":       d + " queue undrain",
		"queue_drained":       d + " queue drained",
		"queue_busy":          d + " queue busy",
		"reconciler_pause":    d + " watcher pause",
		"reconciler_continue": d + " watcher continue",
		"ensure_dirs":         d + " ensure-dirs",
		"redist_conf":         "",
		"post_upgrade":        d + " post-upgrade --from {from}",
		"verify":              d + " verify",
	}
	if len(c.Commands) != len(wantCommands) {
		t.Errorf("commands = %v, want %v", c.Commands, wantCommands)
	}
	for k, want := range wantCommands {
		if got, ok := c.Commands[k]; !ok || got != want {
			t.Errorf("commands.%s = %q (set %v), want %q", k, got, ok, want)
		}
	}
	if c.Config.File != "/var/lib/demoapp/config.json" || c.Config.VersionKey != "/version" ||
		c.Config.VersionEncoding != "semver" || c.Config.Migrate != "builtin" ||
		!slices.Equal(c.Config.Redistribute, []string{"/var/lib/demoapp/config.json"}) {
		t.Errorf("config = %+v", c.Config)
	}
	if !c.Policy.AllowMinorJump || c.Policy.Downgrade != "previous-minor" || c.Policy.DrainTimeout != "10m" || c.Policy.BackupKeep != 5 {
		t.Errorf("policy = %+v", c.Policy)
	}
}
