package nodes_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/nodes/sshdtest"
)

// parentScript prints whether the script's parent is a command shell (its arguments name
// cutover-shell) or not.
const parentScript = `if tr '\0' ' ' </proc/$PPID/cmdline | grep -q ' cutover-shell '; then echo shell; else echo session; fi`

// TestCommandShell runs commands through a connection's command shell: their output passes
// whole whatever it holds (lines that look like the shell's own, no final newline, binary
// bytes, a megabyte), each command's output is its own, a second command while one runs gets a
// session of its own, a command killed by its context leaves the shell usable, and a node
// without bash runs every command in a session of its own.
func TestCommandShell(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1)
	p := newPool(t, c, nil)
	cn := conn(t, p, "node1")
	ctx := context.Background()

	for _, tc := range []struct {
		name, script, stdout, stderr string
	}{
		{"no final newline", `printf 'a\nb'; printf e >&2`, "a\nb", "e"},
		{"empty", `true`, "", ""},
		{"empty lines", `printf '\n\n'; printf '\n' >&2`, "\n\n", "\n"},
		{"lines like the shell's", `printf '\ncutover-shell-ready 0\n\ncutover-shell-ready end\n'; printf '\n0123456789abcdef0123456789abcdef 0\n'`,
			"\ncutover-shell-ready 0\n\ncutover-shell-ready end\n\n0123456789abcdef0123456789abcdef 0\n", ""},
		{"binary", `printf '\000\001\377end'`, "\x00\x01\xffend", ""},
		{"a megabyte", `head -c 1048576 /dev/zero | tr '\000' x`, strings.Repeat("x", 1<<20), ""},
		{"script lines with backslashes and spaces", "printf '%s|' \\\n  'a\\b'  ' c '\necho", `a\b| c |` + "\n", ""},
	} {
		res, err := cn.RunShell(ctx, tc.script)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if string(res.Stdout) != tc.stdout || string(res.Stderr) != tc.stderr {
			t.Errorf("%s: stdout %.60q, stderr %q; want %.60q, %q", tc.name, res.Stdout, res.Stderr, tc.stdout, tc.stderr)
		}
	}
	if res, err := cn.RunShell(ctx, parentScript); err != nil || string(res.Stdout) != "shell\n" {
		t.Fatalf("a command of a free connection ran in %q (%v), want the command shell", res.Stdout, err)
	}

	// One command holds the shell; another at the same time has a session of its own.
	var wg sync.WaitGroup
	var slow nodes.Result
	var slowErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		slow, slowErr = cn.RunShell(ctx, "sleep 1; "+parentScript)
	}()
	time.Sleep(300 * time.Millisecond)
	if res, err := cn.RunShell(ctx, parentScript); err != nil || string(res.Stdout) != "session\n" {
		t.Errorf("a command while the shell is busy ran in %q (%v), want a session of its own", res.Stdout, err)
	}
	wg.Wait()
	if slowErr != nil || string(slow.Stdout) != "shell\n" {
		t.Errorf("the slow command: %q, %v; want it in the shell", slow.Stdout, slowErr)
	}

	// A command killed by its context: the shell goes on with the next command.
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := cn.RunShell(cctx, "sleep 30"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a command past its context's deadline: %v", err)
	}
	if res, err := cn.RunShell(ctx, parentScript); err != nil || string(res.Stdout) != "shell\n" {
		t.Errorf("the command after a killed one ran in %q (%v), want the command shell", res.Stdout, err)
	}
	if res, err := cn.Run(ctx, "sh", "-c", parentScript); err != nil || string(res.Stdout) != "shell\n" {
		t.Errorf("a Run program ran in %q (%v), want the command shell", res.Stdout, err)
	}

	// A node without bash: every command has a session of its own, and runs as asked.
	nobash := newPool(t, c, nil)
	nodes.SetShellBash(nobash, "cutover-test-no-such-bash")
	for range 2 {
		res, err := conn(t, nobash, "node1").RunShell(ctx, parentScript+"; exit 3")
		if code, _ := nodes.ExitCode(err); code != 3 || string(res.Stdout) != "session\n" {
			t.Errorf("without bash: %q, %v; want a session of its own and exit 3", res.Stdout, err)
		}
	}
}

