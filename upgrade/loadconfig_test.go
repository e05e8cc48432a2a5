package upgrade

import (
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestLoadConfigAsksThisHost checks what LoadConfig fills in from commands run on this host:
// the master, the host-key alias and the uids of known_hosts_owners.
func TestLoadConfigAsksThisHost(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Skipf("current user: %v", err)
	}
	uid, _ := strconv.ParseUint(me.Uid, 10, 32)
	tests := []struct {
		name, cluster, ssh string
		master, alias      string
		owners             []uint32
		wantErr            string
	}{
		{name: "master from its command", cluster: `master_command = "echo node7.example.org"`, master: "node7.example.org"},
		{name: "a set master wins", cluster: "master = \"node1\"\nmaster_command = \"echo node7\"", master: "node1"},
		{name: "alias", cluster: `master = "node1"`, ssh: `host_key_alias_command = "printf 'cluster.example.org\\n'"`, master: "node1", alias: "cluster.example.org"},
		{name: "owners", cluster: `master = "node1"`, ssh: `known_hosts_owners = ["` + me.Username + `"]`, master: "node1", owners: []uint32{uint32(uid)}},
		{name: "master command fails", cluster: `master_command = "echo no master >&2; exit 3"`, wantErr: "no master"},
		{name: "master command prints no host name", cluster: `master_command = "echo 'a b'"`, wantErr: "not a host name"},
		{name: "unknown owner", cluster: `master = "node1"`, ssh: `known_hosts_owners = ["no-such-user-cutover"]`, wantErr: "no-such-user-cutover"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := "app = \"demo\"\n[cluster]\n" + tt.cluster + "\n[[cluster.node]]\nname = \"node1\"\n[ssh]\n" + tt.ssh +
				"\n[config]\nfile = \"/var/lib/demo/config.json\"\n"
			file := filepath.Join(t.TempDir(), "cutover.toml")
			if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := LoadConfig(file)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !IsBadInput(err) {
					t.Fatalf("LoadConfig = %v, want bad input naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadConfig: %v\n%s", err, text)
			}
			if cfg.Cluster.Master != tt.master || cfg.SSH.HostKeyAlias != tt.alias || !slices.Equal(cfg.SSH.KnownHostsOwnerIDs, tt.owners) {
				t.Errorf("master %q, alias %q, owners %v; want %q, %q, %v", cfg.Cluster.Master, cfg.SSH.HostKeyAlias, cfg.SSH.KnownHostsOwnerIDs, tt.master, tt.alias, tt.owners)
			}
		})
	}
}
