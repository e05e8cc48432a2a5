package nodes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/nodes/sshdtest"
)

// These tests check that a command never outlives its run: stopped by a
// timeout or a cancellation, with cutover killed, or left behind by an
// execution that died, it is killed with every process it started. The
// commands are `sleep S & sleep S; touch MARK`, with a duration S unique to
// the test, so that /proc tells whether any of their processes lives on.

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

// TestStoppedCommandIsKilled stops a command by its timeout and by a
// cancellation: the command and the process it forked are gone when Run
// returns, on every transport, and the command's record with them.
func TestStoppedCommandIsKilled(t *testing.T) {
	t.Parallel()
	transports, dir := watchdogTransports(t)
	for _, tr := range transports {
		for _, how := range []string{"timeout", "cancel"} {
			t.Run(tr.name+"/"+how, func(t *testing.T) {
				t.Parallel()
				// On a loaded machine a command may not have started when a short
				// timeout ends it: that try tells nothing, so it is made again with a
				// longer timeout.
				d := time.Second
				for try := 1; !stoppedCommandIsKilled(t, tr, dir, how, d); try++ {
					if try == 3 {
						t.Fatalf("in 3 tries, up to a timeout of %s, the command was never seen running before its timeout", d)
					}
					d *= 4
				}
			})
		}
	}
}

// stoppedCommandIsKilled is one try of TestStoppedCommandIsKilled. It reports false when a
// timeout ended the command before it was seen running, having checked only that nothing of
// it was left.
func stoppedCommandIsKilled(t *testing.T, tr watchdogTransport, dir, how string, timeout time.Duration) bool {
	t.Helper()
	p := tr.pool(t, func(cfg *nodes.SSHConfig) {
		if how == "timeout" {
			cfg.CommandTimeout = timeout
		}
	})
	tag := uniqueTag()
	if err := p.SetCommandTag(tag); err != nil {
		t.Fatal(err)
	}
	c := conn(t, p, tr.node)
	s, mark := uniqueSleep(), filepath.Join(dir, "mark-"+uniqueTag())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	returned := make(chan struct{})
	running := make(chan bool, 1)
	var cancelled time.Time
	go func() {
		ok := waitRunning(t, s, returned)
		if ok && how == "cancel" {
			cancelled = time.Now()
			cancel()
		}
		running <- ok
	}()
	start := time.Now()
	_, err := c.RunShell(ctx, slowScript(s, mark))
	close(returned)
	if !<-running {
		if how == "timeout" && nodes.IsTimeout(err) {
			// Whether or not it had started, nothing of it may be left running.
			assertKilled(t, s, mark)
			assertNoRecords(t, tr.recordDir(t), tag)
			t.Logf("the command was stopped by its %s timeout before it was seen running; once more with a longer one", timeout)
			return false
		}
		t.Fatalf("the command's processes were never seen running (err %v)", err)
	}
	switch how {
	case "timeout":
		if !nodes.IsTimeout(err) {
			t.Errorf("err = %v, want a timeout", err)
		}
		if took, limit := time.Since(start), timeout+nodes.KillWait+2*time.Second; took > limit {
			t.Errorf("Run took %s, want at most %s", took, limit)
		}
	case "cancel":
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		if took, limit := time.Since(cancelled), nodes.KillWait+2*time.Second; took > limit {
			t.Errorf("Run returned %s after the cancellation, want at most %s", took, limit)
		}
	}
	assertKilled(t, s, mark)
	// The killer removes the record just before its last SIGKILL; under load Run may have
	// returned on the output's grace period a moment before.
	waitNoRecords(t, tr.recordDir(t), tag)
	return true
}

// The helper process: a test re-runs the test binary with helperEnv set to
// a JSON helperSpec, and the binary runs one command as cutover would, until
// the test kills it.
const helperEnv = "NODES_TEST_HELPER"

type helperSpec struct {
	Nodes  []nodes.Node
	SSH    nodes.SSHConfig
	Node   string
	Tag    string
	Script string
	// Input runs Script with RunInput, on an input that never ends.
	Input bool
	// Plain gives the command a session of its own instead of the command shell.
	Plain bool
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(helperEnv); spec != "" {
		os.Exit(runHelper(spec))
	}
	os.Exit(m.Run())
}

// runHelper runs the helper's command and returns the exit code.
func runHelper(spec string) int {
	var h helperSpec
	if err := json.Unmarshal([]byte(spec), &h); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	inv, err := nodes.NewInventory(localMaster, h.Nodes)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	p, err := nodes.NewPool(inv, h.SSH)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	if h.Plain {
		nodes.NoCommandShell(p)
	}
	if err := p.SetCommandTag(h.Tag); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	c, err := p.Conn(context.Background(), h.Node)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	if h.Input {
		never, _ := io.Pipe()
		_, err = c.RunInput(context.Background(), never, "sh", "-c", h.Script)
	} else {
		_, err = c.RunShell(context.Background(), h.Script)
	}
	fmt.Fprintln(os.Stderr, "helper: command returned:", err)
	return 1
}

