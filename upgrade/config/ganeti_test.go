package config

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestGanetiProfileFollowsPaths checks that a Ganeti built with other directories
// (--localstatedir=/srv/var --libdir=/opt/lib --datadir=/opt/share) gets every path of the
// profile from [paths] alone, and that a key the file sets still wins.
func TestGanetiProfileFollowsPaths(t *testing.T) {
	const head = "profile = \"ganeti\"\n[cluster]\nmaster = \"node1\"\n[paths]\nlocalstatedir = \"/srv/var\"\nlibdir = \"/opt/lib\"\ndatadir = \"/opt/share\"\n"
	cfg, err := Parse([]byte(head))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		key       string
		got, want string
	}{
		{"paths.backup_exclude", strings.Join(cfg.Paths.BackupExclude, " "), "/srv/var/lib/ganeti/queue/archive /srv/var/lib/ganeti/export"},
		{"cluster.master_command", cfg.Cluster.MasterCommand, "cat /srv/var/lib/ganeti/ssconf_master_node"},
		{"ssh.known_hosts", strings.Join(cfg.SSH.KnownHosts, " "), "/srv/var/lib/ganeti/known_hosts"},
		{"ssh.host_key_alias_command", cfg.SSH.HostKeyAliasCommand, "cat /srv/var/lib/ganeti/ssconf_cluster_name"},
		{"config.file", cfg.Config.File, "/srv/var/lib/ganeti/config.data"},
		{"config.redistribute", strings.Join(cfg.Config.Redistribute, " "), "/srv/var/lib/ganeti/config.data"},
		{"commands.daemons_stop", cfg.Commands.DaemonsStop, "/opt/lib/ganeti/daemon-util stop-all"},
		{"commands.ensure_dirs", cfg.Commands.EnsureDirs, "/opt/lib/ganeti/ensure-dirs"},
		{"commands.post_upgrade", cfg.Commands.PostUpgrade, "/opt/lib/ganeti/tools/post-upgrade {from}"},
		{"config.upgrade_command", cfg.Config.UpgradeCommand, "/opt/lib/ganeti/tools/cfgupgrade --verbose --force"},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.key, tt.got, tt.want)
		}
	}
	for _, want := range []string{"< /srv/var/lib/ganeti/ssconf_node_primary_ips", "cat /srv/var/lib/ganeti/ssconf_offline_nodes"} {
		if !strings.Contains(cfg.Cluster.NodesCommand, want) {
			t.Errorf("cluster.nodes_command = %q, want it to contain %q", cfg.Cluster.NodesCommand, want)
		}
	}
	if !strings.Contains(cfg.Commands.DaemonsStart, `"/srv/var/run/ganeti/$1.pid"`) || !strings.Contains(cfg.Commands.DaemonsStart, "/opt/lib/ganeti/daemon-util start") {
		t.Errorf("commands.daemons_start = %q, want the pidfiles and daemon-util of the paths", cfg.Commands.DaemonsStart)
	}
	if !strings.Contains(cfg.Commands.LiveVersion, "/opt/share/ganeti/default/ganeti/_constants.py") {
		t.Errorf("commands.live_version = %q, want the datadir's _constants.py", cfg.Commands.LiveVersion)
	}
	// Nothing of Debian's default directories is left anywhere in the config.
	all := fmt.Sprintf("%+v", *cfg)
	for _, debian := range []string{"/var/lib/ganeti", "/var/run/ganeti", "/usr/lib/ganeti", "/usr/share/ganeti"} {
		if strings.Count(all, debian) != strings.Count(all, "/srv"+debian) {
			t.Errorf("the config still names %s: %s", debian, all)
		}
	}

	// A key the file sets wins over the derived one.
	cfg, err = Parse([]byte(head + "backup_exclude = [\"/srv/var/lib/ganeti/export\"]\n[ssh]\nknown_hosts = [\"/root/.ssh/known_hosts\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Paths.BackupExclude, []string{"/srv/var/lib/ganeti/export"}) || !slices.Equal(cfg.SSH.KnownHosts, []string{"/root/.ssh/known_hosts"}) {
		t.Errorf("explicit keys = %q, %q; want the file's", cfg.Paths.BackupExclude, cfg.SSH.KnownHosts)
	}

	// Debian's paths give Debian's Ganeti.
	cfg, err = Parse([]byte("profile = \"ganeti\"\n[cluster]\nmaster = \"node1\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Paths.BackupExclude, []string{"/var/lib/ganeti/queue/archive", "/var/lib/ganeti/export"}) || cfg.Config.File != "/var/lib/ganeti/config.data" {
		t.Errorf("Debian's Ganeti: backup_exclude %q, config.file %q", cfg.Paths.BackupExclude, cfg.Config.File)
	}
}
