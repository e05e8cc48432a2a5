package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/test/cluster"
	"github.com/cutover/cutover/upgrade"
)

// holdDir is where the tests set stage holds on the master (see upgrade.HoldDirEnv). It is on
// /run, a tmpfs: a reboot clears every hold.
const holdDir = "/run/cutover-hold"

// heldRun is a cutover run started in the background with a hold on one stage.
type heldRun struct {
	done chan cluster.Result
}

// startHeld starts `cutover ARGS` on the master with a hold on stage and returns once the
// run has reached it.
func startHeld(t *testing.T, c *cluster.Cluster, stage string, args ...string) *heldRun {
	t.Helper()
	must(t, c, c.Master, fmt.Sprintf("rm -rf %[1]s && mkdir -p %[1]s/hold && touch %[1]s/hold/%[2]s", holdDir, stage))
	h := &heldRun{done: make(chan cluster.Result, 1)}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		res, err := c.Shell(ctx, c.Master, fmt.Sprintf("CUTOVER_HOLD_DIR=%s /usr/sbin/cutover %s", holdDir, strings.Join(args, " ")))
		if err != nil {
			res = cluster.Result{ExitCode: -1, Stderr: err.Error()}
		}
		h.done <- res
	}()
	deadline := time.Now().Add(2 * time.Minute)
	var poll cluster.Poll
	for sh(t, c, c.Master, fmt.Sprintf("test -e %s/reached/%s", holdDir, stage)).ExitCode != 0 {
		select {
		case res := <-h.done:
			t.Fatalf("cutover %v ended before reaching %s: exit %d\n%s%s", args, stage, res.ExitCode, res.Stdout, res.Stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("cutover %v never reached %s", args, stage)
		}
		poll.Wait()
	}
	return h
}

// release lifts the hold and waits for the run to end.
func (h *heldRun) release(t *testing.T, c *cluster.Cluster) cluster.Result {
	t.Helper()
	must(t, c, c.Master, "rm -rf "+holdDir+"/hold")
	return h.wait(t)
}

