package demoapp

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
)

// migrations are the config migrations, shipped in the share tree of every version they lead up to.
//
//go:embed migrations/*.json
var migrations embed.FS

// The installation's fixed paths on a node.
const (
	libDir       = "/usr/lib/demoapp"
	shareDir     = "/usr/share/demoapp"
	etcDir       = "/etc/demoapp"
	stateDir     = "/var/lib/demoapp"
	configPath   = "/var/lib/demoapp/config.json"
	masterPath   = "/var/lib/demoapp/master"
	bootHookPath = "/etc/boot.d/demoapp"
	cutoverTOML  = "/etc/cutover/cutover.toml"
	program      = "/usr/lib/demoapp/default/usr/sbin/demoapp" // the live version's program
)

// bootHook starts the live version's daemon when the node boots.
const bootHook = `#!/bin/sh
# Starts the demoapp daemon of the live version (/etc/demoapp/lib) at boot.
` + program + ` ensure-dirs && exec ` + program + ` daemon start
`

// NodeAddr names one node of the demo cluster.
type NodeAddr struct {
	Name    string // host name, as in /etc/hosts
	Address string // IP address or host name the other nodes reach it at
}

// NodeSpec says what to install on one node.
type NodeSpec struct {
	Name     string     // this node
	Master   string     // the master's name
	Nodes    []NodeAddr // every node of the cluster, master included, in order
	Versions []string   // versions to install side by side (default: all of Versions)
	Live     string     // the version the links point to (default "1.0.0")
}

// Stage writes one node's complete demo installation under root, which the test cluster
// then copies into the node's /: the lib and share trees of each version in spec.Versions,
// the links /etc/demoapp/{lib,share} to the trees of spec.Live and the stable links
// /usr/{lib,share}/demoapp/default to them, /var/lib/demoapp/config.json at Live's schema
// (the same on every node), /var/lib/demoapp/master, the state directories, and the boot
// hook /etc/boot.d/demoapp. On the master it also writes /etc/cutover/cutover.toml
// ([CutoverConfig]); cutover itself, and its resume at boot, come with cutover's package. A
// bad spec is refused before anything is written.
func Stage(root string, bins *Binaries, spec NodeSpec) error {
	spec, err := checkSpec(bins, spec)
	if err != nil {
		return fmt.Errorf("stage %s: %w", spec.Name, err)
	}
	config, err := appConfig(spec.Live, spec.Master, spec.Nodes)
	if err != nil {
		return fmt.Errorf("stage %s: %w", spec.Name, err)
	}
	// root stands for the node's /: whatever mode it has would be copied onto / with it.
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("stage %s: %w", spec.Name, err)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		return fmt.Errorf("stage %s: %w", spec.Name, err)
	}
	t := tree{root: root}
	for _, v := range spec.Versions {
		t.version(bins, v)
	}
	t.dir(etcDir, 0o755)
	t.link(path.Join(etcDir, "lib"), path.Join(libDir, spec.Live))
	t.link(path.Join(etcDir, "share"), path.Join(shareDir, spec.Live))
	t.link(path.Join(libDir, "default"), path.Join(etcDir, "lib"))
	t.link(path.Join(shareDir, "default"), path.Join(etcDir, "share"))

	t.dir(stateDir, 0o755)
	t.file(configPath, config, 0o600)
	t.file(masterPath, []byte(spec.Master+"\n"), 0o644)
	for _, d := range []string{"queue", "queue/waiting", "queue/running", "queue/done"} {
		t.dir(path.Join(stateDir, d), 0o700)
	}
	t.dir("/var/log/demoapp", 0o750)
	t.dir(path.Dir(bootHookPath), 0o755)
	t.file(bootHookPath, []byte(bootHook), 0o755)

	if spec.Name == spec.Master {
		t.dir(path.Dir(cutoverTOML), 0o700)
		t.file(cutoverTOML, CutoverConfig(spec.Master, spec.Nodes), 0o600)
	}
	if t.err != nil {
		return fmt.Errorf("stage %s: %w", spec.Name, t.err)
	}
	return nil
}

// version writes the lib and share trees of version v: the program, VERSION, the migrations
// that lead up to it and its upgrade policy.
func (t *tree) version(bins *Binaries, v string) {
	t.dir(path.Join(libDir, v, "usr/sbin"), 0o755)
	t.copyFile(path.Join(libDir, v, "usr/sbin/demoapp"), bins.Paths[v], 0o755)
	t.dir(path.Join(shareDir, v), 0o755)
	t.file(path.Join(shareDir, v, "VERSION"), []byte(v+"\n"), 0o644)
	t.migrations(path.Join(shareDir, v, "cutover/migrations"), v)
	if p, ok := upgradePolicies[minorOf(v)]; ok {
		t.file(path.Join(shareDir, v, "cutover/upgrade-policy.json"), []byte(p), 0o644)
	}
}

// nameRE matches a node name: a host name of letters, digits, '-' and '.'.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]{0,62}[A-Za-z0-9])?$`)

