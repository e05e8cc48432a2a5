package nodes_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/nodes/sshdtest"
)

// offlineHint is how the error of a node that cannot be reached at all ends.
func offlineHint(node string) string {
	return "; if the node is down for long, mark it offline = true in the node list (or in what nodes_command prints) and bring it back later with 'cutover sync " + node + "'"
}

// TestUnreachableNode: a node whose name does not resolve, or where nothing listens on the
// SSH port, fails with an error that names the node and its address and ends with the next
// step, while errors.Is and errors.As still see the cause.
func TestUnreachableNode(t *testing.T) {
	t.Parallel()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()

	key := randomKey(t)
	const unresolved = "node3.invalid" // RFC 6761: never resolves
	kh := writeKnownHosts(t,
		string(sshdtest.KnownHostsLine(unresolved, 22, key)),
		string(sshdtest.KnownHostsLine("127.0.0.1", closedPort, key)))
	idFile := filepath.Join(t.TempDir(), "id")
	writePlainKey(t, idFile)
	inv, err := nodes.NewInventory(localMaster, []nodes.Node{
		{Name: localMaster},
		{Name: "node3", Address: unresolved, Port: 22},
		{Name: "node4", Address: "127.0.0.1", Port: closedPort},
		{Name: "node5", Address: "127.0.0.1", Port: closedPort, Offline: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := nodes.NewPool(inv, nodes.SSHConfig{User: "root", IdentityFiles: []string{idFile}, KnownHosts: []string{kh}, ConnectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	port := strconv.Itoa(closedPort)

	tests := []struct {
		node, prefix, suffix string
		is                   func(error) bool
	}{
		{"node3", "node3: dial node3.invalid:22: ", offlineHint("node3"), func(err error) bool {
			var dns *net.DNSError
			return errors.As(err, &dns) && dns.Name == unresolved || nodes.IsTimeout(err)
		}},
		{"node4", "node4: dial 127.0.0.1:" + port + ": connect: connection refused", offlineHint("node4"), func(err error) bool {
			return errors.Is(err, syscall.ECONNREFUSED) && !nodes.IsTimeout(err)
		}},
		{"node5", "node5: dial 127.0.0.1:" + port + ": connect: connection refused",
			"; the node is marked offline; once it answers, bring it back with 'cutover sync node5'", func(err error) bool {
				return errors.Is(err, syscall.ECONNREFUSED)
			}},
	}
	for _, tt := range tests {
		_, err := p.Conn(context.Background(), tt.node)
		if err == nil {
			t.Fatalf("Conn(%s) succeeded, want an error", tt.node)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, tt.prefix) || !strings.HasSuffix(msg, tt.suffix) || strings.Contains(msg, "\n") {
			t.Errorf("Conn(%s) = %q, want one line starting %q and ending %q", tt.node, msg, tt.prefix, tt.suffix)
		}
		if !tt.is(err) || !nodes.IsUnreachable(err) || nodes.IsHostKeyMismatch(err) {
			t.Errorf("Conn(%s) = %v: errors.Is/As lost the cause, or IsUnreachable is false", tt.node, err)
		}
	}
	// The resolver's address is left out of a failed lookup.
	if _, err := p.Conn(context.Background(), "node3"); err != nil && strings.Contains(err.Error(), " on ") {
		t.Errorf("Conn(node3) = %v, want the lookup without the resolver's address", err)
	}

	// A cancelled connect is the operator's doing: no hint.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Conn(ctx, "node4"); err == nil || strings.Contains(err.Error(), "offline") || nodes.IsUnreachable(err) {
		t.Errorf("Conn(cancelled) = %v, want an error without the offline hint", err)
	}
}

// TestUnreachableGolden keeps the whole message an operator reads for a node where nothing
// listens, with its port written PORT.
//
//	go test ./nodes/ -run TestUnreachableGolden -update
func TestUnreachableGolden(t *testing.T) {
	t.Parallel()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	kh := writeKnownHosts(t, string(sshdtest.KnownHostsLine("127.0.0.1", port, randomKey(t))))
	idFile := filepath.Join(t.TempDir(), "id")
	writePlainKey(t, idFile)
	inv, err := nodes.NewInventory(localMaster, []nodes.Node{{Name: localMaster}, {Name: "node3", Address: "127.0.0.1", Port: port}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := nodes.NewPool(inv, nodes.SSHConfig{User: "root", IdentityFiles: []string{idFile}, KnownHosts: []string{kh}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	_, err = p.Conn(context.Background(), "node3")
	if err == nil {
		t.Fatal("Conn(node3) succeeded, want an error")
	}
	got := strings.ReplaceAll(err.Error(), ":"+strconv.Itoa(port), ":PORT") + "\n"
	golden := filepath.Join("testdata", "unreachable.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("Conn(node3) error =\n%s\nwant (%s)\n%s", got, golden, want)
	}
}

// TestRefusedNodeKeepsItsMessage: a host key that does not match and a login that is refused
// are not an unreachable node, and their errors say nothing of marking it offline.
func TestRefusedNodeKeepsItsMessage(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1)
	s := c.Servers[0]
	inv, err := nodes.NewInventory(localMaster, []nodes.Node{{Name: localMaster}, {Name: s.Name, Address: s.Addr, Port: s.Port}})
	if err != nil {
		t.Fatal(err)
	}
	otherID := filepath.Join(t.TempDir(), "id")
	writePlainKey(t, otherID)
	tests := []struct {
		name string
		edit func(*nodes.SSHConfig)
		want string
		is   func(error) bool
	}{
		{"host key mismatch", func(cfg *nodes.SSHConfig) {
			cfg.KnownHosts = []string{writeKnownHosts(t, string(sshdtest.KnownHostsLine(s.Addr, s.Port, randomKey(t))))}
		}, "does not match known_hosts", nodes.IsHostKeyMismatch},
		{"login refused", func(cfg *nodes.SSHConfig) { cfg.IdentityFiles = []string{otherID} },
			"login as " + c.User + " refused", func(err error) bool { return !nodes.IsHostKeyMismatch(err) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := sshConfig(c)
			tt.edit(&cfg)
			p, err := nodes.NewPool(inv, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			_, err = p.Conn(context.Background(), s.Name)
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "offline") || !tt.is(err) || nodes.IsUnreachable(err) {
				t.Errorf("Conn(%s) = %v, want %q without the offline hint", s.Name, err, tt.want)
			}
		})
	}
}
