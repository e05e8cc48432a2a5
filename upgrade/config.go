package upgrade

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// DefaultConfigPath is where cutover looks for its configuration unless told otherwise.
const DefaultConfigPath = "/etc/cutover/cutover.toml"

// Config is a parsed and validated cutover.toml: the cluster, the application and its policy.
type Config struct {
	App         string         `toml:"app"`
	Profile     string         `toml:"profile"`
	VersionDirs string         `toml:"version_dirs"`
	Paths       PathsConfig    `toml:"paths"`
	Cluster     ClusterConfig  `toml:"cluster"`
	SSH         SSHConfig      `toml:"ssh"`
	Commands    CommandsConfig `toml:"commands"`
	Config      AppConfig      `toml:"config"`
	Policy      PolicyConfig   `toml:"policy"`

	// File is the path the configuration was read from.
	File string `toml:"-"`
}

// PathsConfig are the installation directories, named as ./configure names them.
type PathsConfig struct {
	LibDir        string `toml:"libdir"`
	DataDir       string `toml:"datadir"`
	SysconfDir    string `toml:"sysconfdir"`
	LocalstateDir string `toml:"localstatedir"`
	StateDir      string `toml:"state_dir"`
}

// ClusterConfig says which nodes form the cluster and which of them is the master.
type ClusterConfig struct {
	Master        string       `toml:"master"`
	NodesCommand  string       `toml:"nodes_command"`
	MasterCommand string       `toml:"master_command"`
	Nodes         []NodeConfig `toml:"node"`
}

// NodeConfig is one [[cluster.node]] entry.
type NodeConfig struct {
	Name    string `toml:"name"`
	Address string `toml:"address"`
	Port    int    `toml:"port"`
	Offline bool   `toml:"offline"`
}

// SSHConfig says how cutover reaches the other nodes.
type SSHConfig struct {
	User           string   `toml:"user"`
	IdentityFiles  []string `toml:"identity_files"`
	KnownHosts     []string `toml:"known_hosts"`
	ConnectTimeout Duration `toml:"connect_timeout"`
	CommandTimeout Duration `toml:"command_timeout"`
	Parallel       int      `toml:"parallel"`
}

// CommandsConfig are the application's own commands, run with sh -c on a node. The
// placeholders {from}, {to} and {node} are replaced by shell-quoted values.
type CommandsConfig struct {
	DaemonsStop        string `toml:"daemons_stop"`
	DaemonsStart       string `toml:"daemons_start"`
	QueueDrain         string `toml:"queue_drain"`
	QueueUndrain       string `toml:"queue_undrain"`
	QueueDrained       string `toml:"queue_drained"`
	QueueBusy          string `toml:"queue_busy"`
	ReconcilerPause    string `toml:"reconciler_pause"`
	ReconcilerContinue string `toml:"reconciler_continue"`
	ReconcilerPaused   string `toml:"reconciler_paused"`
	EnsureDirs         string `toml:"ensure_dirs"`
	RedistConf         string `toml:"redist_conf"`
	PostUpgrade        string `toml:"post_upgrade"`
	Verify             string `toml:"verify"`
}

// AppConfig describes the application's own configuration file and how it is migrated.
type AppConfig struct {
	File             string   `toml:"file"`
	VersionKey       string   `toml:"version_key"`
	VersionEncoding  string   `toml:"version_encoding"`
	Migrate          string   `toml:"migrate"`
	UpgradeCommand   string   `toml:"upgrade_command"`
	DowngradeCommand string   `toml:"downgrade_command"`
	Redistribute     []string `toml:"redistribute"`
}

// PolicyConfig limits which versions a cluster may move to.
type PolicyConfig struct {
	AllowMinorJump bool     `toml:"allow_minor_jump"`
	Downgrade      string   `toml:"downgrade"`
	DrainTimeout   Duration `toml:"drain_timeout"`
	BackupKeep     int      `toml:"backup_keep"`
}

// Duration is a time.Duration written in a config as a string such as "10s" or "36h".
type Duration struct{ time.Duration }

// UnmarshalText parses a duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q", b)
	}
	if v < 0 {
		return fmt.Errorf("negative duration %q", b)
	}
	d.Duration = v
	return nil
}

// MarshalText formats a duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// profiles supply a default for every key; a config file overrides any of them.
var profiles = map[string]func() Config{
	"generic": genericProfile,
	"ganeti":  ganetiProfile,
}

func basePaths() PathsConfig {
	return PathsConfig{LibDir: "/usr/lib", DataDir: "/usr/share", SysconfDir: "/etc", LocalstateDir: "/var", StateDir: "/var/lib/cutover"}
}

