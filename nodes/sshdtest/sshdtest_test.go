package sshdtest_test

import (
	"bytes"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/cutover/cutover/nodes/sshdtest"
)

func TestStart(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 3)
	if len(c.Servers) != 3 {
		t.Fatalf("%d servers, want 3", len(c.Servers))
	}
	hosts, err := os.ReadFile(c.KnownHosts)
	if err != nil {
		t.Fatal(err)
	}
	ports := map[int]bool{}
	for _, s := range c.Servers {
		if ports[s.Port] {
			t.Errorf("port %d used twice", s.Port)
		}
		ports[s.Port] = true
		if !bytes.Contains(hosts, sshdtest.KnownHostsLine(s.Addr, s.Port, s.HostKey)) {
			t.Errorf("known_hosts lacks %s's key:\n%s", s.Name, hosts)
		}
		assertBanner(t, s)
	}
	fi, err := os.Stat(c.IdentityFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("identity file: %v, %v; want mode 0600", fi, err)
	}

	dir := c.UserDir(t)
	fi, err = os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := lookupUID(t, c.User); fi.Sys().(*syscall.Stat_t).Uid != want {
		t.Errorf("UserDir owner = %d, want %s (%d)", fi.Sys().(*syscall.Stat_t).Uid, c.User, want)
	}
}

// TestKillRestart checks that Kill stops a server and Restart brings it
// back on the same port.
func TestKillRestart(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1)
	s := c.Servers[0]
	s.Kill(t)
	addr := net.JoinHostPort(s.Addr, strconv.Itoa(s.Port))
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Fatal("a killed server still accepts connections")
	}
	s.Restart(t)
	assertBanner(t, s)
}

// assertBanner checks that the server answers with an SSH banner.
func assertBanner(t *testing.T, s *sshdtest.Server) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(s.Addr, strconv.Itoa(s.Port)), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 8)
	if _, err := conn.Read(buf); err != nil || !bytes.HasPrefix(buf, []byte("SSH-2.0-")) {
		t.Errorf("%s answered %q, %v; want an SSH banner", s.Name, buf, err)
	}
}

func lookupUID(t *testing.T, name string) uint32 {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(uid)
}

// TestRootLogin checks that WithRootLogin servers let root in with the
// cluster's key, in a HOME of the cluster's own: the machine's root start-up
// files are not read.
func TestRootLogin(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1, sshdtest.WithRootLogin())
	if c.User != "root" {
		t.Fatalf("User = %q, want root", c.User)
	}
	s := c.Servers[0]
	client, err := ssh.Dial("tcp", net.JoinHostPort(s.Addr, strconv.Itoa(s.Port)), &ssh.ClientConfig{
		User:            c.User,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(c.Signer)},
		HostKeyCallback: ssh.FixedHostKey(s.HostKey),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	session, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	out, err := session.Output(`id -u; echo "$HOME"`)
	if err != nil {
		t.Fatal(err)
	}
	want := "0\n" + filepath.Join(c.Dir, "root-home")
	if got := string(bytes.TrimSpace(out)); got != want {
		t.Errorf("id -u; echo $HOME = %q, want %q", got, want)
	}
}

// TestForcedCommand checks that a WithForcedCommand server runs its script for every session,
// with the command the client asked for in $SSH_ORIGINAL_COMMAND, in the server's directory when
// it also has one.
func TestForcedCommand(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1, sshdtest.WithForcedCommand(`printf 'forced: %s in %s\n' "$SSH_ORIGINAL_COMMAND" "$PWD"`), sshdtest.WithWorkDirs())
	s := c.Servers[0]
	client, err := ssh.Dial("tcp", net.JoinHostPort(s.Addr, strconv.Itoa(s.Port)), &ssh.ClientConfig{
		User:            c.User,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(c.Signer)},
		HostKeyCallback: ssh.FixedHostKey(s.HostKey),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	session, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	out, err := session.Output("echo hello")
	if err != nil {
		t.Fatal(err)
	}
	if want := "forced: echo hello in " + s.WorkDir + "\n"; string(out) != want {
		t.Errorf("the session printed %q, want %q", out, want)
	}
}
