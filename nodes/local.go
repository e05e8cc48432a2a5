package nodes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// localTransport runs the master's commands on this host, under the watchdog (see
// watchdog.go), and reaches its files through the os package.
type localTransport struct {
	node string // the node's name, in the records of tagged commands
}

// run starts cmd with startLocal and waits for it to exit, or stops it when ctx ends: then
// its process group is killed before run returns.
func (t localTransport) run(ctx context.Context, cmd *command, stdout, stderr io.Writer) (outcome, error) {
	p, err := startLocal(cmd, t.node, stdout, stderr)
	if err != nil {
		return outcome{code: -1}, err
	}
	select {
	case <-p.exited:
		p.finish()
		removeLocalRecord(cmd.tag, p.cmd.Process.Pid)
	case <-ctx.Done():
		p.stop()
		return outcome{code: -1}, ctx.Err()
	}
	code, err := p.result()
	o := outcome{code: code}
	if p.start > 0 && code >= 0 && cmd.input == nil {
		o.boot, o.start = LocalBoot(), p.start
	}
	return o, err
}

// reapsAhead is false: the master's reap is a command of its own.
func (localTransport) reapsAhead() bool { return false }

// shell returns nil: the master's commands have no command shell.
func (localTransport) shell(context.Context, string, bool) (*remoteShell, error) { return nil, nil }

func (localTransport) fence() string     { return "" }
func (localTransport) files() fileSystem { return localFS{} }
func (localTransport) alive() bool       { return true }
func (localTransport) close() error      { return nil }

// result is the exit code of a command that exited by itself, or the error of one that a
// signal killed or that could not be waited for.
func (p *localProc) result() (int, error) {
	ps := p.cmd.ProcessState
	code := -1
	if ps != nil {
		code = ps.ExitCode() // -1 when killed by a signal
	}
	switch {
	case p.waitErr == nil:
		// A command that read its input to an end that came from an error
		// reading it did not get all of it.
		select {
		case err := <-p.inputErr:
			if err != nil {
				return -1, fmt.Errorf("reading its input: %w", err)
			}
		default:
		}
		return 0, nil
	case code >= 0:
		return code, nil
	}
	if ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -1, fmt.Errorf("killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
		}
	}
	return -1, p.waitErr
}

// localProc is a command started by startLocal.
type localProc struct {
	cmd     *exec.Cmd
	stdin   *os.File      // the write end of the command's standard input
	exited  chan struct{} // closed once the shell has exited and been reaped
	waitErr error         // cmd.Wait's error; set before exited is closed
	output  chan struct{} // closed once standard output and error are at EOF
	readers []*os.File    // the read ends of standard output and error
	// inputErr receives the error of copying RunInput's input, once the copy ended.
	inputErr chan error
	// start is the start time of the command's shell in clock ticks since boot, read before
	// it could be reaped; 0 when it could not be read. The command's processes started after.
	start uint64
}

// startLocal starts cmd under the watchdog, recorded under cmd's tag for node:
// sh in a process group of its own, killed by the kernel when cutover dies
// (Pdeathsig), with a watcher reading a pipe that cutover holds. Output is
// copied to stdout and stderr. With input (RunInput), the command reads input
// as its standard input, and the watcher's pipe is its descriptor 3 ("input"
// mode).
func startLocal(cmd *command, node string, stdout, stderr io.Writer) (*localProc, error) {
	input := cmd.input
	// Pipes: the watcher's, standard output, standard error, and with input
	// the command's standard input. Each pair is the read end, then the write end.
	n := 3
	if input != nil {
		n = 4
	}
	var pipes [][2]*os.File
	closeAll := func() {
		for _, pp := range pipes {
			pp[0].Close()
			pp[1].Close()
		}
	}
	for range n {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll()
			return nil, err
		}
		pipes = append(pipes, [2]*os.File{r, w})
	}
	mode := "local"
	sh := exec.Command("/bin/sh")
	sh.Stdin, sh.Stdout, sh.Stderr = pipes[0][0], pipes[1][1], pipes[2][1]
	if input != nil {
		// The command's standard input is a pipe of its own, which a goroutine
		// fills from input: nothing waits for that copy once the command
		// exited, since input may block in a read that no one ends.
		mode = "input"
		sh.Stdin, sh.ExtraFiles = pipes[3][0], []*os.File{pipes[0][0]}
	}
	sh.Args = append(sh.Args, watchdogArgs(mode, cmd.shellCode(), cmd.tag, node, "")...)
	sh.Env = LocalEnv()
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &localProc{cmd: sh, stdin: pipes[0][1], exited: make(chan struct{}), output: make(chan struct{}),
		readers: []*os.File{pipes[1][0], pipes[2][0]}, inputErr: make(chan error, 1)}

	// Pdeathsig fires when the thread that started the process exits, not
	// the process: keep this goroutine on its thread until the shell exits,
	// so that the Go runtime cannot retire the thread meanwhile.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := sh.Start(); err != nil {
			started <- err
			return
		}
		p.start = procStart(sh.Process.Pid)
		started <- nil
		p.waitErr = sh.Wait()
		close(p.exited)
	}()
	err := <-started
	// The child has its own copies now (or never will).
	pipes[0][0].Close()
	pipes[1][1].Close()
	pipes[2][1].Close()
	if input != nil {
		pipes[3][0].Close()
	}
	if err != nil {
		pipes[0][1].Close()
		pipes[1][0].Close()
		pipes[2][0].Close()
		if input != nil {
			pipes[3][1].Close()
		}
		return nil, err
	}
	if input != nil {
		go func() {
			_, err := io.Copy(pipes[3][1], input)
			if errors.Is(err, syscall.EPIPE) {
				err = nil // the command did not read all of it
			}
			p.inputErr <- err // before the command sees the end of its input
			pipes[3][1].Close()
		}()
	}
	var wg sync.WaitGroup
	for i, w := range []io.Writer{stdout, stderr} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			io.Copy(w, p.readers[i])
		}()
	}
	go func() {
		wg.Wait()
		close(p.output)
	}()
	return p, nil
}

