package nodes_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/nodes/sshdtest"
)

// localConn returns a connection to the local master of a pool that has no other node.
func localConn(t *testing.T) *nodes.Conn {
	t.Helper()
	inv, err := nodes.NewInventory(localMaster, []nodes.Node{{Name: localMaster}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := nodes.NewPool(inv, nodes.SSHConfig{CommandTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return conn(t, p, localMaster)
}

// procStat returns the process group and start time (field 22) of pid.
func procStat(t *testing.T, pid int) (pgid, start string) {
	t.Helper()
	fields, ok := statFields(strconv.Itoa(pid))
	if !ok {
		t.Fatalf("process %d: no readable /proc/%d/stat", pid, pid)
	}
	return fields[2], fields[19]
}

// bootID returns the kernel's boot id.
func bootID(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// commandRecord is a command record as the watchdog writes it into dir, for the
// process group of pid; start replaces the process's start time when not empty.
type commandRecord struct {
	dir, tag, node string
	pid            int
	start          string
}

// write writes the record and returns its path.
func (r commandRecord) write(t *testing.T) string {
	t.Helper()
	dir, tag, node, pid, start := r.dir, r.tag, r.node, r.pid, r.start
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	pgid, realStart := procStat(t, pid)
	if start == "" {
		start = realStart
	}
	file := filepath.Join(dir, fmt.Sprintf("%s.%d", tag, pid))
	line := fmt.Sprintf("%s %d %s %s %s\n", pgid, pid, start, bootID(t), node)
	if err := os.WriteFile(file, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(file) })
	return file
}

// startGroup starts the slow command in a process group of its own, as a
// command that its execution left behind, and kills the group when t ends.
func startGroup(t *testing.T, s, mark string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", slowScript(s, mark))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	if !waitRunning(t, s, nil) {
		t.Fatal("the left-behind command did not start")
	}
	return cmd
}

// TestReapLocal leaves commands behind as a dead execution would (a
// running process group and its record): the first command of a pool with
// the same tag kills the group and removes the record, and leaves alone what
// other tags and other nodes recorded and a process whose pid was reused.
func TestReapLocal(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1)
	dir, workDir := nodes.RootRecordDir, t.TempDir()
	tag, otherTag := uniqueTag(), uniqueTag()

	s, mark := uniqueSleep(), filepath.Join(workDir, "mark")
	victim := startGroup(t, s, mark)
	victimRecord := commandRecord{dir: dir, tag: tag, node: localMaster, pid: victim.Process.Pid}.write(t)

	bs := uniqueSleep()
	bystander := startGroup(t, bs, filepath.Join(workDir, "bystander"))
	otherTagRecord := commandRecord{dir: dir, tag: otherTag, node: localMaster, pid: bystander.Process.Pid}.write(t)
	// Record files are named by pid: the other node's record names a child
	// of the bystander, in the same process group.
	child, err := strconv.Atoi(processesWith(t, "sleep\x00"+bs)[0])
	if err != nil {
		t.Fatal(err)
	}
	otherNodeRecord := commandRecord{dir: dir, tag: tag, node: "node9", pid: child}.write(t)
	reusedRecord := commandRecord{dir: dir, tag: tag, node: localMaster, pid: bystander.Process.Pid, start: "1"}.write(t)

	p := newPool(t, c, nil)
	if err := p.SetCommandTag(tag); err != nil {
		t.Fatal(err)
	}
	if _, err := conn(t, p, localMaster).Run(context.Background(), "true"); err != nil {
		t.Fatal(err)
	}

	assertKilled(t, s, mark)
	if err := victim.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the left-behind command ended with %v, want killed", err)
	}
	for _, f := range []string{victimRecord, reusedRecord} {
		if _, err := os.Stat(f); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("record %s still there (err %v), want it removed", f, err)
		}
	}
	for _, f := range []string{otherTagRecord, otherNodeRecord} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("record %s: %v, want it left alone", f, err)
		}
	}
	if n := len(processesWith(t, "sleep\x00"+bs)); n != 2 {
		t.Errorf("%d processes of the bystander run, want its 2 sleeps left alone", n)
	}
}

// TestReapSSH leaves a command running on a node as an execution cut off
// from it would: its watcher is frozen, so the end of the connection does
// not stop it. The first command of a new pool with the same tag kills it.
func TestReapSSH(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1, sshdtest.WithRootLogin())
	for _, plain := range []bool{false, true} {
		name := "command-shell"
		if plain {
			name = "session"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			reapSSH(t, c, plain)
		})
	}
}

