package nodes_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/nodes/sshdtest"
)

// randomKey returns a fresh ed25519 public key.
func randomKey(t *testing.T) ssh.PublicKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// writeKnownHosts writes a known_hosts file and returns its path.
func writeKnownHosts(t *testing.T, lines ...string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(f, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestHostKeyChecking(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1)
	s := c.Servers[0]
	real := string(sshdtest.KnownHostsLine(s.Addr, s.Port, s.HostKey))
	tests := []struct {
		name       string
		knownHosts string
		nodeName   string // the node's name when not the server's
		wantErr    string // "" means the connection succeeds
		check      func(error) bool
	}{
		{name: "known", knownHosts: real},
		{name: "known by node name only", nodeName: "db1.example",
			knownHosts: string(sshdtest.KnownHostsLine("db1.example", s.Port, s.HostKey))},
		{name: "unknown host", knownHosts: string(sshdtest.KnownHostsLine(s.Addr, s.Port+1, s.HostKey)),
			wantErr: "is not in known_hosts", check: nodes.IsUnknownHost},
		{name: "port 22 entry does not cover another port", knownHosts: string(sshdtest.KnownHostsLine(s.Addr, 22, s.HostKey)),
			wantErr: "is not in known_hosts", check: nodes.IsUnknownHost},
		{name: "changed key", knownHosts: string(sshdtest.KnownHostsLine(s.Addr, s.Port, randomKey(t))),
			wantErr: "does not match known_hosts", check: nodes.IsHostKeyMismatch},
		{name: "revoked key", knownHosts: "@revoked " + real + string(sshdtest.KnownHostsLine(s.Addr, s.Port, randomKey(t))),
			wantErr: "is revoked", check: nodes.IsHostKeyMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			kh := writeKnownHosts(t, tt.knownHosts)
			name := s.Name
			if tt.nodeName != "" {
				name = tt.nodeName
			}
			inv, err := nodes.NewInventory(localMaster, []nodes.Node{{Name: localMaster}, {Name: name, Address: s.Addr, Port: s.Port}})
			if err != nil {
				t.Fatal(err)
			}
			cfg := sshConfig(c)
			cfg.KnownHosts = []string{filepath.Join(t.TempDir(), "missing"), kh}
			p, err := nodes.NewPool(inv, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			conn, err := p.Conn(context.Background(), name)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := conn.Run(context.Background(), "true"); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Conn: err = nil, want %q", tt.wantErr)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, name+": ") || !strings.Contains(msg, tt.wantErr) || !strings.Contains(msg, kh) {
				t.Errorf("Conn: err = %q, want the node, %q and the file %s", msg, tt.wantErr, kh)
			}
			if !tt.check(err) {
				t.Errorf("predicate for %q is false for %v", tt.name, err)
			}
		})
	}
}

// TestHostKeyAlgorithmRestricted checks that a server offering ECDSA and RSA
// host keys besides the ed25519 key known_hosts holds is reached: the client
// must ask for the key type known_hosts has, not its own favourite.
func TestHostKeyAlgorithmRestricted(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1, sshdtest.WithExtraHostKeys())
	s := c.Servers[0]

	// Without the restriction the client negotiates another key type and
	// the check fails: this is what the test guards against.
	cb, err := knownhosts.New(c.KnownHosts)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(s.Addr, strconv.Itoa(s.Port))
	_, err = ssh.Dial("tcp", addr, &ssh.ClientConfig{User: c.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(c.Signer)}, HostKeyCallback: cb})
	var ke *knownhosts.KeyError
	if !errors.As(err, &ke) {
		t.Fatalf("unrestricted dial: err = %v, want a known_hosts key mismatch", err)
	}

	// Whichever single key type known_hosts holds, the client asks for it.
	for _, key := range append([]ssh.PublicKey{s.HostKey}, s.ExtraHostKeys...) {
		t.Run(key.Type(), func(t *testing.T) {
			p := newPool(t, c, func(cfg *nodes.SSHConfig) {
				cfg.KnownHosts = []string{writeKnownHosts(t, string(sshdtest.KnownHostsLine(s.Addr, s.Port, key)))}
			})
			res, err := conn(t, p, s.Name).Run(context.Background(), "echo", "ok")
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Stdout) != "ok\n" {
				t.Errorf("Stdout = %q, want %q", res.Stdout, "ok\n")
			}
		})
	}
}

