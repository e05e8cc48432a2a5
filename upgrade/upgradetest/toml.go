package upgradetest

import (
	"fmt"
	"strings"
)

// TOML is a cutover.toml for a cluster whose master is this host, reached at 127.0.0.1, and
// whose paths lie under a root directory of the test machine: the one template of the tests
// that run cutover from a config file. Render writes it.
type TOML struct {
	// App is the application's name; "app" when empty.
	App string
	// Root is the directory the paths lie under: libdir is Root/usr/lib, the state directory
	// Root/state, the application's config Root/var/lib/APP/config.json.
	Root string
	// Master is the master's node name.
	Master string
	// Nodes are the nodes beside the master, each with its address and port.
	Nodes []TOMLNode
	// SSH, when set, is the [ssh] table.
	SSH *TOMLSSH
	// Commands are the [commands] entries in order, each command quoted as a TOML string.
	Commands [][2]string
	// Tables is TOML written as it is after the commands: more [commands] keys, more tables.
	Tables string
	// NoRedistribute leaves the application's config out of [config] redistribute.
	NoRedistribute bool
	// ConfigKeys is TOML written as it is at the end of [config].
	ConfigKeys string
}

// TOMLNode is a node of a TOML beside the master.
type TOMLNode struct {
	Name, Address string
	Port          int
}

// TOMLSSH is the [ssh] table of a TOML.
type TOMLSSH struct {
	User, IdentityFile, KnownHosts string
	Parallel                       int
}

// Render writes the cutover.toml.
func (c TOML) Render() string {
	app := c.App
	if app == "" {
		app = "app"
	}
	var b strings.Builder
	fmt.Fprintf(&b, `app = %[3]q
version_dirs = "full"
[paths]
libdir = "%[1]s/usr/lib"
datadir = "%[1]s/usr/share"
sysconfdir = "%[1]s/etc"
localstatedir = "%[1]s/var"
state_dir = "%[1]s/state"
[cluster]
master = %[2]q
[[cluster.node]]
name = %[2]q
address = "127.0.0.1"
`, c.Root, c.Master, app)
	for _, n := range c.Nodes {
		fmt.Fprintf(&b, "[[cluster.node]]\nname = %q\naddress = %q\nport = %d\n", n.Name, n.Address, n.Port)
	}
	if s := c.SSH; s != nil {
		fmt.Fprintf(&b, "[ssh]\nuser = %q\nidentity_files = [%q]\nknown_hosts = [%q]\nparallel = %d\n", s.User, s.IdentityFile, s.KnownHosts, s.Parallel)
	}
	if len(c.Commands) > 0 {
		b.WriteString("[commands]\n")
	}
	for _, cmd := range c.Commands {
		fmt.Fprintf(&b, "%s = %q\n", cmd[0], cmd[1])
	}
	b.WriteString(c.Tables)
	file := fmt.Sprintf("%s/var/lib/%s/config.json", c.Root, app)
	fmt.Fprintf(&b, "[config]\nfile = %q\n", file)
	if !c.NoRedistribute {
		fmt.Fprintf(&b, "redistribute = [%q]\n", file)
	}
	b.WriteString(c.ConfigKeys)
	return b.String()
}

// TOML is the template of a cutover.toml for w, a Rooted World of this host alone: its
// application, its master, and the master's directory as the root of the paths.
func (w *World) TOML() TOML {
	return TOML{App: w.App, Root: w.rooted, Master: w.Master}
}
