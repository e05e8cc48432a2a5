package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The daemon's files.
const (
	runDir   = "/run/demoapp"
	pidFile  = "/run/demoapp/demoapp.pid"
	lockFile = "/run/demoapp/daemon.lock" // serialises start and stop
	logDir   = "/var/log/demoapp"
	logFile  = "/var/log/demoapp/daemon.log"
)

const (
	startTimeout = 15 * time.Second // for the daemon to listen
	stopTimeout  = 30 * time.Second // for the daemon to exit after SIGTERM
	readyMessage = "ready"
)

// status is what a daemon answers on GET /status.
type status struct {
	Node          string `json:"node"`
	Version       string `json:"version"`
	ConfigVersion string `json:"config_version"`
}

// daemonStart starts the daemon of this binary's version in the background and returns
// once it listens. A daemon that is already running is left alone.
func daemonStart(e *env, args []string) error {
	if err := noArgs("daemon start", args); err != nil {
		return err
	}
	unlock, err := lockDaemon(e)
	if err != nil {
		return err
	}
	defer unlock()
	if pid, ok := runningPid(e); ok {
		fmt.Fprintf(e.stdout, "already running (pid %d)\n", pid)
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("start daemon: find own executable: %w", err)
	}
	if err := os.MkdirAll(e.path(logDir), 0o750); err != nil {
		return fmt.Errorf("start daemon: %w", err)
	}
	logf, err := os.OpenFile(e.path(logFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("start daemon: open log: %w", err)
	}
	defer logf.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return fmt.Errorf("start daemon: %w", err)
	}
	defer devnull.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("start daemon: %w", err)
	}
	defer r.Close()

	cmd := exec.Command(exe, "serve", "--ready-fd=3")
	cmd.Dir = "/"
	cmd.Stdin = devnull
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	w.Close()
	if err != nil {
		return fmt.Errorf("start daemon: %w", err)
	}

	msg, ok := readReady(r, startTimeout)
	if !ok {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("start daemon: not listening after %s", startTimeout)
	}
	if msg != readyMessage {
		err := cmd.Wait()
		if msg == "" {
			return fmt.Errorf("start daemon: it exited (%v), see %s", err, logFile)
		}
		return errors.New(msg)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	st, err := fetchStatus(context.Background(), e.dialAddr(), 2*time.Second)
	if err != nil {
		return fmt.Errorf("start daemon: pid %d does not answer: %w", pid, err)
	}
	fmt.Fprintf(e.stdout, "started %s (pid %d)\n", st.Version, pid)
	return nil
}

// readReady waits up to timeout for the daemon's first line on its readiness pipe: "ready",
// or why it refused to start ("" if it exited without a word). ok is false on timeout.
func readReady(r io.Reader, timeout time.Duration) (msg string, ok bool) {
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(r).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case s := <-line:
		return s, true
	case <-time.After(timeout):
		return "", false
	}
}

// daemonStop stops the running daemon with SIGTERM and waits until it is gone.
func daemonStop(e *env, args []string) error {
	if err := noArgs("daemon stop", args); err != nil {
		return err
	}
	unlock, err := lockDaemon(e)
	if err != nil {
		return err
	}
	defer unlock()
	pid, ok := runningPid(e)
	if !ok {
		if err := os.Remove(e.path(pidFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("stop daemon: remove stale pid file: %w", err)
		}
		fmt.Fprintln(e.stdout, "not running")
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop daemon: signal pid %d: %w", pid, err)
	}
	if !waitGone(pid, stopTimeout) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		if !waitGone(pid, 5*time.Second) {
			return fmt.Errorf("stop daemon: pid %d still running after SIGKILL", pid)
		}
	}
	removePidFile(e, pid)
	fmt.Fprintf(e.stdout, "stopped (pid %d)\n", pid)
	return nil
}

// daemonStatus prints "running VERSION" or "stopped" (exit 3).
func daemonStatus(e *env, args []string) error {
	if err := noArgs("daemon status", args); err != nil {
		return err
	}
	if _, ok := runningPid(e); !ok {
		fmt.Fprintln(e.stdout, "stopped")
		return silentExit(3)
	}
	st, err := fetchStatus(context.Background(), e.dialAddr(), 2*time.Second)
	if err != nil {
		fmt.Fprintln(e.stdout, "running unknown")
		return nil
	}
	fmt.Fprintln(e.stdout, "running", st.Version)
	return nil
}

