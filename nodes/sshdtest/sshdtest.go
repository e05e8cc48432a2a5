// Package sshdtest starts real OpenSSH sshd processes on 127.0.0.1 for tests
// and benchmarks that reach nodes over SSH.
//
// # Starting servers
//
// Start(tb, n) starts n sshd processes in parallel, each on a free port with
// its own ed25519 host key, all accepting one generated client key for one
// login. The returned [Cluster] holds what a client needs: the login name, the
// identity file and a known_hosts file listing every server. Everything is
// stopped and removed when the test ends.
//
//	c := sshdtest.Start(t, 3)
//	s := c.Servers[0]
//	// dial s.Addr:s.Port as c.User with c.IdentityFile, checking c.KnownHosts
//
// # The login
//
// Servers accept the unprivileged user cutover-test (created by test/setup.sh,
// shell /bin/sh, no start-up files). When it is missing or its account is
// locked, root is used instead, except when the environment variable CI is
// "true": there the test fails. [WithRootLogin] makes the servers accept root
// (with the generated key) instead, the login cutover uses by default;
// sshd treats root sessions differently (it refuses to signal their
// commands, for one). sshd must run as root; without root or without
// /usr/sbin/sshd the test is skipped, or fails under CI=true.
//
// A root login's HOME is an empty directory of the cluster's own (sshd's
// SetEnv), so its shell reads no start-up files of the machine's root. Those
// belong to the machine, not to the test, and may run anything: a version
// manager's rehash in root's .bashrc waits up to a minute for a lock that a
// login killed in the middle of it left behind, and then every later root
// login does, long past any command's timeout.
//
// # Failures
//
// [Server.Kill] kills a server's whole process tree (the listener, its
// per-connection processes and the commands they run), like a crashed node;
// [Server.Restart] brings it back on the same port with the same host key.
// [Server.Freeze] stops the tree with SIGSTOP, like a node that vanished from
// the network: connections stay open but nothing answers; [Server.Thaw]
// resumes it.
package sshdtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSHD is the sshd binary the servers run.
const SSHD = "/usr/sbin/sshd"

// TestUser is the unprivileged login the servers accept when it exists.
const TestUser = "cutover-test"

// startTimeout bounds how long one sshd may take to listen.
const startTimeout = 10 * time.Second

// Cluster is a set of running sshd servers sharing one login and client key.
type Cluster struct {
	User         string     // the login every server accepts
	IdentityFile string     // the client's unencrypted ed25519 private key (0600)
	Signer       ssh.Signer // the same key, parsed
	KnownHosts   string     // a known_hosts file with each server's ed25519 key
	Dir          string     // the directory holding keys and configs; removed at the end
	Servers      []*Server

	uid, gid int
}

// Server is one running sshd.
type Server struct {
	Name    string        // node1, node2, ...
	Addr    string        // 127.0.0.1
	Port    int           // the port sshd listens on
	HostKey ssh.PublicKey // the ed25519 host key listed in known_hosts

	// WorkDir is where a server started WithWorkDirs starts its commands.
	WorkDir string

	// ExtraHostKeys are the ECDSA and RSA host keys of a server started
	// WithExtraHostKeys, in that order; known_hosts does not list them.
	ExtraHostKeys []ssh.PublicKey

	dir          string
	config       string
	hostKeyLines []string
	login        string
	authorized   string
	sftp         string // the sftp subsystem's command
	home         string // the login's HOME when not its own; "" otherwise
	ownProcesses bool   // in a PID namespace of its own (WithOwnProcesses)
	forced       string // the file of the script every session runs (WithForcedCommand); "" for none

	mu   sync.Mutex
	cmd  *exec.Cmd
	log  *logBuffer
	exit chan struct{} // closed when the current sshd process has exited
}

// Option changes how Start sets servers up.
type Option func(*options)

type options struct {
	extraHostKeys bool
	root          bool
	sftp          string // the sftp subsystem's command; "" for internal-sftp
	workDirs      bool
	ownProcesses  bool
	forced        string // a script every session runs instead of its command; "" for none
}

// WithExtraHostKeys gives every server ECDSA and RSA host keys besides the
// ed25519 key; known_hosts still lists only the ed25519 key. The RSA key has
// 1024 bits, the least sshd accepts, because larger ones take a second or
// more to generate.
func WithExtraHostKeys() Option { return func(o *options) { o.extraHostKeys = true } }

// WithRootLogin makes the servers accept root instead of cutover-test, with
// the same generated client key.
func WithRootLogin() Option { return func(o *options) { o.root = true } }