// TestRunOutputOwnSession runs a command in a session of its own on a connection whose
// command shell is free: its output streams whole, its exit code comes back, a command past
// its context's deadline is stopped, and the connection's next command still gets the shell.
func TestRunOutputOwnSession(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1)
	p := newPool(t, c, nil)
	cn := conn(t, p, "node1")
	ctx := context.Background()
	var out bytes.Buffer
	if _, err := cn.RunOutputOwnSession(ctx, &out, "sh", "-c", parentScript+"; head -c 1048576 /dev/zero | tr '\\000' x"); err != nil {
		t.Fatal(err)
	}
	if want := "session\n" + strings.Repeat("x", 1<<20); out.String() != want {
		t.Errorf("RunOutputOwnSession printed %.60q (%d bytes), want %.60q (%d bytes)", out.String(), out.Len(), want, len(want))
	}
	if _, err := cn.RunOutputOwnSession(ctx, nil, "sh", "-c", "exit 3"); func() int { code, _ := nodes.ExitCode(err); return code }() != 3 {
		t.Errorf("a command that exits 3: %v", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := cn.RunOutputOwnSession(cctx, nil, "sleep", "30"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a command past its context's deadline: %v", err)
	}
	if res, err := cn.RunShell(ctx, parentScript); err != nil || string(res.Stdout) != "shell\n" {
		t.Errorf("the next command ran in %q (%v), want the command shell", res.Stdout, err)
	}
}

// TestCommandShellBoot checks the boot identity a command that ran in the command shell
// carries: the node's boot id and the start time of its process 1 (the node is in a PID
// namespace of its own, so that process is not the test host's), as the node's files give
// them; a command with a session of its own, or on a node without bash, carries none.
func TestCommandShellBoot(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1, sshdtest.WithOwnProcesses())
	p := newPool(t, c, nil)
	cn := conn(t, p, "node1")
	ctx := context.Background()
	id, err1 := cn.ReadFile("/proc/sys/kernel/random/boot_id")
	stat, err2 := cn.ReadFile("/proc/1/stat")
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	want := strings.TrimSpace(string(id)) + "/" + f[19]

	for _, run := range []func() (nodes.Result, error){
		func() (nodes.Result, error) { return cn.RunShell(ctx, parentScript) },
		func() (nodes.Result, error) { return cn.RunShell(ctx, parentScript+"; exit 4") },
		func() (nodes.Result, error) { return cn.Run(ctx, "sh", "-c", parentScript) },
	} {
		res, _ := run()
		if string(res.Stdout) != "shell\n" || res.Boot != want {
			t.Errorf("a command in the shell: ran in %q, boot %q; want the shell and %q", res.Stdout, res.Boot, want)
		}
	}

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		cn.RunShell(ctx, "sleep 1")
	}()
	time.Sleep(300 * time.Millisecond)
	if res, err := cn.RunShell(ctx, parentScript); err != nil || string(res.Stdout) != "session\n" || res.Boot != "" {
		t.Errorf("a command while the shell is busy: ran in %q (%v), boot %q; want a session and none", res.Stdout, err, res.Boot)
	}
	wg.Wait()

	nobash := newPool(t, c, nil)
	nodes.SetShellBash(nobash, "cutover-test-no-such-bash")
	if res, err := conn(t, nobash, "node1").RunShell(ctx, parentScript); err != nil || res.Boot != "" {
		t.Errorf("without bash: boot %q (%v), want none", res.Boot, err)
	}
}