func baseSSH() SSHConfig {
	return SSHConfig{
		User:           "root",
		IdentityFiles:  []string{"/root/.ssh/id_ed25519"},
		KnownHosts:     []string{"/root/.ssh/known_hosts", "/etc/ssh/ssh_known_hosts"},
		ConnectTimeout: Duration{10 * time.Second},
		CommandTimeout: Duration{10 * time.Minute},
		Parallel:       32,
	}
}

func basePolicy() PolicyConfig {
	return PolicyConfig{AllowMinorJump: true, Downgrade: "previous-minor", DrainTimeout: Duration{36 * time.Hour}, BackupKeep: 5}
}

func genericProfile() Config {
	return Config{
		Profile:     "generic",
		VersionDirs: "full",
		Paths:       basePaths(),
		SSH:         baseSSH(),
		Config:      AppConfig{VersionKey: "/version", VersionEncoding: "semver", Migrate: "builtin"},
		Policy:      basePolicy(),
	}
}

// ganetiNodes lists a Ganeti cluster's nodes from its ssconf files: name, primary address,
// and "offline" for the nodes Ganeti marks offline.
const ganetiNodes = `off=" $(cat /var/lib/ganeti/ssconf_offline_nodes 2>/dev/null | tr '\n' ' ') "; ` +
	`while read -r n ip; do case "$off" in *" $n "*) echo "$n $ip offline";; *) echo "$n $ip";; esac; done < /var/lib/ganeti/ssconf_node_primary_ips`

// ganetiProfile holds the commands and paths of a real Ganeti cluster.
func ganetiProfile() Config {
	const daemonUtil = "/usr/lib/ganeti/daemon-util"
	return Config{
		App:         "ganeti",
		Profile:     "ganeti",
		VersionDirs: "minor",
		Paths:       basePaths(),
		Cluster: ClusterConfig{
			NodesCommand:  ganetiNodes,
			MasterCommand: "cat /var/lib/ganeti/ssconf_master_node",
		},
		SSH: baseSSH(),
		Commands: CommandsConfig{
			DaemonsStop:        daemonUtil + " stop-all",
			DaemonsStart:       daemonUtil + " start-all",
			QueueDrain:         "gnt-cluster queue drain",
			QueueUndrain:       "gnt-cluster queue undrain",
			QueueDrained:       "gnt-cluster queue info | grep -q 'drain flag is set'",
			QueueBusy:          "gnt-job list --no-headers --running --pending -o id | wc -l",
			ReconcilerPause:    "gnt-cluster watcher pause 3600",
			ReconcilerContinue: "gnt-cluster watcher continue",
			ReconcilerPaused:   "gnt-cluster watcher info | grep -q 'paused until'",
			EnsureDirs:         "/usr/lib/ganeti/ensure-dirs",
			RedistConf:         "gnt-cluster redist-conf",
			PostUpgrade:        "/usr/lib/ganeti/tools/post-upgrade --from {from}",
			Verify:             "gnt-cluster verify",
		},
		Config: AppConfig{
			File:             "/var/lib/ganeti/config.data",
			VersionKey:       "/version",
			VersionEncoding:  "ganeti",
			Migrate:          "exec",
			UpgradeCommand:   "/usr/lib/ganeti/tools/cfgupgrade --verbose --force",
			DowngradeCommand: "/usr/lib/ganeti/tools/cfgupgrade --downgrade --verbose --force",
			Redistribute:     []string{"/var/lib/ganeti/config.data"},
		},
		Policy: basePolicy(),
	}
}

// LoadConfig reads, defaults and validates the configuration at file. Errors name the file,
// and unknown keys are refused with their line number.
func LoadConfig(file string) (*Config, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, badInput(fmt.Errorf("read config: %w", err))
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, badInput(fmt.Errorf("config %s: %w", file, err))
	}
	cfg.File = file
	return cfg, nil
}