// checkSpec validates spec against bins and fills in its defaults.
func checkSpec(bins *Binaries, spec NodeSpec) (NodeSpec, error) {
	if len(spec.Versions) == 0 {
		spec.Versions = Versions
	}
	if spec.Live == "" {
		spec.Live = Versions[0]
	}
	if len(spec.Nodes) == 0 {
		return spec, errors.New("no nodes given")
	}
	seen := map[string]bool{}
	for _, n := range spec.Nodes {
		if !nameRE.MatchString(n.Name) {
			return spec, fmt.Errorf("node name %q is not a host name", n.Name)
		}
		if seen[n.Name] {
			return spec, fmt.Errorf("node %s is listed twice", n.Name)
		}
		seen[n.Name] = true
		if net.ParseIP(n.Address) == nil && !nameRE.MatchString(n.Address) {
			return spec, fmt.Errorf("node %s: address %q is neither an IP address nor a host name", n.Name, n.Address)
		}
	}
	if !seen[spec.Name] {
		return spec, fmt.Errorf("node %q is not in the node list", spec.Name)
	}
	if !seen[spec.Master] {
		return spec, fmt.Errorf("master %q is not in the node list", spec.Master)
	}
	for i, v := range spec.Versions {
		if !slices.Contains(Versions, v) {
			return spec, fmt.Errorf("unknown version %q (demoapp has %v)", v, Versions)
		}
		if slices.Contains(spec.Versions[:i], v) {
			return spec, fmt.Errorf("version %s is listed twice", v)
		}
		if bins == nil || bins.Paths[v] == "" {
			return spec, fmt.Errorf("no binary built for version %s", v)
		}
	}
	if !slices.Contains(spec.Versions, spec.Live) {
		return spec, fmt.Errorf("live version %q is not among the installed versions %v", spec.Live, spec.Versions)
	}
	return spec, nil
}

// tree writes files under root, keeping the first error; paths are absolute node paths.
// Directories it creates get explicit modes, whatever the umask.
type tree struct {
	root string
	err  error
}

func (t *tree) real(p string) string { return filepath.Join(t.root, filepath.FromSlash(p)) }

// dir creates the directory p (missing parents get 0755) and sets its mode.
func (t *tree) dir(p string, mode os.FileMode) {
	if t.err != nil {
		return
	}
	if parent := path.Dir(p); parent != "/" {
		if _, err := os.Stat(t.real(parent)); err != nil {
			t.dir(parent, 0o755)
		}
	}
	if err := os.Mkdir(t.real(p), mode); err != nil && !errors.Is(err, fs.ErrExist) {
		t.err = err
		return
	}
	if err := os.Chmod(t.real(p), mode); err != nil {
		t.err = err
	}
}

// file writes data to p with mode; its directory must exist.
func (t *tree) file(p string, data []byte, mode os.FileMode) {
	if t.err != nil {
		return
	}
	if err := os.WriteFile(t.real(p), data, mode); err != nil {
		t.err = err
		return
	}
	if err := os.Chmod(t.real(p), mode); err != nil {
		t.err = err
	}
}

// copyFile copies the file src of the build host to p.
func (t *tree) copyFile(p, src string, mode os.FileMode) {
	if t.err != nil {
		return
	}
	in, err := os.Open(src)
	if err != nil {
		t.err = err
		return
	}
	defer in.Close()
	out, err := os.OpenFile(t.real(p), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		t.err = err
		return
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(t.real(p), mode)
	}
	if err != nil {
		t.err = fmt.Errorf("copy %s to %s: %w", src, p, err)
	}
}

// link makes p a symbolic link to target, replacing whatever was there.
func (t *tree) link(p, target string) {
	if t.err != nil {
		return
	}
	if err := os.Remove(t.real(p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.err = err
		return
	}
	if err := os.Symlink(target, t.real(p)); err != nil {
		t.err = err
	}
}

// migrations writes into dir every migration that leads up to version's minor; the oldest
// version gets none.
func (t *tree) migrations(dir, version string) {
	if t.err != nil {
		return
	}
	entries, err := fs.ReadDir(migrations, "migrations")
	if err != nil {
		t.err = err
		return
	}
	for _, ent := range entries {
		data, err := migrations.ReadFile("migrations/" + ent.Name())
		if err != nil {
			t.err = err
			return
		}
		var m struct{ To string }
		if err := json.Unmarshal(data, &m); err != nil {
			t.err = fmt.Errorf("migration %s: %w", ent.Name(), err)
			return
		}
		if !minorAtMost(m.To, minorOf(version)) {
			continue
		}
		t.dir(dir, 0o755)
		t.file(path.Join(dir, ent.Name()), data, 0o644)
	}
}

// upgradePolicies are the upgrade-policy.json files the versions ship, by minor: 1.2 runs
// beside 1.1, so a rolling run between them is allowed.
var upgradePolicies = map[string]string{"1.2": `{"rolling_from": ">= 1.1, < 1.2"}` + "\n"}

// minorAtMost reports whether the MAJOR.MINOR a is not newer than b.
func minorAtMost(a, b string) bool {
	var amaj, amin, bmaj, bmin int
	if _, err := fmt.Sscanf(a, "%d.%d", &amaj, &amin); err != nil {
		return false
	}
	if _, err := fmt.Sscanf(b, "%d.%d", &bmaj, &bmin); err != nil {
		return false
	}
	return amaj < bmaj || amaj == bmaj && amin <= bmin
}