// TestCommandShellUnderLoad runs command after command in the command shells of 64 nodes at
// once, each node in a PID namespace of its own as on a cluster, the shells restarted once for
// a command tag: every command must end within seconds. (A shell that waited for its commands
// with bash's wait -f hung, spinning, in about one run of this test in four, and in two runs of
// the 256-node benchmark in three.)
func TestCommandShellUnderLoad(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 64, sshdtest.WithOwnProcesses())
	p := newPool(t, c, nil)
	var list []nodes.Node
	for _, s := range c.Servers {
		list = append(list, nodes.Node{Name: s.Name})
	}
	for step := range 12 {
		if step == 1 {
			if err := p.SetCommandTag(uniqueTag()); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err := nodes.Each(ctx, list, 32, "", func(ctx context.Context, n nodes.Node) error {
			cn, err := p.Conn(ctx, n.Name)
			if err != nil {
				return err
			}
			_, err = cn.Run(ctx, "true")
			return err
		})
		cancel()
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
}

// TestPrepare readies a tagged connection before its first command: it kills what an earlier
// execution of the tag left running on the node, as the first command would, and starts the
// command shell, in which that first command then runs. Without a tag it does nothing.
func TestPrepare(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1, sshdtest.WithRootLogin())
	p := newPool(t, c, nil)
	cn := conn(t, p, "node1")
	ctx := context.Background()
	if err := cn.Prepare(ctx); err != nil {
		t.Fatalf("Prepare without a tag: %v", err)
	}
	tag := uniqueTag()
	if err := p.SetCommandTag(tag); err != nil {
		t.Fatal(err)
	}
	s, mark := uniqueSleep(), t.TempDir()+"/mark"
	left := startGroup(t, s, mark)
	record := commandRecord{dir: nodes.RootRecordDir, tag: tag, node: "node1", pid: left.Process.Pid}.write(t)
	if err := cn.Prepare(ctx); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	assertKilled(t, s, mark)
	if files, _ := filepath.Glob(filepath.Join(nodes.RootRecordDir, tag+".[0-9]*")); len(files) != 1 || files[0] == record {
		t.Errorf("records of %s after Prepare: %v, want the left-behind one gone and the shell's own", tag, files)
	}
	if res, err := cn.RunShell(ctx, parentScript); err != nil || string(res.Stdout) != "shell\n" {
		t.Errorf("the first command after Prepare ran in %q (%v), want the command shell", res.Stdout, err)
	}
}

// shellProcs returns the command shell that runs the commands of cn, its copiers (its cat
// children) and their directory, each process as "PID START".
func shellProcs(t *testing.T, cn *nodes.Conn) (shell string, copiers []string, dir string) {
	t.Helper()
	res, err := cn.RunShell(context.Background(), "ps -o ppid= -p $PPID")
	if err != nil {
		t.Fatal(err)
	}
	pid := strings.TrimSpace(string(res.Stdout))
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(stat), ')')
		if f := strings.Fields(string(stat[i+1:])); len(f) > 19 && f[1] == pid && strings.HasSuffix(string(stat[:i]), "(cat") {
			copiers = append(copiers, e.Name()+" "+f[19])
			if args, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && dir == "" {
				if a := strings.Split(string(args), "\x00"); len(a) > 1 {
					dir = filepath.Dir(a[1]) // cat's FIFO
				}
			}
		}
	}
	if len(copiers) != 2 || dir == "" {
		t.Fatalf("command shell %s: copiers %v in %q, want two in a directory", pid, copiers, dir)
	}
	return pid + " " + strconv.FormatUint(statStart(t, pid), 10), copiers, dir
}

// gone reports whether the process "PID START" has ended.
func gone(proc string) bool {
	pid, start, _ := strings.Cut(proc, " ")
	f, ok := statFields(pid)
	return !ok || f[19] != start || f[0] == "Z" || f[0] == "X"
}

