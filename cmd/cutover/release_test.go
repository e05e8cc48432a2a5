package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/upgrade"
)

// TestReleaseIgnoresTestHooks builds cutover as the package does (tag release) and runs an
// upgrade with every test hook asked for: a crash at the first point, a crash log, a hold at
// preflight. The release build has none of them: the run goes through, no log is written,
// nothing is held.
func TestReleaseIgnoresTestHooks(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	bin := filepath.Join(t.TempDir(), "cutover")
	build := exec.Command("go", "build", "-tags", "release", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags release: %v\n%s", err, out)
	}
	hold := t.TempDir()
	if err := os.MkdirAll(filepath.Join(hold, "hold"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hold, "hold", "preflight"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	crashLog := filepath.Join(t.TempDir(), "crash.log")
	cmd := exec.Command(bin, "--config", lc.cfg, "upgrade", "--to=1.1.0", "--yes")
	cmd.Env = append(os.Environ(), upgrade.CrashAtEnv+"=1", upgrade.CrashLogEnv+"="+crashLog, upgrade.HoldDirEnv+"="+hold)
	done := make(chan error, 1)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the release build with the test hooks' variables set: %v\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the release build was held:\n%s", out.String())
	}
	if _, err := os.Stat(crashLog); err == nil {
		t.Errorf("the release build wrote the crash log %s", crashLog)
	}
	if _, err := os.Stat(filepath.Join(hold, "reached")); err == nil {
		t.Errorf("the release build marked a hold as reached")
	}
	if got := lc.readlink("etc/app/lib"); got != "/usr/lib/app/1.1.0" {
		t.Errorf("after the upgrade the lib link points at %s", got)
	}
}