func (h *heldRun) wait(t *testing.T) cluster.Result {
	t.Helper()
	select {
	case res := <-h.done:
		t.Logf("held run: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
		return res
	case <-time.After(5 * time.Minute):
		t.Fatal("the held run did not end")
	}
	return cluster.Result{}
}

// stagesRun lists the stages a run in direction dir executes on the demo cluster, as the
// stage machine plans them with the demo's configuration (redist-conf and restart are
// skipped there: cutover copies the config itself before the daemons start). beforeIntent
// is how many of them run before the intent is written.
func stagesRun(t *testing.T, dir upgrade.Direction) (stages []string, beforeIntent int) {
	t.Helper()
	cfg, err := upgrade.LoadConfig("../../docs/examples/demo.toml")
	if err != nil {
		t.Fatal(err)
	}
	inv, err := upgrade.Inventory(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &upgrade.Run{Target: upgrade.Target{Direction: dir}, Config: cfg, Inventory: inv, Online: inv.Online()}
	for _, st := range r.StagePlan() {
		if st.Skipped {
			continue
		}
		stages = append(stages, st.Name)
		if st.Name == "intent" {
			beforeIntent = len(stages)
		}
	}
	return stages, beforeIntent
}

// downgradeKills are the stages TestKillInEveryStage kills a downgrade in: those where a
// downgrade does what an upgrade does not (the config goes down before the switch), and the
// run's boundaries (before the intent, the intent, the daemons stopped and started, the end).
// TestCrashPoints kills a downgrade at every crash point on its one-node fixture; each case
// here is three runs on a four-node cluster.
var downgradeKills = map[string]bool{"preflight": true, "intent": true, "stop-nodes": true, "backup": true,
	"config-downgrade": true, "switch": true, "start": true, "finish": true}

// TestKillInEveryStage kills cutover with SIGKILL inside every stage of an upgrade (and of a
// downgrade, in downgradeKills), then runs `cutover upgrade --resume`: the cluster always
// converges to the target with every job done. Before the intent exists there is nothing to
// resume, the cluster is as before, the killed run is closed in the journal, and a new run
// converges.
func TestKillInEveryStage(t *testing.T) {
	for _, d := range []struct {
		name, from, to string
		dir            upgrade.Direction
	}{{"upgrade", "1.0.0", "1.1.0", upgrade.Up}, {"downgrade", "1.1.0", "1.0.0", upgrade.Down}} {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			c := cluster.New(t, cluster.Options{Live: d.from})
			all := online(c)
			stages, beforeIntent := stagesRun(t, d.dir)
			if d.dir == upgrade.Down {
				for name := range downgradeKills {
					if !slices.Contains(stages, name) {
						t.Errorf("downgradeKills names %q, which a downgrade does not run (%v)", name, stages)
					}
				}
			}
			for i, stage := range stages {
				if d.dir == upgrade.Down && !downgradeKills[stage] {
					continue
				}
				t.Run(stage, func(t *testing.T) {
					jobs := submitJobs(t, c, 1, 1)
					h := startHeld(t, c, stage, "upgrade", "--to="+d.to, "--yes")
					must(t, c, c.Master, "pkill -KILL -x cutover")
					if res := h.wait(t); res.ExitCode != 137 {
						t.Errorf("killed run: exit %d, want 137", res.ExitCode)
					}
					must(t, c, c.Master, "rm -rf "+holdDir)
					res := cutover(t, c, "upgrade", "--resume")
					if res.ExitCode != 0 {
						t.Fatalf("resume after a kill in %s: exit %d", stage, res.ExitCode)
					}
					if i < beforeIntent {
						// Killed before the intent was written (a hold stops a stage before
						// its work): nothing to resume, nothing changed.
						if res.Stdout != "" {
							t.Errorf("resume without an intent printed %q, want nothing", res.Stdout)
						}
						checkAt(t, c, d.from, all...)
						if res := cutover(t, c, "upgrade", "--to="+d.to, "--yes"); res.ExitCode != 0 {
							t.Fatalf("a new run after a kill in %s: exit %d", stage, res.ExitCode)
						}
					}
					checkAt(t, c, d.to, all...)
					checkQueue(t, c, jobs)
					for _, r := range runs(t, c) {
						if r.Outcome == journal.Running {
							t.Errorf("run %d is still running in the journal", r.ID)
						}
					}
					if rs := runs(t, c); rs[len(rs)-1].Outcome != journal.Succeeded {
						t.Errorf("run %d after resume: %s, want done", rs[len(rs)-1].ID, rs[len(rs)-1].Outcome)
					}
					// Back to where the next stage's case starts.
					if res := cutover(t, c, "upgrade", "--to="+d.from, "--yes"); res.ExitCode != 0 {
						t.Fatalf("back to %s: exit %d", d.from, res.ExitCode)
					}
					checkAt(t, c, d.from, all...)
				})
			}
		})
	}
}