// statFields returns the fields of /proc/PID/stat after the command name: the state first, the
// start time (clock ticks since boot) at 19. ok is false when there is no such process.
func statFields(pid string) ([]string, bool) {
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil, false
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return f, len(f) >= 20
}

// TestCommandShellCleansUp: a command shell that ends with its connection, between commands
// or while one runs, ends its copiers and removes their directory; the directory of a shell
// that could not (killed) is removed by the next shell of the login, and that of a shell that
// still runs is left alone.
func TestCommandShellCleansUp(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1)
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	ns = strings.Map(func(r rune) rune {
		if r < '0' || r > '9' {
			return -1
		}
		return r
	}, ns)
	u, err := user.Lookup(c.User)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	self := strconv.Itoa(os.Getpid())
	var left []string
	for _, owner := range []string{"4194305-1", self + "-" + strconv.FormatUint(statStart(t, self), 10)} {
		d := fmt.Sprintf("/tmp/.cutover-shell-%s-%s.%d", ns, owner, time.Now().UnixNano())
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, uid, -1); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(d) })
		left = append(left, d)
	}
	for _, running := range []bool{false, true} {
		p := newPool(t, c, nil)
		shell, copiers, dir := shellProcs(t, conn(t, p, "node1"))
		if running {
			go conn(t, p, "node1").RunShell(context.Background(), "sleep 30")
			time.Sleep(300 * time.Millisecond)
		}
		p.Close()
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := os.Stat(dir)
			if gone(shell) && gone(copiers[0]) && gone(copiers[1]) && errors.Is(err, fs.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("running %v: after the connection closed, shell gone %v, copiers gone %v %v, directory %s: %v",
					running, gone(shell), gone(copiers[0]), gone(copiers[1]), dir, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if _, err := os.Stat(left[0]); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the directory of a shell that is gone, %s: %v; want it removed", left[0], err)
	}
	if _, err := os.Stat(left[1]); err != nil {
		t.Errorf("the directory of a shell that runs, %s: %v; want it left alone", left[1], err)
	}
}

// TestCommandShellCopiers: the command shell replaces its copiers when one is gone (killed
// between commands) and after 256 commands, and every command keeps exactly its own output.
func TestCommandShellCopiers(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1)
	p := newPool(t, c, nil)
	cn := conn(t, p, "node1")
	ctx := context.Background()
	_, copiers, _ := shellProcs(t, cn)
	pid, _, _ := strings.Cut(copiers[0], " ")
	n, _ := strconv.Atoi(pid)
	if err := syscall.Kill(n, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Between commands: the copier has died before the next command reaches the shell. A kill
	// returns before its process has ended, and a copier ended while a command runs takes that
	// command's output with it (the command fails at its timeout).
	for deadline := time.Now().Add(10 * time.Second); !gone(copiers[0]); {
		if time.Now().After(deadline) {
			t.Fatalf("copier %s still runs 10 s after SIGKILL", copiers[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
	var replaced []string
	for i := range 300 {
		res, err := cn.RunShell(ctx, fmt.Sprintf("echo %d; echo e%d >&2", i, i))
		if err != nil || string(res.Stdout) != fmt.Sprintf("%d\n", i) || string(res.Stderr) != fmt.Sprintf("e%d\n", i) || res.Boot == "" {
			t.Fatalf("command %d: %q, %q, boot %q (%v); want its own output, in the shell", i, res.Stdout, res.Stderr, res.Boot, err)
		}
		if i == 0 {
			if _, replaced, _ = shellProcs(t, cn); replaced[0] == copiers[0] || replaced[1] == copiers[1] {
				t.Errorf("copiers %v after one was killed, want others than %v", replaced, copiers)
			}
		}
	}
	if _, now, _ := shellProcs(t, cn); now[0] == replaced[0] || now[1] == replaced[1] {
		t.Errorf("copiers %v after 300 commands, want others than %v", now, replaced)
	}
}
