package demoapp

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testNode is one demo node installed in a temporary root on this host, whose programs run
// with DEMOAPP_ROOT pointing at it.
type testNode struct {
	t    *testing.T
	name string
	root string
	live string
	env  []string
}

// newTestNode stages spec into a temporary root and prepares to run its programs as node
// spec.Name, listening on addr:port.
func newTestNode(t *testing.T, spec NodeSpec, addr string, port int) *testNode {
	t.Helper()
	root := t.TempDir()
	if err := Stage(root, testBins, spec); err != nil {
		t.Fatal(err)
	}
	live := spec.Live
	if live == "" {
		live = Versions[0]
	}
	n := &testNode{t: t, name: spec.Name, root: root, live: live, env: append(os.Environ(),
		"DEMOAPP_ROOT="+root,
		"DEMOAPP_NODE="+spec.Name,
		"DEMOAPP_ADDR="+addr,
		"DEMOAPP_PORT="+strconv.Itoa(port),
	)}
	t.Cleanup(n.kill)
	return n
}

// run runs the live version's program with args.
func (n *testNode) run(args ...string) (stdout, stderr string, code int) {
	n.t.Helper()
	return n.runVersion(n.live, args...)
}

// runVersion runs version v's program with args and returns its output and exit code.
func (n *testNode) runVersion(v string, args ...string) (stdout, stderr string, code int) {
	n.t.Helper()
	var out, errOut bytes.Buffer
	var err error
	// A program staged a moment ago can be "text file busy" for as long as a child that
	// another test forked meanwhile still holds the copy's descriptor: retry then.
	for try := 0; ; try++ {
		out.Reset()
		errOut.Reset()
		cmd := n.command(v, args...)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err = cmd.Run()
		if !errors.Is(err, syscall.ETXTBSY) || try == 50 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		n.t.Fatalf("%s: run demoapp %v: %v", n.name, args, err)
	}
	return out.String(), errOut.String(), code
}

// command returns the command that runs version v's program with args.
func (n *testNode) command(v string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(n.root, "usr/lib/demoapp", v, "usr/sbin/demoapp"), args...)
	cmd.Env = n.env
	return cmd
}

// must runs args with the live version and fails the test unless it exits 0.
func (n *testNode) must(args ...string) string {
	n.t.Helper()
	out, errOut, code := n.run(args...)
	if code != 0 {
		n.t.Fatalf("%s: demoapp %s: exit %d, stderr %q", n.name, strings.Join(args, " "), code, errOut)
	}
	return out
}

// path returns where the node path p is.
func (n *testNode) path(p string) string { return filepath.Join(n.root, p) }

// pid returns the pid in the daemon's pid file, 0 if none.
func (n *testNode) pid() int {
	data, err := os.ReadFile(n.path("run/demoapp/demoapp.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}

// kill stops the node's daemon, by SIGKILL if "daemon stop" does not.
func (n *testNode) kill() {
	pid := n.pid()
	if pid == 0 {
		return
	}
	_ = n.command(n.live, "daemon", "stop").Run()
	if processAlive(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// processAlive reports whether pid runs and is not a zombie.
func processAlive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// jobStates returns "ID STATE" lines of the master's queue.
func (n *testNode) jobs() []string {
	n.t.Helper()
	return strings.Fields(strings.ReplaceAll(strings.TrimSpace(n.must("job", "list")), " ", ":"))
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freePort returns a TCP port free on every one of hosts at the moment.
func freePort(t *testing.T, hosts ...string) int {
	t.Helper()
	for range 20 {
		ln, err := net.Listen("tcp", net.JoinHostPort(hosts[0], "0"))
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ok := true
		for _, h := range hosts[1:] {
			other, err := net.Listen("tcp", net.JoinHostPort(h, strconv.Itoa(port)))
			if err != nil {
				ok = false
				break
			}
			other.Close()
		}
		ln.Close()
		if ok {
			return port
		}
	}
	t.Fatalf("no port free on all of %v", hosts)
	return 0
}

// singleNode returns a one-node cluster at 127.0.0.1 whose node is its master.
func singleNode(t *testing.T, live string) *testNode {
	t.Helper()
	spec := NodeSpec{Name: "node1", Master: "node1", Nodes: []NodeAddr{{"node1", "127.0.0.1"}}, Live: live}
	return newTestNode(t, spec, "127.0.0.1", freePort(t, "127.0.0.1"))
}
