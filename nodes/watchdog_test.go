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
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/cutover/cutover/nodes"
)

// These tests check that a command never outlives its run: stopped by a
// timeout or a cancellation, with cutover killed, or left behind by an
// execution that died, it is killed with every process it started. The
// commands are `sleep S & sleep S; touch MARK`, with a duration S unique to
// the test, so that /proc tells whether any of their processes lives on.

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