// reapSSH leaves a command behind on c's node, its watcher stopped as on a node that never sees
// the connection end, and checks that the next pool of the same tag kills it before its first
// command; with plain, every command has a session of its own.
func reapSSH(t *testing.T, c *sshdtest.Cluster, plain bool) {
	tag := uniqueTag()
	s, mark := uniqueSleep(), filepath.Join(t.TempDir(), "mark")
	tagPool := func() *nodes.Pool {
		p := watchdogTransport{cluster: c, node: "node1", plain: plain}.pool(t, nil)
		if err := p.SetCommandTag(tag); err != nil {
			t.Fatal(err)
		}
		return p
	}

	first := tagPool()
	done := runAsync(conn(t, first, "node1"), slowScript(s, mark))
	if !waitRunning(t, s, nil) {
		t.Fatal("the command did not start")
	}
	var watcher int
	if plain {
		// The watcher is a fork of the watchdog, whose arguments end with the
		// mode, the tag and the node; the watchdog itself became the command.
		watchers := processesWith(t, "\x00ssh\x00"+tag+"\x00node1\x00")
		if len(watchers) != 1 {
			t.Fatalf("%d watchers of tag %s, want 1", len(watchers), tag)
		}
		watcher, _ = strconv.Atoi(watchers[0])
	} else {
		// A command shell's record names the command's watcher second.
		files, _ := filepath.Glob(filepath.Join(nodes.RootRecordDir, tag+".[0-9]*"))
		if len(files) != 1 {
			t.Fatalf("records of tag %s: %v, want the shell's one", tag, files)
		}
		data, err := os.ReadFile(files[0])
		if f := strings.Fields(string(data)); err != nil || len(f) != 5 {
			t.Fatalf("record %s: %q, %v", files[0], data, err)
		} else {
			watcher, _ = strconv.Atoi(f[1])
		}
	}
	// Through a pidfd: the reap below kills the watcher, and by the end of the
	// test another process may have its id.
	fd, err := unix.PidfdOpen(watcher, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		unix.Close(fd)
	})
	if err := unix.PidfdSendSignal(fd, unix.SIGSTOP, nil, 0); err != nil {
		t.Fatal(err)
	}
	first.Close()
	if r := <-done; r.err == nil {
		t.Fatal("the command succeeded after its pool was closed")
	}
	// Give sshd a moment to tidy up the connection: the command must stay.
	time.Sleep(200 * time.Millisecond)
	if n := len(processesWith(t, "sleep\x00"+s)); n != 2 {
		t.Fatalf("%d sleeps run after the connection ended, want both left behind", n)
	}
	left, _ := filepath.Glob(filepath.Join(nodes.RootRecordDir, tag+".[0-9]*"))
	if len(left) != 1 {
		t.Fatalf("records of the left-behind command: %v, want 1", left)
	}

	// The first command reaps ahead of itself in its own session (or its command shell's
	// start), and still runs as asked.
	res, err := conn(t, tagPool(), "node1").Run(context.Background(), "echo", "after the reap")
	if err != nil || string(res.Stdout) != "after the reap\n" {
		t.Fatalf("first command of the new pool: %q, %v", res.Stdout, err)
	}
	assertKilled(t, s, mark)
	if plain {
		assertNoRecords(t, nodes.RootRecordDir, tag)
		return
	}
	// The left-behind record is gone; the new pool's shell has its own, empty once its
	// command's watcher has ended.
	if _, err := os.Stat(left[0]); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("record of the left-behind command %s: %v, want it removed", left[0], err)
	}
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		files, _ := filepath.Glob(filepath.Join(nodes.RootRecordDir, tag+".[0-9]*"))
		busy := ""
		for _, f := range files {
			if data, err := os.ReadFile(f); err == nil && len(data) > 0 {
				busy = f + ": " + string(data)
			}
		}
		if busy == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("record after the reap: %s", busy)
		}
	}
}

// TestReapOnRedial checks that a connection kills what was left behind
// once: a connection that lives on does not look again, but one dialed anew
// after the last was lost does, since the commands of the lost one may still
// run on the node.
func TestReapOnRedial(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1, sshdtest.WithRootLogin())
	srv := c.Servers[0]
	tag := uniqueTag()
	p := newPool(t, c, nil)
	if err := p.SetCommandTag(tag); err != nil {
		t.Fatal(err)
	}
	first := conn(t, p, srv.Name)
	// The connection's first command looks once for what was left behind.
	if _, err := first.Run(context.Background(), "true"); err != nil {
		t.Fatal(err)
	}

	s, mark := uniqueSleep(), filepath.Join(t.TempDir(), "mark")
	left := startGroup(t, s, mark)
	record := commandRecord{dir: nodes.RootRecordDir, tag: tag, node: srv.Name, pid: left.Process.Pid}.write(t)
	if _, err := first.Run(context.Background(), "true"); err != nil {
		t.Fatal(err)
	}
	if again := conn(t, p, srv.Name); again != first {
		t.Fatal("Conn returned another connection while the first lives")
	}
	if n := len(processesWith(t, "sleep\x00"+s)); n != 2 {
		t.Fatalf("%d sleeps run, want both: a live connection must not kill again", n)
	}

	srv.Kill(t)
	srv.Restart(t)
	waitDead(t, first)
	second := conn(t, p, srv.Name)
	if second == first {
		t.Fatal("Conn after the node died returned the dead connection")
	}
	// Reading changes nothing on the node: it need not reap first.
	if _, err := second.Stat("/"); err != nil {
		t.Fatal(err)
	}
	// The new connection's first command reaps ahead of itself, in its own session.
	if _, err := second.Run(context.Background(), "true"); err != nil {
		t.Fatal(err)
	}
	assertKilled(t, s, mark)
	if _, err := os.Stat(record); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("record %s still there (err %v), want it removed", record, err)
	}

	// A connection whose first act changes a file reaps before it.
	s, mark = uniqueSleep(), filepath.Join(t.TempDir(), "mark")
	left = startGroup(t, s, mark)
	record = commandRecord{dir: nodes.RootRecordDir, tag: tag, node: srv.Name, pid: left.Process.Pid}.write(t)
	srv.Kill(t)
	srv.Restart(t)
	waitDead(t, second)
	third := conn(t, p, srv.Name)
	if err := third.MkdirAll(filepath.Join(t.TempDir(), "made"), 0o700); err != nil {
		t.Fatal(err)
	}
	assertKilled(t, s, mark)
	if _, err := os.Stat(record); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("record %s still there (err %v), want it removed", record, err)
	}
}

// waitDead waits until c has seen its connection end, as it does a moment after the node's
// sshd is killed (at once on an idle machine, later on a loaded one).
func waitDead(t *testing.T, c *nodes.Conn) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); nodes.Alive(c); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the connection still looks alive 5s after its node's sshd was killed")
		}
	}
}
