// Package config reads cutover.toml: the cluster, the application, its commands and its policy.
// A profile (one file each: generic.go, ganeti.go) supplies a default for every key, and the
// file overrides any of them; unknown keys are refused with their line, their table and the
// key most likely meant.
package config

import (
	"errors"
	"fmt"
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
	Strategy    StrategyConfig `toml:"strategy"`
	Stage       StageConfig    `toml:"stage"`
	Daemons     DaemonsConfig  `toml:"daemons"`
	Metrics     MetricsConfig  `toml:"metrics"`

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
	// BackupExclude are directories or files inside the backed-up directories that backups
	// leave out, such as Ganeti's job archive and instance exports (disk images). A restore
	// leaves them as they are on disk.
	BackupExclude []string `toml:"backup_exclude"`
}

// ClusterConfig says which nodes form the cluster and which of them is the master. Master may
// be left empty when MasterCommand is set: the master is then whatever that command prints on
// this host when cutover starts.
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
	// HostKeyAliasCommand prints, on the master, the name the nodes' host keys are known
	// under in known_hosts when it is not each node's own (Ganeti's cluster name).
	HostKeyAliasCommand string `toml:"host_key_alias_command"`
	// KnownHostsOwners are the users, besides root, a known_hosts file may belong to
	// (Ganeti's gnt-masterd owns its known_hosts).
	KnownHostsOwners []string `toml:"known_hosts_owners"`

	// HostKeyAlias is what HostKeyAliasCommand printed, filled in when cutover starts.
	HostKeyAlias string `toml:"-"`
	// KnownHostsOwnerIDs are the uids of KnownHostsOwners, filled in when cutover starts.
	KnownHostsOwnerIDs []uint32 `toml:"-"`
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
	// ReconcilerPauseRenew, when set, is how often a run that paused the reconciler runs
	// ReconcilerPause again, so that a pause that expires (Ganeti's lasts an hour) does not
	// end during a long run; a resumed run renews it first.
	ReconcilerPauseRenew Duration `toml:"reconciler_pause_renew"`
	EnsureDirs           string   `toml:"ensure_dirs"`
	RedistConf           string   `toml:"redist_conf"`
	// RestartWatch are the files (absolute paths, * ? [ ] globs) that the daemons read as
	// they start and RedistConf may rewrite; an entry with a leading "!" leaves out the files
	// it matches. After RedistConf, only the nodes where one of them changed are restarted,
	// and none when nothing changed; empty, every node is.
	RestartWatch []string `toml:"restart_watch"`
	PostUpgrade  string   `toml:"post_upgrade"`
	Verify       string   `toml:"verify"`
	// NodeDrain, NodeUndrain and NodeVerify run on the master with {node} in a rolling run:
	// take one node out of service, put it back, check that it serves.
	NodeDrain   string `toml:"node_drain"`
	NodeUndrain string `toml:"node_undrain"`
	NodeVerify  string `toml:"node_verify"`
	// LiveVersion prints the live release on the master, for applications whose config and
	// version directories name only the minor (Ganeti's 3.0 tree holds release 3.0.2).
	LiveVersion string `toml:"live_version"`
	// DaemonsReady exits 0 once the master's daemons answer; stages that need them wait
	// for it, bounded by DaemonsReadyTimeout (after a reboot they wait for the nodes).
	DaemonsReady        string   `toml:"daemons_ready"`
	DaemonsReadyTimeout Duration `toml:"daemons_ready_timeout"`
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
	// VerifyChecksums makes verify-installed check, before a switch, every file of the
	// target's trees on every node against the manifest a stage kept beside them.
	VerifyChecksums bool `toml:"verify_checksums"`
	// OnFailure says what a run does when it failed past its point of no return: "stop"
	// leaves it pending for the operator; "rollback" takes the cluster back to the source by
	// a downgrade run, once, where the path policy and the migrations allow it.
	OnFailure string `toml:"on_failure"`
	// Watch is how long a run watches the cluster after its finish before it is done (the
	// watch stage): the verify and the wrong-version check are repeated every WatchInterval.
	// Zero turns the watch off.
	Watch Duration `toml:"watch"`
	// WatchInterval is the time between two checks of the watch.
	WatchInterval Duration `toml:"watch_interval"`
	// WatchFailures is how many checks in a row may fail before the watch ends failed.
	WatchFailures int `toml:"watch_failures"`
	// WatchBoots is how many boots of the master inside the window may fail to become healthy
	// before the watch ends failed (greenboot's boot counter).
	WatchBoots int `toml:"watch_boots"`
}

