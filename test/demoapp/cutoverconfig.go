package demoapp

import (
	"fmt"
	"strings"
)

// CutoverConfig returns the cutover.toml text for a demo cluster whose master is master and
// whose nodes are nodes, in order (also what Stage writes on the master). The names and
// addresses are expected to be valid, as Stage checks them.
func CutoverConfig(master string, nodes []NodeAddr) []byte {
	var b strings.Builder
	b.WriteString(`# cutover's configuration for the demo cluster: the demo application "demoapp", whose
# versions (1.0.0, 1.1.0, 1.2.0) are installed side by side on every node. The test cluster
# writes it on the master as /etc/cutover/cutover.toml.

app = "demoapp"          # the trees are /usr/{lib,share}/demoapp/<VERSION>, the links /etc/demoapp/{lib,share}
profile = "generic"      # defaults for an application that is not Ganeti; the keys below override them
version_dirs = "full"    # a version's trees are named by its full version (1.1.0), not MAJOR.MINOR

# Where the application is installed (as its ./configure would say), and state_dir, where
# cutover keeps its journal, intent file, lock, logs and backups.
[paths]
libdir = "/usr/lib"
datadir = "/usr/share"
sysconfdir = "/etc"
localstatedir = "/var"
state_dir = "/var/lib/cutover"

# The nodes. cutover runs on the master and reaches the others over SSH. master_command
# prints the master's name on any node: after a reboot, 'cutover upgrade --resume' goes on
# only if more than half of the nodes name this host.
[cluster]
`)
	fmt.Fprintf(&b, "master = %s\n", tomlString(master))
	b.WriteString(`master_command = "cat /var/lib/demoapp/master"
`)
	for _, n := range nodes {
		fmt.Fprintf(&b, "\n[[cluster.node]]\nname = %s\naddress = %s\n", tomlString(n.Name), tomlString(n.Address))
	}
	b.WriteString(`
# SSH as root with the master's key. Every host key must already be in known_hosts:
# cutover never trusts a key on first use.
[ssh]
user = "root"
identity_files = ["/root/.ssh/id_ed25519"]
known_hosts = ["/root/.ssh/known_hosts"]
connect_timeout = "5s"
command_timeout = "2m"
parallel = 32            # nodes worked on at once

# The application's own commands, run with sh -c on the nodes. They go through the stable
# entry point /usr/lib/demoapp/default, so each runs the program of the live version: before
# the switch the old one, after it the new one. {from} is the version the run started from.
[commands]
daemons_stop = "/usr/lib/demoapp/default/usr/sbin/demoapp daemon stop"
daemons_start = "/usr/lib/demoapp/default/usr/sbin/demoapp daemon start"
queue_drain = "/usr/lib/demoapp/default/usr/sbin/demoapp queue drain"
queue_undrain = "/usr/lib/demoapp/default/usr/sbin/demoapp queue undrain"
queue_drained = "/usr/lib/demoapp/default/usr/sbin/demoapp queue drained"
queue_busy = "/usr/lib/demoapp/default/usr/sbin/demoapp queue busy"
reconciler_pause = "/usr/lib/demoapp/default/usr/sbin/demoapp watcher pause"
reconciler_continue = "/usr/lib/demoapp/default/usr/sbin/demoapp watcher continue"
ensure_dirs = "/usr/lib/demoapp/default/usr/sbin/demoapp ensure-dirs"
redist_conf = ""         # empty: cutover copies [config].redistribute to the nodes itself
post_upgrade = "/usr/lib/demoapp/default/usr/sbin/demoapp post-upgrade --from {from}"
verify = "/usr/lib/demoapp/default/usr/sbin/demoapp verify"

# Which processes are demoapp's daemons: root's, named by the daemon's pid file or running
# from demoapp's trees. cutover signals only those, and only when they run another version.
[daemons]
users = ["root"]
pidfiles = ["/run/demoapp/*.pid"]

# demoapp's config is JSON with a semantic version at /version. Its schema changes between
# minor versions; the migrations ship in the newer version's tree
# (/usr/share/demoapp/<VERSION>/cutover/migrations/*.json) and cutover applies them itself.
[config]
file = "/var/lib/demoapp/config.json"
version_key = "/version"
version_encoding = "semver"
migrate = "builtin"
redistribute = ["/var/lib/demoapp/config.json"]

# Which switches are allowed: up to any higher minor, down only to the previous minor.
[policy]
allow_minor_jump = true
downgrade = "previous-minor"
drain_timeout = "10m"    # how long to wait for running and waiting jobs to finish
backup_keep = 5
`)
	return []byte(b.String())
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