// TestCommandDiesWithCutover kills cutover (a helper process) with SIGKILL
// while it runs a command: the command and the process it forked die too,
// locally and over SSH, and their record is removed.
func TestCommandDiesWithCutover(t *testing.T) {
	t.Parallel()
	transports, dir := watchdogTransports(t)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			s, mark, tag := uniqueSleep(), filepath.Join(dir, "mark-"+uniqueTag()), uniqueTag()
			spec, err := json.Marshal(helperSpec{
				Nodes: clusterNodes(tr.cluster), SSH: sshConfig(tr.cluster),
				Node: tr.node, Tag: tag, Script: slowScript(s, mark), Plain: tr.plain,
			})
			if err != nil {
				t.Fatal(err)
			}
			killHelper(t, spec, s)
			assertKilled(t, s, mark)
			// Nobody waits for the watcher now: it removes the record
			// once the process group is gone.
			waitNoRecords(t, tr.recordDir(t), tag)
		})
	}
}

// killHelper starts a helper cutover with spec, waits until its command (sleeping s) runs and
// kills the helper with SIGKILL.
func killHelper(t *testing.T, spec []byte, s string) {
	t.Helper()
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), helperEnv+"="+string(spec))
	var out bytes.Buffer
	helper.Stdout, helper.Stderr = &out, &out
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		helper.Wait()
		close(exited)
	}()
	if !waitRunning(t, s, exited) {
		helper.Process.Kill()
		<-exited
		t.Fatalf("the helper's command was never seen running; helper output:\n%s", out.String())
	}
	helper.Process.Kill()
	<-exited
}

// TestInputCommandDiesWithCutover kills cutover (a helper process) with SIGKILL while a local
// RunInput command runs, one that forked and whose input has not ended: the command and
// what it forked die too, as Run's do. (Over SSH such a command ends when its input does.)
func TestInputCommandDiesWithCutover(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, mark := uniqueSleep(), filepath.Join(dir, "mark")
	spec, err := json.Marshal(helperSpec{Nodes: []nodes.Node{{Name: localMaster}}, Node: localMaster, Script: slowScript(s, mark), Input: true})
	if err != nil {
		t.Fatal(err)
	}
	killHelper(t, spec, s)
	assertKilled(t, s, mark)
}

// TestStoppedInputCommandIsKilled cancels a local RunInput command that forked: it returns
// the context's error once the command and what it forked are gone.
func TestStoppedInputCommandIsKilled(t *testing.T) {
	t.Parallel()
	c := localConn(t)
	s, mark := uniqueSleep(), filepath.Join(t.TempDir(), "mark")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	never, _ := io.Pipe() // an input that does not end when the command is stopped
	go func() {
		_, err := c.RunInput(ctx, never, "sh", "-c", slowScript(s, mark))
		done <- err
	}()
	if !waitRunning(t, s, nil) {
		cancel()
		t.Fatal("the command was never seen running")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("RunInput cancelled = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RunInput did not return 10s after its context ended")
	}
	assertKilled(t, s, mark)
}

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
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
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

