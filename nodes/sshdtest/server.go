package sshdtest

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"
)

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