// WithSFTPServer makes the servers run command as their SFTP subsystem
// instead of sshd's internal-sftp (the login's shell runs it); "cat >/dev/null"
// makes a server whose SFTP never answers and ends with the connection.
func WithSFTPServer(command string) Option { return func(o *options) { o.sftp = command } }

// WithWorkDirs gives every server a directory of its own (Server.WorkDir, owned by the
// login) that commands start in, through sshd's ForceCommand: a relative path given to a
// command, like the destination of pdcp, then names a different directory on each server, as
// it would on different hosts. SFTP is unaffected.
func WithWorkDirs() Option { return func(o *options) { o.workDirs = true } }

// WithOwnProcesses runs every server in a PID namespace of its own with its own /proc
// (unshare --pid --fork --mount-proc, as root): a command on a server sees only that server's
// processes, as on a host of its own, and not those of every other server of the cluster. A
// check that reads every process of its node then costs what it would on a real node, not a
// share of the whole test host. The namespace's process ids are not the host's.
func WithOwnProcesses() Option { return func(o *options) { o.ownProcesses = true } }

// WithForcedCommand makes every server run script, a POSIX sh script, for every session
// instead of what the client asked for (sshd's ForceCommand), so that a server plays a node
// that sends what it likes, a hostile one. The script finds what the client asked for in
// $SSH_ORIGINAL_COMMAND, and may run it as the node would (exec /bin/sh -c
// "$SSH_ORIGINAL_COMMAND"), run something else, or print something first. An SFTP session runs
// it too, with $SSH_ORIGINAL_COMMAND the subsystem's command ("internal-sftp", which only sshd
// itself can run): the server's SFTP fails unless the script runs an SFTP server of its own
// then. With WithWorkDirs the script starts in the server's directory.
func WithForcedCommand(script string) Option { return func(o *options) { o.forced = script } }

// WithoutSFTP makes servers without an SFTP subsystem, as some hardened
// sshd configurations are.
func WithoutSFTP() Option { return func(o *options) { o.sftp = "none" } }

// Start starts n sshd servers in parallel and returns them once every one
// listens. They are stopped, and their files removed, when tb ends.
func Start(tb testing.TB, n int, opts ...Option) *Cluster {
	tb.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	requireSSHD(tb)
	c := &Cluster{}
	if o.root {
		c.User = "root"
	} else {
		c.User, c.uid, c.gid = login(tb)
	}

	dir, err := os.MkdirTemp("", "sshdtest-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	// sshd reads authorized_keys as the login, so the path must be open to it.
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	c.Dir = dir

	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	c.IdentityFile = filepath.Join(dir, "id_ed25519")
	writeKey(tb, c.IdentityFile, priv)
	c.Signer, err = ssh.NewSignerFromKey(priv)
	if err != nil {
		tb.Fatal(err)
	}
	authorized := filepath.Join(dir, "authorized_keys")
	writeFile(tb, authorized, ssh.MarshalAuthorizedKey(c.Signer.PublicKey()), 0o644)

	home := ""
	if c.User == "root" {
		home = filepath.Join(dir, "root-home")
		if err := os.Mkdir(home, 0o700); err != nil {
			tb.Fatal(err)
		}
	}

	c.Servers = make([]*Server, n)
	for i := range c.Servers {
		s, err := newServer(dir, fmt.Sprintf("node%d", i+1), c.User, authorized, o)
		if err != nil {
			tb.Fatal(err)
		}
		s.home = home
		if o.workDirs {
			s.WorkDir = filepath.Join(dir, s.Name+"-work")
			if err := os.Mkdir(s.WorkDir, 0o755); err != nil {
				tb.Fatal(err)
			}
			if err := os.Chown(s.WorkDir, c.uid, c.gid); err != nil {
				tb.Fatal(err)
			}
		}
		c.Servers[i] = s
	}
	tb.Cleanup(func() {
		for _, s := range c.Servers {
			if s == nil {
				continue
			}
			s.stop()
			if tb.Failed() {
				tb.Logf("sshd %s (port %d) log:\n%s", s.Name, s.Port, s.Log())
			}
		}
	})

	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range c.Servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.startOnFreePort()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		tb.Fatal(err)
	}

	var hosts []byte
	for _, s := range c.Servers {
		hosts = append(hosts, KnownHostsLine(s.Addr, s.Port, s.HostKey)...)
	}
	c.KnownHosts = filepath.Join(dir, "known_hosts")
	writeFile(tb, c.KnownHosts, hosts, 0o644)
	return c
}

// KnownHostsLine returns a known_hosts line (with newline) for a host key
// served at addr:port, in the [addr]:port form for ports other than 22.
func KnownHostsLine(addr string, port int, key ssh.PublicKey) []byte {
	hostport := knownhosts.Normalize(net.JoinHostPort(addr, strconv.Itoa(port)))
	return []byte(knownhosts.Line([]string{hostport}, key) + "\n")
}