// writeRecord writes a command record as the watchdog does, for the
// process group of pid; start replaces the process's start time when not
// empty. It returns the record's path.
func writeRecord(t *testing.T, dir, tag, node string, pid int, start string) string {
	t.Helper()
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
	victimRecord := writeRecord(t, dir, tag, localMaster, victim.Process.Pid, "")

	bs := uniqueSleep()
	bystander := startGroup(t, bs, filepath.Join(workDir, "bystander"))
	otherTagRecord := writeRecord(t, dir, otherTag, localMaster, bystander.Process.Pid, "")
	// Record files are named by pid: the other node's record names a child
	// of the bystander, in the same process group.
	child, err := strconv.Atoi(processesWith(t, "sleep\x00"+bs)[0])
	if err != nil {
		t.Fatal(err)
	}
	otherNodeRecord := writeRecord(t, dir, tag, "node9", child, "")
	reusedRecord := writeRecord(t, dir, tag, localMaster, bystander.Process.Pid, "1")

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
	record := writeRecord(t, nodes.RootRecordDir, tag, srv.Name, left.Process.Pid, "")
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
	record = writeRecord(t, nodes.RootRecordDir, tag, srv.Name, left.Process.Pid, "")
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

// TestCommandRecord checks a tagged command's record while it runs, and
// that it is gone once the command has returned; untagged commands write
// none.
func TestCommandRecord(t *testing.T) {
	t.Parallel()
	transports, _ := watchdogTransports(t)
	// The script's sh is the command's own shell. It prints its pid, its process group, the
	// record directory's mode and the records of the tag T (under the watchdog, the one named
	// after the command's pid; in a command shell, the shell's one file).
	const script = `if [ -w /run ]; then d=/run/cutover/cmd; else d=$HOME/.cutover/cmd; fi
read -r l </proc/$$/stat; set -- ${l##*) }
echo $$; echo $3; stat -c %a "$d" 2>/dev/null || echo no-dir
if [ "$SHELLREC" = 1 ]; then cat "$d/$T".[0-9]* 2>/dev/null || echo none; else cat "$d"/*.$$ 2>/dev/null || echo none; fi`
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			p := tr.pool(t, nil)
			c := conn(t, p, tr.node)
			tag := uniqueTag()
			shellRec := "0"
			if tr.shell() {
				shellRec = "1"
			}
			run := func() []string {
				t.Helper()
				res, err := c.RunShell(context.Background(), "T="+tag+" SHELLREC="+shellRec+"\n"+script)
				if err != nil {
					t.Fatal(err)
				}
				lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
				if len(lines) != 4 {
					t.Fatalf("output %q, want the pid, the process group, the directory's mode and the record", res.Stdout)
				}
				return lines
			}
			if lines := run(); lines[3] != "none" {
				t.Errorf("untagged command: record %q, want none", lines[3])
			}

			if err := p.SetCommandTag(tag); err != nil {
				t.Fatal(err)
			}
			lines := run()
			pid, group, mode, record := lines[0], lines[1], lines[2], strings.Fields(lines[3])
			if mode != "700" {
				t.Errorf("record directory mode %s, want 700", mode)
			}
			// process group, pid, start time, boot id, node
			if len(record) != 5 || record[3] != bootID(t) || record[4] != tr.node {
				t.Fatalf("record %q, want 5 fields, boot id %s and node %s", lines[3], bootID(t), tr.node)
			}
			if _, err := strconv.Atoi(record[2]); err != nil {
				t.Errorf("record %q: start time %q is not a number", lines[3], record[2])
			}
			if !tr.shell() {
				// The watchdog's shell became the command.
				if record[0] != pid || record[1] != pid {
					t.Errorf("record %q, want group and pid %s", lines[3], pid)
				}
				file := filepath.Join(tr.recordDir(t), tag+"."+pid)
				if _, err := os.Stat(file); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("record %s after the command returned: %v, want it removed", file, err)
				}
				return
			}
			// In a command shell the record names the command's process group and its watcher,
			// which is another member of that group; the shell's file is emptied when the
			// command ends and removed when the shell does.
			if record[0] != group || record[1] == pid {
				t.Errorf("record %q, want the command's group %s and a watcher other than the command %s", lines[3], group, pid)
			}
			files, _ := filepath.Glob(filepath.Join(tr.recordDir(t), tag+".[0-9]*"))
			if len(files) != 1 {
				t.Fatalf("records of %s after the command: %v, want the shell's one", tag, files)
			}
			// The watcher empties it once it reads that cutover has the command's end, just
			// after the command returned.
			var data []byte
			var err error
			for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if data, err = os.ReadFile(files[0]); err != nil || len(data) == 0 {
					break
				}
			}
			if err != nil || len(data) != 0 {
				t.Errorf("record %s after the command returned: %q, %v; want it empty", files[0], data, err)
			}
			p.Close()
			waitNoRecords(t, tr.recordDir(t), tag)
		})
	}
}

func TestSetCommandTag(t *testing.T) {
	t.Parallel()
	inv, err := nodes.NewInventory("solo", []nodes.Node{{Name: "solo"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := nodes.NewPool(inv, nodes.SSHConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, tag := range []string{"run-7", ""} {
		if err := p.SetCommandTag(tag); err != nil {
			t.Errorf("SetCommandTag(%q) = %v, want nil", tag, err)
		}
	}
	for _, tag := range []string{"Run-7", "run 7", "../run", "run;id", strings.Repeat("x", 65)} {
		if err := p.SetCommandTag(tag); err == nil || !strings.Contains(err.Error(), "command tag") {
			t.Errorf("SetCommandTag(%q) = %v, want an error about the command tag", tag, err)
		}
	}
}

// TestLocalInput checks what a local RunInput command reads: all of its input, then its end;
// an error reading the input fails the command's run, naming it.
func TestLocalInput(t *testing.T) {
	t.Parallel()
	c := localConn(t)
	res, err := c.RunInput(context.Background(), strings.NewReader("one\ntwo\n"), "cat")
	if err != nil || string(res.Stdout) != "one\ntwo\n" {
		t.Errorf("RunInput cat = %q, %v; want its input back", res.Stdout, err)
	}
	broken := io.MultiReader(strings.NewReader("one\n"), iotest.ErrReader(errors.New("disk on fire")))
	_, err = c.RunInput(context.Background(), broken, "cat")
	if err == nil || !strings.Contains(err.Error(), "reading its input: disk on fire") {
		t.Errorf("RunInput with an input that fails = %v, want the input's error", err)
	}
}
