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
	"bufio"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	"golang.org/x/sys/unix"
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

// newServer writes a server's host keys and configuration.
func newServer(dir, name, login, authorized string, o options) (*Server, error) {
	sdir := filepath.Join(dir, name)
	if err := os.Mkdir(sdir, 0o755); err != nil {
		return nil, err
	}
	s := &Server{Name: name, Addr: "127.0.0.1", dir: sdir, config: filepath.Join(sdir, "sshd_config")}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	pub, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		return nil, err
	}
	s.HostKey = pub
	keys := map[string]any{"ssh_host_ed25519_key": priv}
	if o.extraHostKeys {
		if keys["ssh_host_ecdsa_key"], err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			return nil, err
		}
		if keys["ssh_host_rsa_key"], err = rsa.GenerateKey(rand.Reader, 1024); err != nil {
			return nil, err
		}
	}
	var hostKeyLines []string
	for _, file := range []string{"ssh_host_ed25519_key", "ssh_host_ecdsa_key", "ssh_host_rsa_key"} {
		k, ok := keys[file]
		if !ok {
			continue
		}
		path := filepath.Join(sdir, file)
		if err := writeKeyFile(path, k); err != nil {
			return nil, err
		}
		hostKeyLines = append(hostKeyLines, "HostKey "+path)
		if file == "ssh_host_ed25519_key" {
			continue
		}
		signer, err := ssh.NewSignerFromKey(k)
		if err != nil {
			return nil, err
		}
		s.ExtraHostKeys = append(s.ExtraHostKeys, signer.PublicKey())
	}
	s.hostKeyLines = hostKeyLines
	s.login, s.authorized = login, authorized
	s.ownProcesses = o.ownProcesses
	s.sftp = "internal-sftp"
	if o.sftp != "" {
		s.sftp = o.sftp
	}
	if o.forced != "" {
		s.forced = filepath.Join(sdir, "forced-command")
		if err := os.WriteFile(s.forced, []byte(o.forced), 0o755); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// startOnFreePort picks a free port and starts sshd on it, trying another
// port when the one picked was taken meanwhile.
func (s *Server) startOnFreePort() error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		var port int
		if port, err = freePort(); err != nil {
			return err
		}
		s.Port = port
		if err = s.writeConfig(); err != nil {
			return err
		}
		if err = s.start(); err == nil {
			return nil
		}
	}
	return fmt.Errorf("start sshd %s: %w", s.Name, err)
}

// freePort asks the kernel for a port that is free at the moment.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// writeConfig writes the server's sshd_config for its current port.
func (s *Server) writeConfig() error {
	lines := append([]string{
		fmt.Sprintf("ListenAddress %s:%d", s.Addr, s.Port),
	}, s.hostKeyLines...)
	lines = append(lines,
		"AuthorizedKeysFile "+s.authorized,
		"AllowUsers "+s.login,
		"StrictModes no",
		"UsePAM no",
		"PidFile none",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"PermitRootLogin prohibit-password",
		"PrintMotd no",
		"PrintLastLog no",
		"UseDNS no",
		"LogLevel INFO",
	)
	if s.home != "" {
		lines = append(lines, `SetEnv "HOME=`+s.home+`"`)
	}
	if s.sftp != "none" {
		lines = append(lines, "Subsystem sftp "+s.sftp)
	}
	run := `exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"`
	if s.forced != "" {
		run = "exec /bin/sh " + s.forced
	}
	switch {
	case s.WorkDir != "":
		lines = append(lines, `ForceCommand cd `+s.WorkDir+` && `+run)
	case s.forced != "":
		lines = append(lines, "ForceCommand "+run)
	}
	return os.WriteFile(s.config, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

// start runs sshd and waits until it listens.
func (s *Server) start() error {
	cmd := exec.Command(SSHD, "-D", "-e", "-f", s.config)
	if s.ownProcesses {
		cmd = exec.Command("unshare", "--pid", "--fork", "--mount-proc", "--kill-child", SSHD, "-D", "-e", "-f", s.config)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", SSHD, err)
	}
	log := &logBuffer{}
	listening := make(chan struct{})
	exit := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			log.add(sc.Text())
			if strings.HasPrefix(sc.Text(), "Server listening on") {
				once.Do(func() { close(listening) })
			}
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
		close(exit)
	}()
	select {
	case <-listening:
	case <-exit:
		return fmt.Errorf("sshd %s exited on port %d: %s", s.Name, s.Port, log.String())
	case <-time.After(startTimeout):
		cmd.Process.Kill()
		<-exit
		return fmt.Errorf("sshd %s did not listen on port %d within %s: %s", s.Name, s.Port, startTimeout, log.String())
	}
	s.mu.Lock()
	s.cmd, s.log, s.exit = cmd, log, exit
	s.mu.Unlock()
	return nil
}

// Kill kills the server's whole process tree, as if the node crashed, and
// waits for the listener to exit.
func (s *Server) Kill(tb testing.TB) {
	tb.Helper()
	if err := s.stop(); err != nil {
		tb.Fatal(err)
	}
}

// stop kills the process tree, if running.
func (s *Server) stop() error {
	s.mu.Lock()
	cmd, exit := s.cmd, s.exit
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	signalTree(cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-exit:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("sshd %s (pid %d) did not exit after SIGKILL", s.Name, cmd.Process.Pid)
	}
}

// Restart starts a killed server again on the same port with the same keys.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	running := s.cmd != nil
	s.mu.Unlock()
	if running {
		tb.Fatalf("restart sshd %s: still running", s.Name)
	}
	// The port may linger for a moment after the kill; retry briefly.
	var err error
	for deadline := time.Now().Add(startTimeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err = s.start(); err == nil {
			return
		}
	}
	tb.Fatalf("restart sshd %s: %v", s.Name, err)
}