// finish ends a command that exited by itself: it tells the watcher so,
// which then leaves the process group alone, and waits for the output as
// long as outputGrace.
func (p *localProc) finish() {
	p.stdin.Write([]byte("done\n")) // fails only when the watcher is gone
	p.stdin.Close()
	p.closeOutput(outputGrace)
}

// stop kills a running command: closing its standard input makes the
// watcher kill the process group, and the watcher's end closes the output.
// Should that take longer than killWait, the group is killed here.
func (p *localProc) stop() {
	p.stdin.Close()
	deadline := time.NewTimer(killWait)
	defer deadline.Stop()
	if !receivedBefore(p.exited, deadline.C) || !receivedBefore(p.output, deadline.C) {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
	p.closeOutput(0)
}

// receivedBefore reports whether ch is closed before deadline fires.
func receivedBefore(ch <-chan struct{}, deadline <-chan time.Time) bool {
	select {
	case <-ch:
		return true
	case <-deadline:
		return false
	}
}

// closeOutput waits up to grace for the output to reach EOF, then stops
// reading it: a process left running may hold it open forever.
func (p *localProc) closeOutput(grace time.Duration) {
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.output:
	case <-t.C:
	}
	for _, r := range p.readers {
		r.Close()
	}
	<-p.output
}

// localPath is the PATH of the commands run on the master: the one Debian's sshd gives root,
// as the other nodes' commands get it, whatever PATH cutover started with. An @reboot line of
// cron has only /usr/bin:/bin, where tools such as Ganeti's daemon-util find no
// start-stop-daemon and silently do nothing.
const localPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// removeLocalRecord removes the record of the master's command pid under tag (none for ""),
// once the command has exited by itself and its watcher read "done": the watchdog's watcher
// removes the records of commands over SSH, cutover those of its own. The record lies where
// recordDirScript puts it: rootRecordDir when /run is writable, otherwise ~/.cutover/cmd. A
// record that is not there (the watchdog could not write it) is no error; one left behind is
// removed by the tag's next reap.
func removeLocalRecord(tag string, pid int) {
	if tag == "" {
		return
	}
	runWritable := unix.Faccessat(unix.AT_FDCWD, "/run", unix.W_OK, unix.AT_EACCESS) == nil
	if dir := recordDir(runWritable, os.Getenv("HOME")); dir != "" {
		os.Remove(filepath.Join(dir, tag+"."+strconv.Itoa(pid)))
	}
}

// recordDir is recordDirScript's rule: rootRecordDir when /run is writable, otherwise the
// login's ~/.cutover/cmd, "" without a home.
func recordDir(runWritable bool, home string) string {
	switch {
	case runWritable:
		return rootRecordDir
	case home == "":
		return ""
	}
	return filepath.Join(home, ".cutover", "cmd")
}

// LocalEnv is cutover's environment with PATH set to localPath, for every command it runs on
// the master.
func LocalEnv() []string {
	env := []string{"PATH=" + localPath}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	return env
}

// procStart reads the start time (field 22 of /proc/PID/stat, clock ticks since boot) of
// process pid; 0 when it cannot be read.
func procStart(pid int) uint64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	return statStart(data)
}

// statStart is the start time of a /proc/PID/stat line; 0 when it has none.
func statStart(data []byte) uint64 {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0
	}
	// The fields after the command name: state is the 3rd of the line, starttime the 22nd.
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 {
		return 0
	}
	n, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// BootIdentity makes a boot identity, as a command shell reports it (Result.Boot), of the
// contents of /proc/sys/kernel/random/boot_id and /proc/1/stat: the kernel's boot id and the
// start time of process 1, "BOOTID/START"; either may be missing. "" when neither could be read,
// or when what was read is not a boot identity (ValidBoot): a node is an untrusted peer, and
// what it serves in place of those files is no identity.
func BootIdentity(bootID, initStat []byte) string {
	id, start := strings.TrimSpace(string(bootID)), ""
	if n := statStart(initStat); n > 0 {
		start = strconv.FormatUint(n, 10)
	}
	if b := id + "/" + start; b != "/" && ValidBoot(b) {
		return b
	}
	return ""
}

// LocalBoot is this host's boot identity (BootIdentity). It is read once: it cannot change
// while cutover runs.
var LocalBoot = sync.OnceValue(func() string {
	id, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	stat, _ := os.ReadFile("/proc/1/stat")
	return BootIdentity(id, stat)
})
