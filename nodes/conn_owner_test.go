package nodes_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
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

// recordDirOf returns the directory where c's login keeps records.
func recordDirOf(t *testing.T, c *sshdtest.Cluster) string {
	t.Helper()
	if c.User == "root" {
		return nodes.RootRecordDir
	}
	u, err := user.Lookup(c.User)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(u.HomeDir, ".cutover", "cmd")
}

// connRecords returns the pids of the connection records of owner in dir, by record file.
func connRecords(t *testing.T, dir, owner string) map[string]int {
	t.Helper()
	out := map[string]int{}
	files, _ := filepath.Glob(filepath.Join(dir, ".conn."+owner+".*"))
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

// processRuns reports whether pid is a process that has not exited: a zombie, which its
// parent has not waited for yet, has.
func processRuns(pid int) bool {
	f, ok := statFields(strconv.Itoa(pid))
	return ok && f[0] != "Z" && f[0] != "X"
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
	for _, login := range []struct {
		name string
		opts []sshdtest.Option
	}{{"root", []sshdtest.Option{sshdtest.WithRootLogin()}}, {"test login", nil}} {
		t.Run(login.name, func(t *testing.T) {
			t.Parallel()
			newerConnectionEndsOlder(t, sshdtest.Start(t, 1, login.opts...))
		})
	}
}

// newerConnectionEndsOlder is TestNewerConnectionEndsOlder with c's login.
func newerConnectionEndsOlder(t *testing.T, c *sshdtest.Cluster) {
	s := c.Servers[0]
	dir := c.UserDir(t)
	records := recordDirOf(t, c)
	owner := fmt.Sprintf("test-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		for f := range connRecords(t, records, owner) {
			os.Remove(f)
		}
	})

	old := conn(t, ownedPool(t, c, owner+"-run-1", owner), s.Name)
	if err := old.WriteFileAtomic(filepath.Join(dir, "first"), []byte("1"), 0o600); err != nil {
		t.Fatal(err)
	}
	recs := connRecords(t, records, owner)
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

	// A record of a week ago, of a master long gone, is removed by the same reap; a fresh one
	// of another master stays.
	stale := filepath.Join(records, ".conn."+owner+"-gone.0123456789abcdef")
	fresh := filepath.Join(records, ".conn."+owner+"-other.0123456789abcdef")
	for _, f := range []string{stale, fresh} {
		if err := os.WriteFile(f, []byte("1234 5678 boot node9\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(f) })
	}
	weekAgo := time.Now().Add(-8 * 24 * time.Hour)
	if err := os.Chtimes(stale, weekAgo, weekAgo); err != nil {
		t.Fatal(err)
	}

	newer := conn(t, ownedPool(t, c, owner+"-run-2", owner), s.Name)
	if err := newer.WriteFileAtomic(filepath.Join(dir, "second"), []byte("2"), 0o600); err != nil {
		t.Fatalf("the newer connection's write: %v", err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a connection record of a week ago is still there after a reap: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("another master's fresh connection record: %v, want it left alone", err)
	}
	gone := !processRuns(oldSSHD)
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
	recs = connRecords(t, records, owner)
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
		for f := range connRecords(t, records, owner+"-x") {
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