// Freeze stops every process of the server's tree with SIGSTOP: connections
// stay open but nothing answers, as when a node drops off the network.
func (s *Server) Freeze(tb testing.TB) {
	tb.Helper()
	s.signal(tb, syscall.SIGSTOP)
}

// Thaw resumes a frozen server.
func (s *Server) Thaw(tb testing.TB) {
	tb.Helper()
	s.signal(tb, syscall.SIGCONT)
}

func (s *Server) signal(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		tb.Fatalf("signal sshd %s: not running", s.Name)
		return
	}
	signalTree(cmd.Process.Pid, sig)
}

// Log returns what the server's sshd has logged so far.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.log == nil {
		return ""
	}
	return s.log.String()
}

// signalTree sends sig to root and all its descendants. sshd puts each
// connection in a new session, so a process-group signal would miss them.
func signalTree(root int, sig syscall.Signal) {
	procs := descendants(root)
	// Stop the whole tree first so nothing forks or reparents meanwhile. A process that was
	// already exiting cannot be stopped, and its children pass to init before the tree is
	// listed again: they are killed as listed first (p.signal checks each is still the one
	// listed), so that none is left stopped for ever.
	if sig == syscall.SIGKILL {
		for _, p := range procs {
			p.signal(syscall.SIGSTOP)
		}
		procs = append(procs, descendants(root)...)
	}
	for _, p := range procs {
		p.signal(sig)
	}
}

// proc is a process as /proc listed it.
type proc struct {
	pid, ppid int
	start     string // the start time in clock ticks since boot
}

// signal sends sig to the process p names, and to no other: a process of
// the tree that ended since it was listed may have left its id to an
// unrelated one, on a busy machine within milliseconds. A pidfd holds on to
// the process that has the id when it is opened; the signal goes through it
// only when that process has p's start time. (Its parent may have changed:
// a killed process's children pass to init.)
func (p proc) signal(sig syscall.Signal) {
	fd, err := unix.PidfdOpen(p.pid, 0)
	if err != nil {
		return // gone
	}
	defer unix.Close(fd)
	if now, ok := readProc(p.pid); !ok || now.start != p.start {
		return
	}
	unix.PidfdSendSignal(fd, sig, nil, 0)
}

// readProc reads the process pid from /proc.
func readProc(pid int) (proc, bool) {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return proc{}, false
	}
	// pid (comm) state ppid ... with the start time the 22nd field; comm may
	// hold spaces and parentheses.
	rest := string(stat)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	fields := strings.Fields(rest)
	if len(fields) < 20 {
		return proc{}, false
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return proc{}, false
	}
	return proc{pid: pid, ppid: ppid, start: fields[19]}, true
}

// descendants returns root and every process below it, read from /proc.
func descendants(root int) []proc {
	children := map[int][]proc{}
	var top proc
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, ok := readProc(pid)
		if !ok {
			continue
		}
		if pid == root {
			top = p
		}
		children[p.ppid] = append(children[p.ppid], p)
	}
	if top.pid == 0 {
		return nil
	}
	out := []proc{top}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i].pid]...)
	}
	return out
}

// logBuffer keeps the last lines a server logged.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (l *logBuffer) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) >= 200 {
		l.lines = l.lines[1:]
	}
	l.lines = append(l.lines, line)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// writeKey writes a private key in OpenSSH format with mode 0600.
func writeKey(tb testing.TB, path string, key any) {
	tb.Helper()
	if err := writeKeyFile(path, key); err != nil {
		tb.Fatal(err)
	}
}

func writeKeyFile(path string, key any) error {
	block, err := ssh.MarshalPrivateKey(key, "")
	if err != nil {
		return fmt.Errorf("marshal key %s: %w", path, err)
	}
	return os.WriteFile(path, pem.EncodeToMemory(block), 0o600)
}

func writeFile(tb testing.TB, path string, data []byte, perm os.FileMode) {
	tb.Helper()
	if err := os.WriteFile(path, data, perm); err != nil {
		tb.Fatal(err)
	}
}
