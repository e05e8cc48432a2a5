package cfgupgrade

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// quote quotes s for sh, as the caller of RunExec does with placeholders.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// script returns a command running a script of testdata/exec with args.
func script(t *testing.T, name string, args ...string) string {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join("testdata", "exec", name))
	if err != nil {
		t.Fatal(err)
	}
	cmd := "sh " + quote(abs)
	for _, a := range args {
		cmd += " " + quote(a)
	}
	return cmd
}

func requireSh(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("sh is needed: %v", err)
		}
		t.Skipf("sh is needed: %v", err)
	}
}

func TestRunExec(t *testing.T) {
	t.Parallel()
	requireSh(t)
	tests := []struct {
		name      string
		command   func(file string) string
		want      string
		wantTo    string // the config version after
		wantErr   string // "" for success
		unchanged bool
		exitCode  int // when the command failed
		stderr    string
		output    string // a line the output must hold
	}{
		{name: "migrates",
			command: func(f string) string { return script(t, "bump.sh", f, "1.0.0", "1.1.0") },
			want:    "1.1.0", wantTo: "1.1.0", output: "config upgraded from 1.0.0 to 1.1.0\n"},
		{name: "want as MAJOR.MINOR",
			command: func(f string) string { return script(t, "bump.sh", f, "1.0.0", "1.1.2") },
			want:    "1.1", wantTo: "1.1.2"},
		{name: "fails without changing the config",
			command: func(string) string { return script(t, "fail.sh") },
			want:    "1.1.0", wantTo: "1.0.0",
			wantErr: "failed: exit status 3; config version still 1.0.0; stderr: error: cannot lock the config", unchanged: true,
			exitCode: 3, stderr: "error: cannot lock the config: resource temporarily unavailable",
			output: "checking config\n"},
		{name: "fails after changing the config",
			command: func(f string) string { return script(t, "bump-then-fail.sh", f, "1.0.0", "1.1.0") },
			want:    "1.1.0", wantTo: "1.1.0",
			wantErr:  "failed: exit status 4; config version changed from 1.0.0 to 1.1.0; stderr: error: writing the ssconf files failed",
			exitCode: 4, stderr: "error: writing the ssconf files failed"},
		{name: "sets the wrong version",
			command: func(f string) string { return script(t, "bump.sh", f, "1.0.0", "1.2.0") },
			want:    "1.1.0", wantTo: "1.2.0",
			wantErr: "the config version is 1.2.0, want 1.1"},
		{name: "succeeds without migrating",
			command: func(string) string { return "true" },
			want:    "1.1.0", wantTo: "1.0.0",
			wantErr: "the config version is 1.0.0, want 1.1", unchanged: true},
		{name: "breaks the config",
			command: func(f string) string { return "echo garbage > " + quote(f) },
			want:    "1.1.0",
			wantErr: "not a JSON document"},
		{name: "breaks the config and fails",
			command: func(f string) string { return "rm " + quote(f) + "; exit 1" },
			want:    "1.1.0",
			wantErr: "exit status 1; config unreadable after it", exitCode: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spec := installConfig(t, demoFixture, 0o600)
			rep, err := RunExec(context.Background(), spec, tt.command(spec.File), tt.want)
			if !errorMatches(err, tt.wantErr) {
				t.Fatalf("RunExec error = %v, want error containing %q", err, tt.wantErr)
			}
			if got := Unchanged(err); got != tt.unchanged {
				t.Errorf("Unchanged(%v) = %v, want %v", err, got, tt.unchanged)
			}
			code, ok := ExitCode(err)
			if ok != (tt.exitCode != 0) || code != tt.exitCode {
				t.Errorf("ExitCode(%v) = %d, %v; want %d", err, code, ok, tt.exitCode)
			}
			if got := StderrTail(err); got != tt.stderr {
				t.Errorf("StderrTail = %q, want %q", got, tt.stderr)
			}
			if rep.From != "1.0.0" || rep.To != tt.wantTo {
				t.Errorf("report = %s to %s, want 1.0.0 to %s", rep.From, rep.To, tt.wantTo)
			}
			if !strings.Contains(rep.Output, tt.output) || !strings.Contains(rep.Output, tt.stderr) {
				t.Errorf("report output = %q, want it to hold %q and %q", rep.Output, tt.output, tt.stderr)
			}
			if changed := tt.wantTo != "" && tt.wantTo != "1.0.0"; changed != strings.Contains(rep.Diff, `+  "version": "`+tt.wantTo+`"`) {
				t.Errorf("report diff =\n%s\nwant one that shows the version change: %v", rep.Diff, changed)
			}
		})
	}
}

func TestRunExecRefusesBeforeRunning(t *testing.T) {
	t.Parallel()
	requireSh(t)
	spec := installConfig(t, demoFixture, 0o600)
	marker := filepath.Join(t.TempDir(), "ran")
	touch := "touch " + quote(marker)
	tests := []struct {
		name    string
		spec    Spec
		command string
		want    string
		wantErr string
	}{
		{"empty command", spec, "  ", "1.1.0", "the migration command is empty"},
		{"bad target", spec, touch, "next", `target version: version "next"`},
		{"relative file", Spec{File: "config.json", VersionKey: "/version", Encoding: Semver}, touch, "1.1.0", "not an absolute path"},
		{"missing file", Spec{File: spec.File + ".missing", VersionKey: "/version", Encoding: Semver}, touch, "1.1.0", "read config"},
		{"unreadable version", Spec{File: spec.File, VersionKey: "/version", Encoding: Ganeti}, touch, "1.1.0", "want a number"},
	}
	for _, tt := range tests {
		_, err := RunExec(context.Background(), tt.spec, tt.command, tt.want)
		if !errorMatches(err, tt.wantErr) {
			t.Errorf("%s: RunExec error = %v, want error containing %q", tt.name, err, tt.wantErr)
		}
		if Unchanged(err) {
			t.Errorf("%s: Unchanged is true for an error before the command ran", tt.name)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("a refused RunExec ran its command")
	}
}

// TestRunExecCancel checks that cancelling the context stops the command and
// everything it started, and that the config counts as unchanged.
func TestRunExecCancel(t *testing.T) {
	t.Parallel()
	requireSh(t)
	spec := installConfig(t, demoFixture, 0o600)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	// The subshell keeps the output pipe open: only killing the whole
	// process group ends the command quickly.
	_, err := RunExec(ctx, spec, "(sleep 30; echo late); echo done", "1.1.0")
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("RunExec took %v after its context was cancelled", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !Unchanged(err) {
		t.Errorf("RunExec error = %v, want a failure for the deadline with the config unchanged", err)
	}
	if code, ok := ExitCode(err); !ok || code != -1 {
		t.Errorf("ExitCode = %d, %v; want -1 for a killed command", code, ok)
	}
}

func TestTailBuffer(t *testing.T) {
	t.Parallel()
	b := tailBuffer{max: 10}
	for _, s := range []string{"first line\n", "second\n", "third\n"} {
		b.Write([]byte(s))
	}
	if got := b.String(); got != "third\n" {
		t.Errorf("tail = %q, want %q", got, "third\n")
	}
	b = tailBuffer{max: 10}
	b.Write([]byte(strings.Repeat("x", 25)))
	if got := b.String(); got != strings.Repeat("x", 10) {
		t.Errorf("tail of one long line = %q, want 10 x", got)
	}
}