// ParseConfig parses and validates configuration text.
func ParseConfig(data []byte) (*Config, error) {
	var head struct {
		Profile string `toml:"profile"`
	}
	if _, err := toml.Decode(string(data), &head); err != nil {
		return nil, tomlError(err)
	}
	if head.Profile == "" {
		head.Profile = "generic"
	}
	profile, ok := profiles[head.Profile]
	if !ok {
		return nil, fmt.Errorf("unknown profile %q (known: generic, ganeti)", head.Profile)
	}
	cfg := profile()
	md, err := toml.Decode(string(data), &cfg)
	if err != nil {
		return nil, tomlError(err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		var errs []error
		for _, k := range und {
			errs = append(errs, fmt.Errorf("line %d: unknown key %q", keyLine(data, k), k.String()))
		}
		return nil, errors.Join(errs...)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

func tomlError(err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("line %d: %s", pe.Position.Line, pe.Message)
	}
	return err
}

// keyLine finds the line of a key the decoder did not know, for the error message.
func keyLine(data []byte, key toml.Key) int {
	want := key[len(key)-1]
	table := strings.Join(key[:len(key)-1], ".")
	cur := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			cur = strings.Trim(line, "[] ")
			if cur == strings.Join(key, ".") {
				return n
			}
			continue
		}
		name, _, ok := strings.Cut(line, "=")
		if ok && strings.Trim(strings.TrimSpace(name), `"'`) == want && cur == table {
			return n
		}
	}
	return 0
}

var (
	appName  = regexp.MustCompile(`^[a-z0-9][a-z0-9._+-]*$`)
	hostName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)
	jsonPtr  = regexp.MustCompile(`^(/[^/]*)+$`)
)

func (c *Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.App == "" {
		bad("app is required")
	} else if !appName.MatchString(c.App) {
		bad("app %q: only lower-case letters, digits and . _ + - are allowed", c.App)
	}
	if c.VersionDirs != "full" && c.VersionDirs != "minor" {
		bad("version_dirs %q: must be \"full\" or \"minor\"", c.VersionDirs)
	}
	for name, p := range map[string]string{
		"paths.libdir": c.Paths.LibDir, "paths.datadir": c.Paths.DataDir, "paths.sysconfdir": c.Paths.SysconfDir,
		"paths.localstatedir": c.Paths.LocalstateDir, "paths.state_dir": c.Paths.StateDir,
	} {
		if !cleanAbs(p) {
			bad("%s %q: must be a clean absolute path", name, p)
		}
	}
	if c.Cluster.Master == "" {
		bad("cluster.master is required")
	} else if !hostName.MatchString(c.Cluster.Master) {
		bad("cluster.master %q is not a host name", c.Cluster.Master)
	}
	if c.Cluster.NodesCommand == "" && len(c.Cluster.Nodes) == 0 {
		bad("cluster: no nodes: add [[cluster.node]] entries or set nodes_command")
	}
	if c.SSH.User == "" {
		bad("ssh.user is required")
	}
	if c.SSH.Parallel < 1 {
		bad("ssh.parallel %d: must be at least 1", c.SSH.Parallel)
	}
	if c.SSH.ConnectTimeout.Duration <= 0 || c.SSH.CommandTimeout.Duration <= 0 {
		bad("ssh.connect_timeout and ssh.command_timeout must be positive")
	}
	if !cleanAbs(c.Config.File) {
		bad("config.file %q: must be a clean absolute path", c.Config.File)
	}
	if !jsonPtr.MatchString(c.Config.VersionKey) {
		bad("config.version_key %q: must be a JSON Pointer such as \"/version\"", c.Config.VersionKey)
	}
	if c.Config.VersionEncoding != "semver" && c.Config.VersionEncoding != "ganeti" {
		bad("config.version_encoding %q: must be \"semver\" or \"ganeti\"", c.Config.VersionEncoding)
	}
	switch c.Config.Migrate {
	case "builtin":
	case "exec":
		if c.Config.UpgradeCommand == "" || c.Config.DowngradeCommand == "" {
			bad("config.migrate = \"exec\" needs upgrade_command and downgrade_command")
		}
	default:
		bad("config.migrate %q: must be \"builtin\" or \"exec\"", c.Config.Migrate)
	}
	for _, f := range c.Config.Redistribute {
		if !cleanAbs(f) {
			bad("config.redistribute: %q must be a clean absolute path", f)
		}
	}
	if c.Policy.Downgrade != "previous-minor" && c.Policy.Downgrade != "never" {
		bad("policy.downgrade %q: must be \"previous-minor\" or \"never\"", c.Policy.Downgrade)
	}
	if c.Policy.BackupKeep < 1 {
		bad("policy.backup_keep %d: must be at least 1", c.Policy.BackupKeep)
	}
	if c.Policy.DrainTimeout.Duration <= 0 {
		bad("policy.drain_timeout must be positive")
	}
	if c.Commands.QueueDrain != "" && c.Commands.QueueBusy == "" {
		bad("commands.queue_drain needs commands.queue_busy to know when the queue is empty")
	}
	return errors.Join(errs...)
}

func cleanAbs(p string) bool {
	return p != "" && path.IsAbs(p) && path.Clean(p) == p && !strings.ContainsAny(p, "\x00\n")
}