// TestRebootResumes hard-reboots the master inside a stage before the point of no return and
// inside one after it: the real @reboot crontab line resumes the run to completion. Then it
// reboots another node while the run has its daemons stopped: the run ends with every node
// on the target's daemons and says what happened.
func TestRebootResumes(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{})
	all := online(c)
	ctx := context.Background()
	for _, tc := range []struct{ stage, from, to string }{{"stop-nodes", "1.0.0", "1.1.0"}, {"start", "1.1.0", "1.2.0"}} {
		jobs := submitJobs(t, c, 2, 1)
		h := startHeld(t, c, tc.stage, "upgrade", "--to="+tc.to, "--yes")
		if err := c.Reboot(ctx, c.Master); err != nil {
			t.Fatal(err)
		}
		h.wait(t)
		deadline := time.Now().Add(3 * time.Minute)
		for sh(t, c, c.Master, "test -e /var/lib/cutover/intent.json").ExitCode == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("reboot in %s: the @reboot resume did not finish the run:\n%s", tc.stage, sh(t, c, c.Master, "cat /var/log/cutover-resume.log").Stdout)
			}
			time.Sleep(time.Second)
		}
		t.Logf("resume at boot after a reboot in %s:\n%s", tc.stage, must(t, c, c.Master, "cat /var/log/cutover-resume.log"))
		checkAt(t, c, tc.to, all...)
		checkQueue(t, c, jobs)
		rs := runs(t, c)
		if r := rs[len(rs)-1]; r.Outcome != journal.Succeeded || r.To != tc.to {
			t.Errorf("run %d: %s -> %s %s, want done", r.ID, r.From, r.To, r.Outcome)
		}
	}

	// A node rebooted for real while its daemons are stopped: its boot hook starts the daemon
	// of whatever its links name at boot, under the run's feet. Between stop-nodes and the
	// switch (a downgrade past its point of no return: the links still name 1.2.0), and
	// between the switch and the start (an upgrade: the links already name 1.2.0).
	for _, tc := range []struct{ stage, node, to string }{{"switch", "node2", "1.1.0"}, {"start", "node3", "1.2.0"}} {
		h := startHeld(t, c, tc.stage, "upgrade", "--to="+tc.to, "--yes")
		if err := c.Reboot(ctx, tc.node); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitDaemon(ctx, tc.node); err != nil {
			t.Fatalf("%s: the boot hook started no daemon: %v", tc.node, err)
		}
		res := h.release(t, c)
		if res.ExitCode != 0 {
			t.Fatalf("%s rebooted before %s: exit %d\n%s%s", tc.node, tc.stage, res.ExitCode, res.Stdout, res.Stderr)
		}
		if want := tc.node + ": the node booted since its daemons were stopped"; !strings.Contains(res.Stdout+res.Stderr, want) {
			t.Errorf("%s rebooted before %s: the output does not say %q", tc.node, tc.stage, want)
		}
		log := must(t, c, c.Master, "cat $(ls -t /var/lib/cutover/log/run-*.log | head -n 1)")
		if !strings.Contains(log, tc.node+": the node booted since its daemons were stopped") {
			t.Errorf("%s rebooted before %s: the run log does not say so", tc.node, tc.stage)
		}
		checkAt(t, c, tc.to, all...)
		rs := runs(t, c)
		r := rs[len(rs)-1]
		if r.Outcome != journal.Succeeded || r.To != tc.to {
			t.Errorf("run %d: %s -> %s %s, want done", r.ID, r.From, r.To, r.Outcome)
		}
		if out := must(t, c, c.Master, fmt.Sprintf("/usr/sbin/cutover journal %d", r.ID)); !strings.Contains(out, tc.node+": the node booted since its daemons were stopped") {
			t.Errorf("run %d: the journal does not record that %s rebooted:\n%s", r.ID, tc.node, out)
		}
	}
}

// TestSignalsAndLock: SIGTERM before the point of no return rolls back to exactly the state
// before; SIGTERM and SIGHUP after it are ignored; a second run exits 4 at once.
func TestSignalsAndLock(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{})
	submitJobs(t, c, 1, 1)
	checkQueue(t, c, nil)
	before := snapshot(t, c)
	configBytes := must(t, c, c.Master, "cat /var/lib/demoapp/config.json")

	// The first run stays held at backup until it is signalled below: a second run that
	// waited for the lock instead of being refused would never end (the helper gives up
	// after minutes and fails the test).
	h := startHeld(t, c, "backup", "upgrade", "--to=1.1.0", "--yes")
	second := cutover(t, c, "upgrade", "--to=1.1.0", "--yes")
	if second.ExitCode != 4 || !strings.Contains(second.Stderr, "holds the lock") || !strings.Contains(second.Stderr, "node1") {
		t.Errorf("second run: exit %d %q, want 4 naming the holder", second.ExitCode, second.Stderr)
	}
	must(t, c, c.Master, "pkill -TERM -x cutover")
	res := h.wait(t)
	if res.ExitCode != 1 || !strings.Contains(res.Stderr, "interrupted") {
		t.Errorf("SIGTERM before the PONR: exit %d, want 1 and interrupted", res.ExitCode)
	}
	if after := snapshot(t, c); after != before {
		t.Errorf("SIGTERM before the PONR changed the cluster:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if got := must(t, c, c.Master, "cat /var/lib/demoapp/config.json"); got != configBytes {
		t.Errorf("config bytes changed")
	}

	h = startHeld(t, c, "ensure-dirs", "upgrade", "--to=1.1.0", "--yes")
	must(t, c, c.Master, "pkill -TERM -x cutover; pkill -HUP -x cutover; pkill -INT -x cutover")
	time.Sleep(500 * time.Millisecond)
	res = h.release(t, c)
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "ignored") {
		t.Errorf("signals after the PONR: exit %d, want 0 with the signals reported as ignored", res.ExitCode)
	}
	checkAt(t, c, "1.1.0", online(c)...)

	// A reader that goes away (a closed stdout, a lost terminal) does not stop the run.
	out := must(t, c, c.Master, `bash -c '/usr/sbin/cutover upgrade --to=1.2.0 --yes | head -c 1 >/dev/null; echo "${PIPESTATUS[0]}"'`)
	if out != "0" {
		t.Errorf("cutover with a closed stdout: exit %s, want 0", out)
	}
	checkAt(t, c, "1.2.0", online(c)...)
}