// serveAgent serves keyring on a new unix socket and returns its path.
func serveAgent(t *testing.T, keyring agent.Agent) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				agent.ServeAgent(keyring, c)
			}()
		}
	}()
	return sock
}

func TestAgentAuth(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1)
	data, err := os.ReadFile(c.IdentityFile)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ssh.ParseRawPrivateKey(data)
	if err != nil {
		t.Fatal(err)
	}
	withKey := agent.NewKeyring()
	if err := withKey.Add(agent.AddedKey{PrivateKey: key}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		keyring agent.Agent
		wantErr string
	}{
		{name: "key in agent", keyring: withKey},
		{name: "empty agent", keyring: agent.NewKeyring(), wantErr: "node1: ssh handshake with 127.0.0.1:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sock := serveAgent(t, tt.keyring)
			p := newPool(t, c, func(cfg *nodes.SSHConfig) {
				cfg.IdentityFiles = nil
				cfg.AgentSocket = sock
			})
			conn, err := p.Conn(context.Background(), "node1")
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "login as "+c.User+" refused") {
					t.Fatalf("Conn: err = %v, want %q and the login refused", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Run(context.Background(), "true"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestNewPoolErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := filepath.Join(dir, "id")
	writeEncryptedKey(t, key)
	knownHosts := writeKnownHosts(t, "")
	inv, err := nodes.NewInventory("node1", []nodes.Node{{Name: "node1"}, {Name: "node2"}})
	if err != nil {
		t.Fatal(err)
	}
	plainKey := filepath.Join(dir, "plain")
	writePlainKey(t, plainKey)
	base := nodes.SSHConfig{User: "root", IdentityFiles: []string{plainKey}, KnownHosts: []string{knownHosts}}
	// Copies of the key and of known_hosts that others could read or edit.
	withMode := func(src, name string, mode os.FileMode) string {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	openKey := withMode(plainKey, "key-0644", 0o644)
	groupKey := withMode(plainKey, "key-0640", 0o640)
	openHosts := withMode(knownHosts, "hosts-0666", 0o666)
	groupHosts := withMode(knownHosts, "hosts-0664", 0o664)
	fifo := filepath.Join(dir, "hosts-fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	otherKey := withMode(plainKey, "key-nobody", 0o600)
	otherHosts := withMode(knownHosts, "hosts-nobody", 0o644)
	ownedByOthers := os.Geteuid() == 0
	if ownedByOthers {
		for _, f := range []string{otherKey, otherHosts} {
			if err := os.Chown(f, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name     string
		edit     func(*nodes.SSHConfig)
		wantErr  string
		needRoot bool
	}{
		{name: "valid", edit: func(*nodes.SSHConfig) {}},
		{name: "missing identity file", edit: func(c *nodes.SSHConfig) { c.IdentityFiles = []string{dir + "/nope"} }, wantErr: dir + "/nope"},
		{name: "encrypted identity file", edit: func(c *nodes.SSHConfig) { c.IdentityFiles = []string{key} }, wantErr: key + ": the key is encrypted"},
		{name: "no known_hosts file exists", edit: func(c *nodes.SSHConfig) { c.KnownHosts = []string{dir + "/a", dir + "/b"} },
			wantErr: "none of the known_hosts files exists (" + dir + "/a, " + dir + "/b)"},
		{name: "agent socket missing", edit: func(c *nodes.SSHConfig) { c.AgentSocket = dir + "/agent.sock" }, wantErr: "ssh-agent " + dir + "/agent.sock"},
		{name: "no user", edit: func(c *nodes.SSHConfig) { c.User = "" }, wantErr: "no ssh user configured"},
		{name: "nothing to log in with", edit: func(c *nodes.SSHConfig) { c.IdentityFiles = nil }, wantErr: "no identity files and no ssh-agent"},
		{name: "identity file readable by others", edit: func(c *nodes.SSHConfig) { c.IdentityFiles = []string{openKey} },
			wantErr: "identity file " + openKey + " is accessible by group or others (mode 0644)"},
		{name: "identity file readable by group", edit: func(c *nodes.SSHConfig) { c.IdentityFiles = []string{groupKey} },
			wantErr: "identity file " + groupKey + " is accessible by group or others (mode 0640)"},
		{name: "known_hosts writable by others", edit: func(c *nodes.SSHConfig) { c.KnownHosts = []string{openHosts} },
			wantErr: "known_hosts " + openHosts + " is writable by group or others (mode 0666)"},
		{name: "known_hosts writable by group", edit: func(c *nodes.SSHConfig) { c.KnownHosts = []string{dir + "/missing", groupHosts} },
			wantErr: "known_hosts " + groupHosts + " is writable by group or others (mode 0664)"},
		{name: "known_hosts a fifo", edit: func(c *nodes.SSHConfig) { c.KnownHosts = []string{fifo} },
			wantErr: "known_hosts " + fifo + " is not a regular file"},
		{name: "identity file of another user", edit: func(c *nodes.SSHConfig) { c.IdentityFiles = []string{otherKey} },
			wantErr: "identity file " + otherKey + " is owned by uid 65534, not by root", needRoot: true},
		{name: "known_hosts of another user", edit: func(c *nodes.SSHConfig) { c.KnownHosts = []string{otherHosts} },
			wantErr: "known_hosts " + otherHosts + " is owned by uid 65534, not by root", needRoot: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.needRoot && !ownedByOthers {
				if os.Getenv("CI") == "true" {
					t.Fatal("a file owned by another user needs the tests to run as root")
				}
				t.Skip("a file owned by another user needs the tests to run as root")
			}
			cfg := base
			tt.edit(&cfg)
			p, err := nodes.NewPool(inv, cfg)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				p.Close()
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("NewPool: err = %v, want %q", err, tt.wantErr)
			}
		})
	}

	t.Run("master alone needs no ssh settings", func(t *testing.T) {
		inv, err := nodes.NewInventory("solo", []nodes.Node{{Name: "solo"}})
		if err != nil {
			t.Fatal(err)
		}
		p, err := nodes.NewPool(inv, nodes.SSHConfig{})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		c, err := p.Conn(context.Background(), "solo")
		if err != nil || !c.Local() {
			t.Fatalf("Conn(solo) = %v, %v; want the local connection", c, err)
		}
	})
}

func writePlainKey(t *testing.T, file string) {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, file, block)
}

func writeEncryptedKey(t *testing.T, file string) {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, file, block)
}

func TestPoolConn(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 2)
	p := newPool(t, c, nil)

	// Concurrent callers share one connection per node.
	const callers = 20
	got := make([]*nodes.Conn, callers)
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = conn(t, p, "node1")
		}()
	}
	wg.Wait()
	for i, g := range got {
		if g != got[0] {
			t.Fatalf("caller %d got another connection than caller 0", i)
		}
	}
	if n := logins(c.Servers[0]); n != 1 {
		t.Errorf("node1 accepted %d logins, want 1", n)
	}
	if got[0].Node() != "node1" || got[0].Local() {
		t.Errorf("Conn(node1): Node() = %q, Local() = %v; want node1, false", got[0].Node(), got[0].Local())
	}
	if m := conn(t, p, localMaster); !m.Local() {
		t.Errorf("Conn(%s).Local() = false, want true for the master", localMaster)
	}

	if _, err := p.Conn(context.Background(), "node9"); err == nil || !strings.Contains(err.Error(), "node9: not in the inventory") {
		t.Errorf("Conn(node9): err = %v, want it to say node9 is not in the inventory", err)
	}

	// Commands and SFTP share the connection; more commands at once than
	// sshd's default MaxSessions (10) still all run.
	c1 := got[0]
	errs := make(chan error, 40)
	for i := 0; i < 30; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c1.Run(context.Background(), "sh", "-c", "sleep 0.2; echo "+strconv.Itoa(i))
			if err == nil && string(res.Stdout) != strconv.Itoa(i)+"\n" {
				err = errors.New("unexpected stdout " + string(res.Stdout))
			}
			errs <- err
		}()
	}
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c1.Stat("/")
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := logins(c.Servers[0]); n != 1 {
		t.Errorf("node1 accepted %d logins after commands and SFTP, want 1", n)
	}

	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := c1.Run(context.Background(), "true"); err == nil {
		t.Error("Run after Close: err = nil, want an error")
	}
	if _, err := p.Conn(context.Background(), "node2"); err == nil || !strings.Contains(err.Error(), "pool is closed") {
		t.Errorf("Conn after Close: err = %v, want pool is closed", err)
	}
}

func writePEM(t *testing.T, file string, block *pem.Block) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
}