// Load reads, defaults and validates the configuration at file. Errors name the file;
// unknown keys are refused with their line, their table and the known key most likely meant
// ("did you mean"), and bad values with their line and key.
func Load(file string) (*Config, error) {
	data, err := ReadTrusted(file)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cfg, err := Parse(data)
	if err != nil {
		// Each of several errors names the file, as each is read on its own line.
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			var errs []error
			for _, e := range joined.Unwrap() {
				errs = append(errs, fmt.Errorf("config %s: %w", file, e))
			}
			return nil, errors.Join(errs...)
		}
		return nil, fmt.Errorf("config %s: %w", file, err)
	}
	cfg.File = file
	return cfg, nil
}

// Parse parses and validates configuration text.
func Parse(data []byte) (*Config, error) {
	if err := checkNesting(data); err != nil {
		return nil, err
	}
	// The profile and [paths] first: a profile derives its own paths from [paths].
	head := struct {
		Profile string      `toml:"profile"`
		Paths   PathsConfig `toml:"paths"`
	}{Paths: basePaths()}
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
	cfg := profile(head.Paths)
	md, err := toml.Decode(string(data), &cfg)
	if err != nil {
		// The text parsed above: what fails now is a value, and the error names its key.
		return nil, valueError(err)
	}
	if errs := unknownKeys(data, md); len(errs) > 0 {
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

// valueError describes a value the decoder refused, such as a bad duration, with its line
// and its key.
func valueError(err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) && pe.LastKey != "" {
		return fmt.Errorf("line %d: %s: %s", pe.Position.Line, pe.LastKey, pe.Message)
	}
	return tomlError(err)
}

// maxKeyErrors is how many unknown keys an error names before it only counts the rest.
const maxKeyErrors = 20

// maxNesting bounds how deeply tables, arrays and dotted keys nest in cutover.toml: the
// decoder's cost grows with it, and no valid config nests more than a few levels.
const maxNesting = 16

// checkNesting refuses TOML that nests tables, arrays or dotted keys more than maxNesting
// deep, before the decoder sees it. It skips strings and comments.
func checkNesting(data []byte) error {
	depth, line := 0, 1
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '\n':
			line++
		case '#':
			for i < len(data) && data[i] != '\n' {
				i++
			}
			line++
		case '"', '\'':
			quote := string([]byte{c, c, c})
			if strings.HasPrefix(string(data[i:min(i+3, len(data))]), quote) {
				end := strings.Index(string(data[i+3:]), quote)
				if end < 0 {
					return nil // the decoder reports the unterminated string
				}
				line += strings.Count(string(data[i:i+3+end]), "\n")
				i += 3 + end + 2
				continue
			}
			for i++; i < len(data) && data[i] != c && data[i] != '\n'; i++ {
				if c == '"' && data[i] == '\\' {
					i++
				}
			}
		case '[', '{':
			depth++
			if depth > maxNesting {
				return fmt.Errorf("line %d: tables or arrays nested more than %d deep", line, maxNesting)
			}
		case ']', '}':
			depth--
		case '.':
			// Dotted keys (a.b.c = 1, [a.b.c]) nest too: count a line's dots.
			if n := strings.Count(lineAt(data, i), "."); n > maxNesting*2 {
				return fmt.Errorf("line %d: keys nested more than %d deep", line, maxNesting)
			}
		}
	}
	return nil
}

