package nodes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"time"
)

// execLocal runs `sh -c line` on this host in its own process group with the
// given timeout. It returns the exit code (-1 when the command did not run to
// an exit), the bounded output, and the error that stopped it, if any.
func execLocal(ctx context.Context, line string, timeout time.Duration) (code int, stdout, stderr []byte, timedOut bool, err error) {
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(runCtx, "sh", "-c", line)
	outBuf, errBuf := newHeadBuffer(maxStdout), newTailBuffer(maxStderr)
	cmd.Stdout, cmd.Stderr = outBuf, errBuf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// Kill the whole process group: the shell and what it started.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = outputGrace
	runErr := cmd.Run()
	stdout, stderr = outBuf.Bytes(), errBuf.Bytes()

	code = -1
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode() // -1 when killed by a signal
	}
	switch {
	case ctx.Err() != nil:
		return -1, stdout, stderr, false, ctx.Err()
	case runCtx.Err() != nil:
		return -1, stdout, stderr, true, runCtx.Err()
	case runErr == nil, errors.Is(runErr, exec.ErrWaitDelay) && code == 0:
		return 0, stdout, stderr, false, nil
	case code >= 0:
		return code, stdout, stderr, false, nil
	}
	if cmd.ProcessState != nil {
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -1, stdout, stderr, false, fmt.Errorf("killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
		}
	}
	return -1, stdout, stderr, false, runErr
}

// runLocal runs line locally and fills a Result; see Conn.Run.
func (c *Conn) runLocal(ctx context.Context, line, shown string) (Result, error) {
	start := time.Now()
	code, stdout, stderr, timedOut, err := execLocal(ctx, line, c.timeout)
	res := Result{Node: c.name, Command: line, ExitCode: code, Stdout: stdout, Stderr: stderr, Duration: time.Since(start)}
	return res, commandError(c.name, shown, code, stderr, timedOut, c.timeout, err)
}

// commandError builds the error for a finished command, nil for exit 0.
func commandError(node, shown string, code int, stderr []byte, timedOut bool, timeout time.Duration, err error) error {
	if err == nil && code == 0 {
		return nil
	}
	re := &runError{node: node, command: shown, code: code, tail: stderrTail(stderr), err: err}
	if timedOut {
		re.timeout = timeout
	}
	if err != nil {
		re.code = -1
	}
	return re
}

// localFS implements a node's file operations with the os package.
type localFS struct{}

func (localFS) Lstat(name string) (fs.FileInfo, error)    { return os.Lstat(name) }
func (localFS) Stat(name string) (fs.FileInfo, error)     { return os.Stat(name) }
func (localFS) Readlink(name string) (string, error)      { return os.Readlink(name) }
func (localFS) Symlink(oldname, newname string) error     { return os.Symlink(oldname, newname) }
func (localFS) Rename(oldname, newname string) error      { return os.Rename(oldname, newname) }
func (localFS) Remove(name string) error                  { return os.Remove(name) }
func (localFS) ReadFile(name string) ([]byte, error)      { return os.ReadFile(name) }
func (localFS) Chmod(name string, perm fs.FileMode) error { return os.Chmod(name, perm) }

func (localFS) MkdirAll(name string, perm fs.FileMode) error { return os.MkdirAll(name, perm) }

func (localFS) ReadDir(name string) ([]fs.FileInfo, error) {
	entries, err := os.ReadDir(name)
	if err != nil {
		return nil, err
	}
	infos := make([]fs.FileInfo, 0, len(entries))
	for _, e := range entries {
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the directory was read
		}
		if err != nil {
			return nil, err
		}
		infos = append(infos, info)
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name() < infos[j].Name() })
	return infos, nil
}

// WriteFileAtomic writes a temporary file next to name, syncs it, sets perm,
// renames it over name and syncs the directory.
func (localFS) WriteFileAtomic(name string, data []byte, perm fs.FileMode) (err error) {
	dir, base := filepath.Split(name)
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, name); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	defer d.Close()
	if err = d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
