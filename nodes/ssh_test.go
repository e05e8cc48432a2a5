package nodes_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/nodes/sshdtest"
)

func TestConnectErrors(t *testing.T) {
	t.Parallel()
	// A listener that accepts and never speaks: the handshake must time out.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	// A port nobody listens on.
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	silentPort := silent.Addr().(*net.TCPAddr).Port

	key := randomKey(t)
	kh := writeKnownHosts(t,
		string(sshdtest.KnownHostsLine("127.0.0.1", silentPort, key)),
		string(sshdtest.KnownHostsLine("127.0.0.1", closedPort, key)))
	idFile := filepath.Join(t.TempDir(), "id")
	writePlainKey(t, idFile)
	inv, err := nodes.NewInventory(localMaster, []nodes.Node{
		{Name: localMaster},
		{Name: "silent", Address: "127.0.0.1", Port: silentPort},
		{Name: "closed", Address: "127.0.0.1", Port: closedPort},
	})
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 400 * time.Millisecond
	p, err := nodes.NewPool(inv, nodes.SSHConfig{User: "root", IdentityFiles: []string{idFile}, KnownHosts: []string{kh}, ConnectTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	start := time.Now()
	_, err = p.Conn(context.Background(), "silent")
	took := time.Since(start)
	want := "silent: ssh handshake with 127.0.0.1:" + strconv.Itoa(silentPort) + ": connection timed out after 400ms"
	if err == nil || err.Error() != want {
		t.Errorf("Conn(silent): err = %v, want %q", err, want)
	}
	if !nodes.IsTimeout(err) {
		t.Errorf("IsTimeout(%v) = false, want true", err)
	}
	if took < timeout || took > timeout+5*time.Second {
		t.Errorf("Conn(silent) took %s, want about %s", took, timeout)
	}

	_, err = p.Conn(context.Background(), "closed")
	if err == nil || !strings.HasPrefix(err.Error(), "closed: dial 127.0.0.1:"+strconv.Itoa(closedPort)+": ") ||
		!strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Conn(closed): err = %v, want a refused dial naming the node and address", err)
	}
	if nodes.IsTimeout(err) {
		t.Errorf("IsTimeout(%v) = true, want false", err)
	}

	// A cancelled context stops the handshake long before the connect
	// timeout.
	slow, err := nodes.NewPool(inv, nodes.SSHConfig{User: "root", IdentityFiles: []string{idFile}, KnownHosts: []string{kh}, ConnectTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start = time.Now()
	_, err = slow.Conn(ctx, "silent")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Conn(silent) cancelled: err = %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("cancelled Conn took %s, want it to stop at the cancellation", took)
	}
}

// TestNodeDies kills a node's sshd (and the command it runs) mid-command: the
// command fails at once, and after sshd is back the pool dials again.
func TestNodeDies(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1)
	s := c.Servers[0]
	p := newPool(t, c, nil)
	first := conn(t, p, s.Name)

	done := runAsync(first, "sleep 30")
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	s.Kill(t)
	r := <-done
	res, err, took := r.res, r.err, time.Since(start)
	if err == nil {
		t.Fatal("err = nil, want the command to fail")
	}
	if took > 3*time.Second {
		t.Errorf("command failed after %s, want within a few seconds", took)
	}
	if _, ok := nodes.ExitCode(err); ok || res.ExitCode != -1 {
		t.Errorf("ExitCode = %d (err %v), want -1 and no exit", res.ExitCode, err)
	}
	if nodes.IsTimeout(err) {
		t.Errorf("IsTimeout(%v) = true, want false", err)
	}
	if !strings.HasPrefix(err.Error(), s.Name+`: run "sleep 30": `) {
		t.Errorf("err = %q, want it to name the node and command", err)
	}

	s.Restart(t)
	second := conn(t, p, s.Name)
	if second == first {
		t.Fatal("Conn after the node died returned the dead connection")
	}
	if _, err := second.Run(context.Background(), "true"); err != nil {
		t.Fatalf("command after redial: %v", err)
	}
}

// TestNodeVanishes freezes a node mid-command, as when it drops off the
// network: keepalives go unanswered, the connection is closed, the command
// fails, and the pool redials once the node answers again.
func TestNodeVanishes(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1)
	s := c.Servers[0]
	const interval, max = 300 * time.Millisecond, 3
	p := newPool(t, c, func(cfg *nodes.SSHConfig) {
		cfg.KeepaliveInterval, cfg.KeepaliveMax = interval, max
	})
	first := conn(t, p, s.Name)

	done := runAsync(first, "sleep 30")
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	s.Freeze(t)
	r := <-done
	err, took := r.err, time.Since(start)
	if err == nil {
		t.Fatal("err = nil, want the command to fail")
	}
	if limit := (max+2)*interval + 3*time.Second; took > limit {
		t.Errorf("command failed after %s, want within %s", took, limit)
	}
	if !strings.Contains(err.Error(), "keepalive") {
		t.Errorf("err = %q, want it to say nothing was heard for the keepalive bound", err)
	}
	if _, err := first.Stat("/"); err == nil {
		t.Error("Stat on the dead connection: err = nil, want an error")
	}

	s.Thaw(t)
	second := conn(t, p, s.Name)
	if second == first {
		t.Fatal("Conn after the node vanished returned the dead connection")
	}
	if _, err := second.Run(context.Background(), "true"); err != nil {
		t.Fatalf("command after redial: %v", err)
	}
}

