package upgrade_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/nodes/sshdtest"
	"github.com/cutover/cutover/upgrade"
)

// keepaliveBound is how long a connection to a node that stopped answering may take to be
// declared dead: the default keepalives (every 5 s, 3 unanswered), one interval of slack for
// where in its interval the node went, and a little for a loaded machine.
const keepaliveBound = (nodes.DefaultKeepaliveMax+1)*nodes.DefaultKeepaliveInterval + 2*time.Second

// BenchmarkNodeDies runs an upgrade on the largest cluster size measured and freezes one node
// in the middle of the list once the config is migrated (cutover is held at ensure-dirs): its
// sshd stops answering as a node that lost power does, so only keepalives can tell. The run
// must push through and exit 3 naming that node, notice it within the keepalive bound, and
// finish the stage on every other node as fast as without it; `--resume` then converges once
// the node answers again. It reports how long the stage took to give the node up
// (s-noticed), the slowest other node in that stage (s-others-max) and the whole run (s-run).
func BenchmarkNodeDies(b *testing.B) {
	bin := buildCutover(b)
	n := slices.Max(benchNodes)
	b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
		c := sshdtest.Start(b, n)
		sc := newSSHCluster(b, c, benchParallel)
		victim := c.Servers[n/2]
		name := fmt.Sprintf("node%d", n/2+2) // the cluster names its sshd nodes node2, node3, ...
		ctx := context.Background()
		var noticed, others, wall time.Duration
		for b.Loop() {
			stage, run := sc.upgradeWithFrozenNode(ctx, b, bin, victim, "ensure-dirs")
			if run.code != 3 {
				b.Fatalf("exit %d, want 3 (failed past the point of no return)\n%v", run.code, run)
			}
			if !strings.Contains(run.stderr, name+":") && !strings.Contains(run.stdout, name+":") {
				b.Errorf("the run does not name %s\n%v", name, run)
			}
			var victimSeen bool
			var slowest time.Duration
			for _, r := range stage.Nodes {
				if r.Node == name {
					victimSeen = !r.OK
					continue
				}
				if !r.OK {
					b.Errorf("ensure-dirs failed on %s too: %s", r.Node, r.Error)
				}
				slowest = max(slowest, r.Duration)
			}
			if !victimSeen {
				b.Errorf("ensure-dirs reports no failure of %s: %+v", name, stage)
			}
			if stage.Duration > keepaliveBound {
				b.Errorf("ensure-dirs gave %s up after %s, want within the keepalive bound %s", name, stage.Duration, keepaliveBound)
			}
			noticed += stage.Duration
			others = max(others, slowest)
			wall += run.wall

			resume := sc.cutover(ctx, b, bin, "upgrade", "--resume")
			if resume.code != 0 {
				b.Fatalf("resume after the node came back: exit %d\n%v", resume.code, resume)
			}
			if err := sc.checkAt("1.1.0"); err != nil {
				b.Fatal(err)
			}
			if back := sc.cutover(ctx, b, bin, "upgrade", "--to=1.0.0", "--yes"); back.code != 0 {
				b.Fatalf("downgrade back: exit %d\n%v", back.code, back)
			}
		}
		b.ReportMetric(noticed.Seconds()/float64(b.N), "s-noticed")
		b.ReportMetric(others.Seconds(), "s-others-max")
		b.ReportMetric(wall.Seconds()/float64(b.N), "s-run")
	})
}

// upgradeWithFrozenNode runs `cutover upgrade --to=1.1.0` with JSON output, holds it as stage
// starts, freezes victim's sshd, lets the run go on, and thaws victim once it has ended. It
// returns the stage's final event and the run.
func (sc *sshCluster) upgradeWithFrozenNode(ctx context.Context, b *testing.B, bin string, victim *sshdtest.Server, stage string) (upgrade.Event, cutoverRun) {
	b.Helper()
	hold := b.TempDir()
	if err := os.MkdirAll(filepath.Join(hold, "hold"), 0o700); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hold, "hold", stage), nil, 0o600); err != nil {
		b.Fatal(err)
	}
	args := []string{"--config", sc.cfg, "--output", "json", "upgrade", "--to=1.1.0", "--yes"}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(cutoverEnv(), upgrade.HoldDirEnv+"="+hold)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(hold, "reached", stage)); err == nil {
			break
		}
		if time.Since(start) > 5*time.Minute {
			cmd.Process.Kill()
			b.Fatalf("cutover did not reach %s\n%s%s", stage, stdout.String(), stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	victim.Freeze(b)
	if err := os.Remove(filepath.Join(hold, "hold", stage)); err != nil {
		b.Fatal(err)
	}
	cmd.Wait()
	victim.Thaw(b)
	run := cutoverRun{args: args, code: cmd.ProcessState.ExitCode(), wall: time.Since(start), stdout: stdout.String(), stderr: stderr.String()}
	var last upgrade.Event
	lines := bufio.NewScanner(strings.NewReader(run.stdout))
	lines.Buffer(nil, 16<<20)
	for lines.Scan() {
		var e upgrade.Event
		if json.Unmarshal(lines.Bytes(), &e) == nil && e.Type == "stage" && e.Stage == stage && e.State != "started" {
			last = e
		}
	}
	if last.Stage == "" {
		b.Fatalf("no final %s event\n%v", stage, run)
	}
	return last, run
}
