package cfgupgrade

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cutover/cutover/nodes"
)

// Limits on what RunExec keeps of a command's output.
const (
	outputTail = 64 << 10 // bytes of output kept in the report
	stderrTail = 2 << 10  // bytes of standard error kept in the error
)

// execError is the failure of an exec-mode migration.
type execError struct {
	msg       string
	err       error // the command's error, if it failed
	ctxErr    error // why the context ended, if it stopped the command
	exitCode  int   // -1 when it did not exit normally
	stderr    string
	unchanged bool
}

func (e *execError) Error() string   { return e.msg }
func (e *execError) Unwrap() []error { return []error{e.err, e.ctxErr} }

// Unchanged reports whether err is a failure of RunExec that left the
// config's version as it was before the command (the command failed, or it
// succeeded without changing the version): the config was not migrated, so
// a run is still before its point of no return.
func Unchanged(err error) bool {
	var e *execError
	return errors.As(err, &e) && e.unchanged
}

// ExitCode returns the exit code of the command whose failure err reports;
// ok is false when err is not a command failure of RunExec. The code is -1
// when the command did not exit by itself (it was killed, or never started).
func ExitCode(err error) (code int, ok bool) {
	var e *execError
	if errors.As(err, &e) && e.err != nil {
		return e.exitCode, true
	}
	return 0, false
}

// StderrTail returns the end of the standard error of the command whose
// failure err reports, or "".
func StderrTail(err error) string {
	var e *execError
	if errors.As(err, &e) {
		return e.stderr
	}
	return ""
}

// RunExec migrates the config in exec mode, as Ganeti's cfgupgrade does: it
// reads the config's version, runs command locally with "sh -c" (the command
// is the operator's; the caller has substituted its placeholders with quoted
// values), then reads the version again, which must have want's MAJOR.MINOR.
//
// The command gets no standard input and runs in its own process group;
// cancelling ctx kills the group. The report's Output holds the tail of its
// standard output and error, and Diff the change to the config. A failure of
// the command carries its exit code and the tail of its standard error (see
// ExitCode and StderrTail); when the config's version did not change,
// Unchanged(err) is true.
func RunExec(ctx context.Context, spec Spec, command string, want string) (Report, error) {
	if err := spec.checkFile(); err != nil {
		return Report{}, err
	}
	wantMajor, wantMinor, err := parseWant(want)
	if err != nil {
		return Report{}, fmt.Errorf("migrate %s: target version: %w", spec.File, err)
	}
	if strings.TrimSpace(command) == "" {
		return Report{}, fmt.Errorf("migrate %s: the migration command is empty", spec.File)
	}
	before, err := os.ReadFile(spec.File)
	if err != nil {
		return Report{}, fmt.Errorf("read config: %w", err)
	}
	from, err := VersionOf(before, spec)
	if err != nil {
		return Report{}, err
	}

	var output, stderr tailBuffer
	output.max, stderr.max = outputTail, stderrTail
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Env = nodes.LocalEnv()
	cmd.Stdout = &output
	cmd.Stderr = teeWriter{&output, &stderr}
	cmd.WaitDelay = 5 * time.Second
	isolate(cmd)
	runErr := cmd.Run()

	rep := Report{From: from, Output: output.String()}
	after, readErr := os.ReadFile(spec.File)
	to, verErr := "", readErr
	if readErr == nil {
		to, verErr = VersionOf(after, spec)
	}
	if verErr == nil {
		rep.To = to
		rep.Diff = prettyDiff(spec, from, to, before, after)
	}

	if runErr != nil {
		e := &execError{err: runErr, ctxErr: ctx.Err(), exitCode: -1, stderr: strings.TrimSpace(stderr.String())}
		var exitErr *exec.ExitError
		if errors.As(runErr, &exitErr) {
			e.exitCode = exitErr.ExitCode()
		}
		state := "config version still " + from
		switch {
		case verErr != nil:
			state = "config unreadable after it: " + verErr.Error()
		case to != from:
			state = "config version changed from " + from + " to " + to
		default:
			e.unchanged = true
		}
		why := runErr.Error()
		if e.ctxErr != nil {
			why += " (" + e.ctxErr.Error() + ")"
		}
		e.msg = fmt.Sprintf("migrate %s: command %q failed: %s; %s", spec.File, command, why, state)
		if e.stderr != "" {
			e.msg += "; stderr: " + e.stderr
		}
		return rep, e
	}
	if verErr != nil {
		return rep, fmt.Errorf("migrate %s: after command %q: %w", spec.File, command, verErr)
	}
	if v, _ := parseVersion(to); v.major != wantMajor || v.minor != wantMinor {
		return rep, &execError{
			unchanged: to == from,
			msg: fmt.Sprintf("migrate %s: after command %q the config version is %s, want %s",
				spec.File, command, to, minorName(wantMajor, wantMinor)),
		}
	}
	// The command may not have synced what it wrote: the migration is not
	// done before the config is on stable storage.
	if err := syncConfig(spec.File); err != nil {
		return rep, fmt.Errorf("migrate %s: after command %q: %w", spec.File, command, err)
	}
	return rep, nil
}

// syncConfig fsyncs the config file name and its directory; when name is a
// symbolic link, the file it names, that file's directory and the link's.
func syncConfig(name string) error {
	real, err := filepath.EvalSymlinks(name)
	if err != nil {
		return fmt.Errorf("sync %s: %w", name, err)
	}
	if err := syncFile(real); err != nil {
		return err
	}
	if dir := filepath.Dir(name); dir != filepath.Dir(real) {
		return syncDir(dir)
	}
	return nil
}

// parseWant accepts a full version or a MAJOR.MINOR.
func parseWant(want string) (major, minor int, err error) {
	if v, err := parseVersion(want); err == nil {
		return v.major, v.minor, nil
	}
	if major, minor, err := parseSeries(want); err == nil {
		return major, minor, nil
	}
	_, err = parseVersion(want)
	return 0, 0, err
}

// prettyDiff diffs two config documents as Migrate does; "" if either is not
// JSON.
func prettyDiff(spec Spec, from, to string, before, after []byte) string {
	a, err := decodeJSON(before)
	if err != nil {
		return ""
	}
	b, err := decodeJSON(after)
	if err != nil {
		return ""
	}
	pa, err1 := encodeJSON(a)
	pb, err2 := encodeJSON(b)
	if err1 != nil || err2 != nil {
		return ""
	}
	return unifiedDiff(spec.name()+" "+from, spec.name()+" "+to, pa, pb)
}

// tailBuffer keeps the last max bytes written to it; it is safe for
// concurrent writers.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
	cut bool // whether the start of the output was dropped
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
		t.cut = true
	}
	return len(p), nil
}

// String returns the kept tail, starting at a line when it was cut.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if len(b) > t.max || t.cut {
		b = b[max(0, len(b)-t.max):]
		if i := bytes.IndexByte(b, '\n'); i >= 0 && i < len(b)-1 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// teeWriter writes to both of its writers.
type teeWriter [2]*tailBuffer

func (w teeWriter) Write(p []byte) (int, error) {
	w[0].Write(p)
	return w[1].Write(p)
}