// TestSlowNodeStaysConnected stops a node's sshd for most of every keepalive
// cycle, as a node swapping or saturated by I/O may be: it answers each
// keepalive, but later than one interval after it was asked, and never falls
// silent for the whole bound. The connection must stay up and a command
// spanning several such cycles must succeed on it.
func TestSlowNodeStaysConnected(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1)
	s := c.Servers[0]
	// Silent for 1.8 s of every 2 s: more than the 1 s interval, less than the 5
	// intervals a connection may go without hearing from its node, with room for a
	// busy machine's slow thaw.
	const interval, max = time.Second, 5
	const frozen, awake = 1800 * time.Millisecond, 200 * time.Millisecond
	p := newPool(t, c, func(cfg *nodes.SSHConfig) {
		cfg.KeepaliveInterval, cfg.KeepaliveMax = interval, max
	})
	cn := conn(t, p, s.Name)
	done := runAsync(cn, "sleep 10; echo finished")
	var r runResult
	for cycles := 0; ; cycles++ {
		s.Freeze(t)
		time.Sleep(frozen)
		s.Thaw(t)
		select {
		case r = <-done:
		case <-time.After(awake):
			continue
		}
		if cycles < 3 {
			t.Errorf("the command returned after %d cycles, want it to span at least 3", cycles)
		}
		break
	}
	if r.err != nil {
		t.Fatalf("command on a slow node: %v", r.err)
	}
	if got := string(r.res.Stdout); got != "finished\n" {
		t.Errorf("Stdout = %q, want %q", got, "finished\n")
	}
	if _, err := cn.Run(context.Background(), "true"); err != nil {
		t.Errorf("command after the slow spell on the same connection: %v", err)
	}
}

type runResult struct {
	res nodes.Result
	err error
}

// runAsync runs script on c in the background.
func runAsync(c *nodes.Conn, script string) <-chan runResult {
	done := make(chan runResult, 1)
	go func() {
		res, err := c.RunShell(context.Background(), script)
		done <- runResult{res, err}
	}()
	return done
}

// logins counts the logins a server has logged. The log is read as sshd
// writes it, so the count is taken once it has been stable for a moment.
func logins(s *sshdtest.Server) int {
	count := func() int { return strings.Count(s.Log(), "Accepted publickey") }
	n := count()
	for stable := 0; stable < 3; {
		time.Sleep(50 * time.Millisecond)
		if m := count(); m != n {
			n, stable = m, 0
			continue
		}
		stable++
	}
	return n
}

// TestEachOverSSH fans a command out over real nodes, one of them down: the
// others succeed, the error names only the failed node, and the master,
// reached locally, runs last.
func TestEachOverSSH(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 4)
	c.Servers[2].Kill(t) // node3
	p := newPool(t, c, nil)
	list := clusterNodes(c)
	var order []string
	var mu sync.Mutex
	outcomes, err := nodes.Each(context.Background(), list, 2, localMaster, func(ctx context.Context, n nodes.Node) error {
		conn, err := p.Conn(ctx, n.Name)
		if err != nil {
			return err
		}
		_, err = conn.Run(ctx, "true")
		mu.Lock()
		order = append(order, n.Name)
		mu.Unlock()
		return err
	})
	if err == nil || !strings.HasPrefix(err.Error(), "node3: dial 127.0.0.1:") || strings.Contains(err.Error(), "\n") {
		t.Errorf("err = %v, want one error, naming node3's failed dial", err)
	}
	for i, o := range outcomes {
		if o.Node != list[i].Name {
			t.Errorf("outcome %d is %s, want %s", i, o.Node, list[i].Name)
		}
		if (o.Err != nil) != (o.Node == "node3") {
			t.Errorf("%s: Err = %v, want failure only for node3", o.Node, o.Err)
		}
	}
	if len(order) == 0 || order[len(order)-1] != localMaster {
		t.Errorf("completion order %v, want %s last", order, localMaster)
	}
}