// serve is the daemon itself: it checks the config against its own version, answers
// GET /status and, on the master, runs the job queue, until SIGTERM or SIGINT.
func serve(e *env, args []string) error {
	flags := flag.NewFlagSet("serve", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	readyFD := flags.Int("ready-fd", 0, "file descriptor to report readiness on")
	if err := flags.Parse(args); err != nil {
		return usageError("serve: %v", err)
	}
	var ready *os.File
	if *readyFD > 2 {
		ready = os.NewFile(uintptr(*readyFD), "ready")
	}
	logger := log.New(e.stderr, "", log.LstdFlags)
	refuse := func(err error) error {
		if ready != nil {
			fmt.Fprintln(ready, err)
			ready.Close()
		}
		return err
	}
	signal.Ignore(syscall.SIGHUP)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	cfg, err := loadConfig(e)
	if err != nil {
		return refuse(err)
	}
	master, err := readMaster(e)
	if err != nil {
		return refuse(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(e.addr, strconv.Itoa(e.port)))
	if err != nil {
		return refuse(fmt.Errorf("listen: %w", err))
	}
	if err := writePidFile(e); err != nil {
		ln.Close()
		return refuse(err)
	}
	defer removePidFile(e, os.Getpid())

	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(status{Node: e.node, Version: e.version, ConfigVersion: cfg.version})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Printf("serve: %v", err)
		}
	}()

	if d := dieAfter(e); d > 0 {
		// A release built to crash: it serves, then dies.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	var wg sync.WaitGroup
	if master == e.node {
		if err := requeueInterrupted(e, logger); err != nil {
			logger.Printf("requeue interrupted jobs: %v", err)
		}
		wg.Go(func() { runQueue(ctx, e, logger) })
	}
	logger.Printf("demoapp %s serving on %s as %s (master %s, config version %s)", e.version, ln.Addr(), e.node, master, cfg.version)
	if ready != nil {
		fmt.Fprintln(ready, readyMessage)
		ready.Close()
	}

	<-ctx.Done()
	died := errors.Is(ctx.Err(), context.DeadlineExceeded)
	logger.Printf("stopping")
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
	wg.Wait()
	if died {
		logger.Printf("died: this release's %s says it dies that long after its start", dieAfterFile)
		return fmt.Errorf("serve: died as %s says", dieAfterFile)
	}
	logger.Printf("stopped")
	return nil
}

// dieAfterFile, in a release's share tree, makes it a release built to crash: its daemon
// serves for the duration the file holds ("15s"), then dies (the tests of cutover's watch).
const dieAfterFile = "die-after"

// dieAfter is how long the daemon of this release serves before it dies: the duration in its
// share tree's die-after file; 0, for ever, without one.
func dieAfter(e *env) time.Duration {
	data, err := os.ReadFile(e.path(filepath.Join("/usr/share/demoapp", e.version, dieAfterFile)))
	if err != nil {
		return 0
	}
	d, err := time.ParseDuration(strings.TrimSpace(string(data)))
	if err != nil || d <= 0 {
		return 0
	}
	return d
}

// dialAddr is where this node's daemon answers.
func (e *env) dialAddr() string {
	host := e.addr
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(e.port))
}

// fetchStatus asks the daemon at addr (host:port) for its status.
func fetchStatus(ctx context.Context, addr string, timeout time.Duration) (*status, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/status", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /status: %s", resp.Status)
	}
	var st status
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&st); err != nil {
		return nil, fmt.Errorf("GET /status: %w", err)
	}
	return &st, nil
}

// lockDaemon takes the lock that serialises daemon start and stop on this node.
func lockDaemon(e *env) (unlock func(), err error) {
	if err := os.MkdirAll(e.path(runDir), 0o755); err != nil {
		return nil, fmt.Errorf("lock daemon: %w", err)
	}
	return flock(e.path(lockFile))
}

// flock holds an exclusive lock on path until unlock is called.
func flock(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// runningPid returns the pid of this node's running daemon, if there is one.
func runningPid(e *env) (int, bool) {
	data, err := os.ReadFile(e.path(pidFile))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, isDaemon(pid)
}

// isDaemon reports whether pid is a live (not zombie) "demoapp serve" process.
func isDaemon(pid int) bool {
	if !alive(pid) {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(string(cmdline), "\x00")
	return len(args) > 1 && strings.HasPrefix(filepath.Base(args[0]), "demoapp") && args[1] == "serve"
}

// alive reports whether pid exists and is not a zombie waiting to be reaped.
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	state := stat[i+2]
	return state != 'Z' && state != 'X'
}

// waitGone waits up to timeout for pid to exit.
func waitGone(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for alive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// writePidFile records this process as the node's daemon.
func writePidFile(e *env) error {
	path := e.path(pidFile)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write pid file: %w", err)
	}
	return writeAtomic(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644)
}

// removePidFile removes the pid file if it still names pid.
func removePidFile(e *env, pid int) {
	data, err := os.ReadFile(e.path(pidFile))
	if err == nil && strings.TrimSpace(string(data)) == strconv.Itoa(pid) {
		_ = os.Remove(e.path(pidFile))
	}
}

// writeAtomic writes data to path through a temporary file and a rename.
func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