// lineAt returns the line of data that holds offset i.
func lineAt(data []byte, i int) string {
	start := strings.LastIndexByte(string(data[:i]), '\n') + 1
	end := strings.IndexByte(string(data[i:]), '\n')
	if end < 0 {
		return string(data[start:])
	}
	return string(data[start : i+end])
}

var (
	appName  = regexp.MustCompile(`^[a-z0-9][a-z0-9._+-]*$`)
	hostName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)
	jsonPtr  = regexp.MustCompile(`^(/[^/]*)+$`)
)

func (c *Config) validate() error {
	var p problems
	c.validateNames(&p)
	c.validatePaths(&p)
	c.validateCluster(&p)
	c.validateAppConfig(&p)
	c.validatePolicy(&p)
	p = append(p, c.Strategy.validate(c.Commands)...)
	p = append(p, c.Stage.validate()...)
	p = append(p, c.Daemons.validate()...)
	p = append(p, c.Metrics.validate()...)
	if c.Commands.QueueDrain != "" && c.Commands.QueueBusy == "" {
		p.add("commands.queue_drain needs commands.queue_busy to know when the queue is empty")
	}
	return errors.Join(p...)
}

// problems are what validate refuses in a configuration, in the order it checks them.
type problems []error

// add notes one problem.
func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Errorf(format, args...)) }

// validateNames checks the application's name and how its version directories are named.
func (c *Config) validateNames(p *problems) {
	if c.App == "" {
		p.add("app is required")
	} else if !appName.MatchString(c.App) {
		p.add("app %q: only lower-case letters, digits and . _ + - are allowed", c.App)
	}
	if c.VersionDirs != "full" && c.VersionDirs != "minor" {
		p.add("version_dirs %q: must be \"full\" or \"minor\"", c.VersionDirs)
	}
}

// validatePaths checks the installation and state paths, and what a backup holds and leaves
// out.
func (c *Config) validatePaths(p *problems) {
	for name, dir := range map[string]string{
		"paths.libdir": c.Paths.LibDir, "paths.datadir": c.Paths.DataDir, "paths.sysconfdir": c.Paths.SysconfDir,
		"paths.localstatedir": c.Paths.LocalstateDir, "paths.state_dir": c.Paths.StateDir,
	} {
		if !cleanAbs(dir) {
			p.add("%s %q: must be a clean absolute path", name, dir)
		}
	}
	if c.App != "" && cleanAbs(c.Paths.StateDir) {
		for _, d := range c.BackupDirs() {
			if within(c.Paths.StateDir, d) || within(d, c.Paths.StateDir) {
				p.add("paths.state_dir %q overlaps %s, which cutover backs up and restores: a restore would bring back an old journal and intent; put the state elsewhere (default /var/lib/cutover)", c.Paths.StateDir, d)
			}
		}
	}
	for _, x := range c.Paths.BackupExclude {
		inside := false
		for _, d := range c.BackupDirs() {
			inside = inside || (x != d && within(x, d))
		}
		if !cleanAbs(x) || !inside {
			p.add("paths.backup_exclude %q: must be a clean absolute path inside %s", x, strings.Join(c.BackupDirs(), " or "))
		}
	}
}

// validateCluster checks how the master and the nodes are found and reached.
func (c *Config) validateCluster(p *problems) {
	if c.Cluster.Master == "" {
		if c.Cluster.MasterCommand == "" {
			p.add("cluster.master or cluster.master_command is required")
		}
	} else if !hostName.MatchString(c.Cluster.Master) {
		p.add("cluster.master %q is not a host name", c.Cluster.Master)
	}
	if c.Cluster.NodesCommand == "" && len(c.Cluster.Nodes) == 0 {
		p.add("cluster: no nodes: add [[cluster.node]] entries or set nodes_command")
	}
	if c.SSH.User == "" {
		p.add("ssh.user is required")
	}
	if c.SSH.Parallel < 1 {
		p.add("ssh.parallel %d: must be at least 1", c.SSH.Parallel)
	}
	if c.SSH.ConnectTimeout.Duration <= 0 || c.SSH.CommandTimeout.Duration <= 0 {
		p.add("ssh.connect_timeout and ssh.command_timeout must be positive")
	}
}

