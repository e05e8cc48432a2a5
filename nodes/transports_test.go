package nodes_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/nodes/sshdtest"
)

// watchdogTransport is one way the tests reach a node.
type watchdogTransport struct {
	name    string
	cluster *sshdtest.Cluster // the servers whose SSH settings the pool gets
	node    string            // the node to run commands on
	plain   bool              // a session per command instead of the command shell
}

// pool returns a pool for the transport's cluster, with edit applied to its settings.
func (tr watchdogTransport) pool(t *testing.T, edit func(*nodes.SSHConfig)) *nodes.Pool {
	t.Helper()
	p := newPool(t, tr.cluster, edit)
	if tr.plain {
		nodes.NoCommandShell(p)
	}
	return p
}

// shell reports whether the transport's commands run in a command shell.
func (tr watchdogTransport) shell() bool { return tr.node != localMaster && !tr.plain }

// login is the user the transport's commands run as.
func (tr watchdogTransport) login() string {
	if tr.node == localMaster {
		u, err := user.Current()
		if err != nil {
			return ""
		}
		return u.Username
	}
	return tr.cluster.User
}

// recordDir is the directory where the transport's login keeps records.
func (tr watchdogTransport) recordDir(t *testing.T) string {
	t.Helper()
	name := tr.login()
	if name == "root" {
		return nodes.RootRecordDir
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(u.HomeDir, ".cutover", "cmd")
}

// watchdogTransports starts the servers the tests need and returns the
// local connection, SSH as the test login and SSH as root (the login
// cutover uses by default, whose commands sshd refuses to signal), and a
// directory every one of them may write.
func watchdogTransports(t *testing.T) ([]watchdogTransport, string) {
	t.Helper()
	c := sshdtest.Start(t, 1)
	root := sshdtest.Start(t, 1, sshdtest.WithRootLogin())
	return []watchdogTransport{
		{name: "local", cluster: c, node: localMaster},
		{name: "ssh", cluster: c, node: "node1"},
		{name: "ssh-root", cluster: root, node: "node1"},
		{name: "ssh-session", cluster: c, node: "node1", plain: true},
		{name: "ssh-root-session", cluster: root, node: "node1", plain: true},
	}, c.UserDir(t)
}

var uniqueCount atomic.Int64

// uniqueSleep returns a sleep duration of about 30s that no other command
// uses, to find a command's processes by.
func uniqueSleep() string {
	return fmt.Sprintf("30.%d%05d", os.Getpid(), uniqueCount.Add(1))
}

// uniqueTag returns a command tag no other test uses.
func uniqueTag() string {
	return fmt.Sprintf("test-%d-%d", os.Getpid(), uniqueCount.Add(1))
}

// slowScript returns a command that forks, sleeps for s twice over and then
// touches mark, which therefore never exists if the command is killed.
func slowScript(s, mark string) string {
	return fmt.Sprintf("sleep %s & sleep %s; touch %s", s, s, nodes.Quote(mark))
}

// waitRunning waits until both sleeps of the command sleeping s run, and
// reports whether they did before stop was closed or 15s passed.
func waitRunning(t *testing.T, s string, stop <-chan struct{}) bool {
	deadline := time.After(15 * time.Second)
	for {
		if len(processesWith(t, "sleep\x00"+s)) >= 2 {
			return true
		}
		select {
		case <-stop:
			return len(processesWith(t, "sleep\x00"+s)) >= 2
		case <-deadline:
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// assertKilled fails unless no process of the command sleeping s remains
// (within a few seconds) and mark was never written. With every process
// gone, nothing can write mark later.
func assertKilled(t *testing.T, s, mark string) {
	t.Helper()
	waitNoProcess(t, s)
	if _, err := os.Stat(mark); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s exists (err %v): the command ran to its end", mark, err)
	}
}

// assertNoRecords fails if any record of tag is left in dir.
func assertNoRecords(t *testing.T, dir, tag string) {
	t.Helper()
	// Records end in a number; the tag's fence file stays (see fenceScript).
	if left, _ := filepath.Glob(filepath.Join(dir, tag+".[0-9]*")); len(left) > 0 {
		t.Errorf("records left behind: %v", left)
	}
}

// waitNoRecords fails unless, within a few seconds, no record of tag is
// left in dir.
func waitNoRecords(t *testing.T, dir, tag string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if left, _ := filepath.Glob(filepath.Join(dir, tag+".[0-9]*")); len(left) == 0 {
			return
		}
	}
	assertNoRecords(t, dir, tag)
}
