package nodes_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
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

// ownedPool returns a pool for c whose commands are tagged tag and whose connections belong
// to owner.
func ownedPool(t *testing.T, c *sshdtest.Cluster, tag, owner string) *nodes.Pool {
	t.Helper()
	p := newPool(t, c, nil)
	if err := p.SetCommandTag(tag); err != nil {
		t.Fatal(err)
	}
	if err := p.SetConnectionOwner(owner); err != nil {
		t.Fatal(err)
	}
	return p
}

// connRecords returns the pids of the connection records of owner on this host, root's and
// the login's, by record file.
func connRecords(t *testing.T, owner string) map[string]int {
	t.Helper()
	out := map[string]int{}
	home, _ := os.UserHomeDir()
	var files []string
	for _, dir := range []string{"/run/cutover/cmd", filepath.Join(home, ".cutover/cmd")} {
		m, _ := filepath.Glob(filepath.Join(dir, ".conn."+owner+".*"))
		files = append(files, m...)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.Fields(string(data))[0])
		if err != nil {
			t.Fatalf("connection record %s: %q", f, data)
		}
		out[f] = pid
	}
	return out
}

// processComm returns the command name of pid, or "" when it is gone.
func processComm(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// TestNewerConnectionEndsOlder: a connection that cutover gave up may still deliver an SFTP
// request once the node hears it again (a held packet), and SFTP requests carry no fence. The
// newer connection of the same owner ends the older one on the node's side as it starts
// working, so the request never acts: node's sshd serving the old connection is stopped (as
// if its packets were held) with an SFTP write on its way, a second pool of the same owner
// (another run of the same master: another tag) changes a file there, and the old write must
// never happen, the old connection's sshd must be gone and the new one must work. A pool of
// another owner leaves the connection alone.
func TestNewerConnectionEndsOlder(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1)
	s := c.Servers[0]
	dir := c.UserDir(t)
	owner := fmt.Sprintf("test-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		for f := range connRecords(t, owner) {
			os.Remove(f)
		}
	})

	old := conn(t, ownedPool(t, c, owner+"-run-1", owner), s.Name)
	if err := old.WriteFileAtomic(filepath.Join(dir, "first"), []byte("1"), 0o600); err != nil {
		t.Fatal(err)
	}
	recs := connRecords(t, owner)
	if len(recs) != 1 {
		t.Fatalf("after the first connection's write: connection records %v, want one", recs)
	}
	var oldSSHD int
	for _, pid := range recs {
		oldSSHD = pid
	}
	if comm := processComm(oldSSHD); comm != "sshd" && comm != "sshd-session" {
		t.Fatalf("the connection record names pid %d (%q), want the connection's sshd", oldSSHD, comm)
	}

	// The old connection's sshd hears nothing more: its requests wait, as held packets do.
	if err := syscall.Kill(oldSSHD, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	late := filepath.Join(dir, "late")
	lateDone := make(chan error, 1)
	go func() { lateDone <- old.WriteFileAtomic(late, []byte("late"), 0o600) }()
	time.Sleep(500 * time.Millisecond)

	newer := conn(t, ownedPool(t, c, owner+"-run-2", owner), s.Name)
	if err := newer.WriteFileAtomic(filepath.Join(dir, "second"), []byte("2"), 0o600); err != nil {
		t.Fatalf("the newer connection's write: %v", err)
	}
	gone := processComm(oldSSHD) == ""
	// The network heals: whatever of the old connection is still there hears its requests.
	syscall.Kill(oldSSHD, syscall.SIGCONT)
	select {
	case err := <-lateDone:
		if err == nil {
			t.Error("the old connection's write succeeded after a newer connection took over")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the old connection's write still waits 30 s after a newer connection took over")
	}
	time.Sleep(500 * time.Millisecond)
	if _, err := os.Stat(late); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the old connection's late write acted: %s: %v", late, err)
	}
	if !gone {
		t.Errorf("the old connection's sshd %d still ran after the newer connection's first write", oldSSHD)
	}
	recs = connRecords(t, owner)
	if len(recs) != 1 {
		t.Errorf("connection records %v, want the newer one's alone", recs)
	}
	for _, pid := range recs {
		if pid == oldSSHD {
			t.Errorf("the old connection's record is still there")
		}
	}

	// Another owner's connection to the node leaves this one alone.
	other := conn(t, ownedPool(t, c, owner+"-x-run-1", owner+"-x"), s.Name)
	t.Cleanup(func() {
		for f := range connRecords(t, owner+"-x") {
			os.Remove(f)
		}
	})
	if err := other.WriteFileAtomic(filepath.Join(dir, "third"), []byte("3"), 0o600); err != nil {
		t.Fatal(err)
	}
	if res, err := newer.Run(context.Background(), "echo", "alive"); err != nil || string(res.Stdout) != "alive\n" {
		t.Errorf("the newer connection after another owner's reap: %q, %v; want it working", res.Stdout, err)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "second")); err != nil || string(data) != "2" {
		t.Errorf("second: %q, %v", data, err)
	}
}