// validateAppConfig checks the application's config file, its version, its migrations and the
// files redistributed or watched for a restart.
func (c *Config) validateAppConfig(p *problems) {
	if !cleanAbs(c.Config.File) {
		p.add("config.file %q: must be a clean absolute path", c.Config.File)
	}
	if !jsonPtr.MatchString(c.Config.VersionKey) {
		p.add("config.version_key %q: must be a JSON Pointer such as \"/version\"", c.Config.VersionKey)
	}
	if c.Config.VersionEncoding != "semver" && c.Config.VersionEncoding != "ganeti" {
		p.add("config.version_encoding %q: must be \"semver\" or \"ganeti\"", c.Config.VersionEncoding)
	}
	switch c.Config.Migrate {
	case "builtin":
	case "exec":
		if c.Config.UpgradeCommand == "" || c.Config.DowngradeCommand == "" {
			p.add("config.migrate = \"exec\" needs upgrade_command and downgrade_command")
		}
	default:
		p.add("config.migrate %q: must be \"builtin\" or \"exec\"", c.Config.Migrate)
	}
	for _, f := range c.Config.Redistribute {
		if !cleanAbs(f) {
			p.add("config.redistribute: %q must be a clean absolute path", f)
		}
	}
	for _, f := range c.Commands.RestartWatch {
		if !cleanAbs(strings.TrimPrefix(f, "!")) {
			p.add("commands.restart_watch: %q must be a clean absolute path (globs allowed), or one with a leading ! for files to leave out", f)
		}
	}
}

// validatePolicy checks the [policy] settings.
func (c *Config) validatePolicy(p *problems) {
	if c.Policy.OnFailure != "stop" && c.Policy.OnFailure != "rollback" {
		p.add("policy.on_failure %q: must be \"stop\" or \"rollback\"", c.Policy.OnFailure)
	}
	if c.Policy.Downgrade != "previous-minor" && c.Policy.Downgrade != "never" {
		p.add("policy.downgrade %q: must be \"previous-minor\" or \"never\"", c.Policy.Downgrade)
	}
	if c.Policy.BackupKeep < 1 {
		p.add("policy.backup_keep %d: must be at least 1", c.Policy.BackupKeep)
	}
	if c.Policy.DrainTimeout.Duration <= 0 {
		p.add("policy.drain_timeout must be positive")
	}
	if c.Policy.WatchInterval.Duration < time.Second {
		p.add("policy.watch_interval %s: must be at least 1s", c.Policy.WatchInterval.Duration)
	}
	if c.Policy.WatchFailures < 1 {
		p.add("policy.watch_failures %d: must be at least 1", c.Policy.WatchFailures)
	}
	if c.Policy.WatchBoots < 1 {
		p.add("policy.watch_boots %d: must be at least 1", c.Policy.WatchBoots)
	}
}

// BackupDirs are the directories a backup holds and a restore writes: the application's
// state and its directory in sysconfdir.
func (c *Config) BackupDirs() []string {
	return []string{
		path.Join(c.Paths.LocalstateDir, "lib", c.App),
		path.Join(c.Paths.SysconfDir, c.App),
	}
}

// within reports whether p is dir or lies below it; both are clean absolute paths.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

func cleanAbs(p string) bool {
	return p != "" && path.IsAbs(p) && path.Clean(p) == p && !strings.ContainsAny(p, "\x00\n")
}
