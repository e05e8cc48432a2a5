package upgrade_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/nodes/sshdtest"
)

// TestSFTPServerHangs runs status and plan against a cluster whose nodes' SFTP server starts
// and then never answers (sshd's Subsystem sftp is a script that sleeps): each must end
// within connect_timeout + command_timeout, naming the nodes and saying their SFTP server did
// not answer, rather than hang on them.
func TestSFTPServerHangs(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "cutover-sftp-hang-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// sshd runs the subsystem as the login: the script must be open to it.
	script := filepath.Join(dir, "sftp-server-that-sleeps")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := sshdtest.Start(t, 2, sshdtest.WithSFTPServer(script))
	sc := newSSHCluster(t, c, 32)
	const connect, command = 2 * time.Second, 4 * time.Second
	cfg, err := os.ReadFile(sc.cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg = []byte(strings.Replace(string(cfg), "[ssh]\n", "[ssh]\nconnect_timeout = \"2s\"\ncommand_timeout = \"4s\"\n", 1))
	if err := os.WriteFile(sc.cfg, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	bin := buildCutover(t)
	// What a run takes besides the node: starting, reading the config, the master's work.
	const slack = 5 * time.Second
	for _, args := range [][]string{{"status", "--no-verify"}, {"plan", "--to=1.1.0"}} {
		t.Run(args[0], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			run := sc.cutover(ctx, t, bin, args...)
			if ctx.Err() != nil {
				t.Fatalf("cutover %s hung on the nodes whose SFTP server does not answer\n%v", args[0], run)
			}
			if limit := connect + command + slack; run.wall > limit {
				t.Errorf("cutover %s took %v, want at most connect_timeout + command_timeout (+%v) = %v\n%v", args[0], run.wall, slack, limit, run)
			}
			out := run.stdout + run.stderr
			for _, want := range []string{"node2", "node3", "did not answer within 4s"} {
				if !strings.Contains(out, want) {
					t.Errorf("cutover %s output lacks %q\n%v", args[0], want, run)
				}
			}
		})
	}
}