// TestNodeFaults: a node powered off during the drain makes reverify refuse and undo; a node
// cut off during a downgrade's switch (past its point of no return) makes the run push
// through and exit 3, and a resume after healing brings it to the target.
func TestNodeFaults(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{Live: "1.1.0"})
	ctx := context.Background()
	before := snapshot(t, c)

	h := startHeld(t, c, "drain", "upgrade", "--to=1.2.0", "--yes")
	if err := c.PowerOff(ctx, "node3"); err != nil {
		t.Fatal(err)
	}
	res := h.release(t, c)
	if res.ExitCode != 1 || !strings.Contains(res.Stdout, "reverify") || !strings.Contains(res.Stdout, "node3") {
		t.Errorf("power-off during the drain: exit %d, want 1 with reverify failing on node3", res.ExitCode)
	}
	if err := c.PowerOn(ctx, "node3"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitDaemon(ctx, "node3"); err != nil {
		t.Fatal(err)
	}
	if after := snapshot(t, c); after != before {
		t.Errorf("a refused run changed the cluster:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	h = startHeld(t, c, "switch", "upgrade", "--to=1.0.0", "--yes")
	if err := c.Cut(ctx, "node3"); err != nil {
		t.Fatal(err)
	}
	res = h.release(t, c)
	if res.ExitCode != 3 || !strings.Contains(res.Stdout+res.Stderr, "node3") || !strings.Contains(res.Stderr, "--resume") {
		t.Errorf("cut during the switch: exit %d, want 3 naming node3 and --resume", res.ExitCode)
	}
	checkAt(t, c, "1.0.0", "node1", "node2", "node4")
	// node3 stays gone: every resume exits 3 until it is declared gone for the run, which
	// then ends done without it; sync catches it up once it is back.
	if res := cutover(t, c, "upgrade", "--resume"); res.ExitCode != 3 || !strings.Contains(res.Stderr, "--skip-node") {
		t.Errorf("resume with node3 still cut off: exit %d, want 3 pointing to --skip-node\n%s", res.ExitCode, res.Stderr)
	}
	if res := cutover(t, c, "upgrade", "--resume", "--skip-node=node3"); res.ExitCode != 0 {
		t.Fatalf("resume --skip-node=node3: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	checkAt(t, c, "1.0.0", "node1", "node2", "node4")
	rs := runs(t, c)
	if r := rs[len(rs)-1]; r.Outcome != journal.Succeeded || !slices.Contains(r.Offline, "node3") {
		t.Errorf("run %d: %s with offline %v, want done with node3 offline", r.ID, r.Outcome, r.Offline)
	}
	if err := c.Heal(ctx, "node3"); err != nil {
		t.Fatal(err)
	}
	if res := cutover(t, c, "sync", "--yes", "node3"); res.ExitCode != 0 {
		t.Fatalf("sync node3 after healing: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	checkAt(t, c, "1.0.0", online(c)...)
}