// UserDir returns a new empty directory owned by the login, for tests that
// write files over SFTP. It is removed when tb ends.
func (c *Cluster) UserDir(tb testing.TB) string {
	tb.Helper()
	d, err := os.MkdirTemp(c.Dir, "files-")
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.Chown(d, c.uid, c.gid); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// Bind gives every server started WithOwnProcesses a directory of its own at dir, an existing
// directory of this host: a new directory, owned by the servers' login, is bind-mounted over
// dir in the server's mount namespace, so that what a node changes there is its own, as on a
// host of its own, while the rest of the file system stays shared. It returns each server's
// directory as this process sees it, in the order of Servers. The mounts are gone when a
// server is restarted.
func (c *Cluster) Bind(tb testing.TB, dir string) []string {
	tb.Helper()
	var own []string
	for _, s := range c.Servers {
		if !s.ownProcesses {
			tb.Fatalf("sshdtest: Bind needs servers started WithOwnProcesses")
		}
		d, err := os.MkdirTemp(s.dir, "bind-")
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.Chown(d, c.uid, c.gid); err != nil {
			tb.Fatal(err)
		}
		s.mu.Lock()
		pid := s.cmd.Process.Pid // unshare, in the server's mount namespace
		s.mu.Unlock()
		out, err := exec.Command("nsenter", "--target", strconv.Itoa(pid), "--mount", "mount", "--bind", d, dir).CombinedOutput()
		if err != nil {
			tb.Fatalf("sshdtest: bind %s over %s for %s: %v: %s", d, dir, s.Name, err, out)
		}
		own = append(own, d)
	}
	return own
}

// OpenSSHConfig writes an ssh_config for OpenSSH's client (and pdsh, pdcp) that names the
// servers by names, in order, and checks their host keys strictly against the cluster's
// known_hosts, and returns its path.
func (c *Cluster) OpenSSHConfig(tb testing.TB, names []string) string {
	tb.Helper()
	var conf strings.Builder
	for i, s := range c.Servers {
		fmt.Fprintf(&conf, "Host %s\n  HostName %s\n  Port %d\n", names[i], s.Addr, s.Port)
	}
	// known_hosts lists each server as [127.0.0.1]:PORT, what OpenSSH looks up for
	// HostName 127.0.0.1 and Port PORT, so no HostKeyAlias is needed.
	fmt.Fprintf(&conf, "Host *\n  User %s\n  IdentityFile %s\n  IdentitiesOnly yes\n  UserKnownHostsFile %s\n"+
		"  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n  UpdateHostKeys no\n  BatchMode yes\n  LogLevel ERROR\n",
		c.User, c.IdentityFile, c.KnownHosts)
	cfg := filepath.Join(tb.TempDir(), "ssh_config")
	if err := os.WriteFile(cfg, []byte(conf.String()), 0o600); err != nil {
		tb.Fatal(err)
	}
	return cfg
}

// requireSSHD skips (or fails under CI=true) when sshd cannot run here.
func requireSSHD(tb testing.TB) {
	tb.Helper()
	missing := ""
	if _, err := os.Stat(SSHD); err != nil {
		missing = SSHD + " is not installed (run test/setup.sh)"
	} else if os.Geteuid() != 0 {
		missing = "sshd must run as root"
	}
	if missing == "" {
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			missing = "cannot create sshd's privilege separation directory: " + err.Error()
		}
	}
	if missing == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		tb.Fatal(missing)
	}
	tb.Skip(missing)
}

// login returns the user the servers accept, with its uid and gid.
func login(tb testing.TB) (string, int, int) {
	tb.Helper()
	problem := ""
	u, err := user.Lookup(TestUser)
	switch {
	case err != nil:
		problem = "user " + TestUser + " does not exist (run test/setup.sh)"
	case accountLocked(TestUser):
		problem = "user " + TestUser + " is locked (its password field starts with '!'), " +
			"which sshd refuses without PAM: run `usermod -p '*' " + TestUser + "`"
	}
	if problem == "" {
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return u.Username, uid, gid
	}
	if os.Getenv("CI") == "true" {
		tb.Fatal(problem)
	}
	tb.Logf("sshdtest: %s; logging in as root instead", problem)
	return "root", 0, 0
}

// accountLocked reports whether /etc/shadow marks name as locked.
func accountLocked(name string) bool {
	data, err := os.ReadFile("/etc/shadow")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Split(line, ":")
		if len(fields) > 1 && fields[0] == name {
			return strings.HasPrefix(fields[1], "!")
		}
	}
	return false
}
