package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/upgrade"
)

// execution describes what an earlier, interrupted execution of an upgrade 1.0.0 -> 1.1.0
// left behind: the stages it completed (through), the one it was in when it died (in, only
// started), its facts, its direction of travel and the stages its undo already undid.
type execution struct {
	through string // the last stage completed
	in      string // a stage started after it, not finished ("" for none)
	failed  error  // in failed with this message (instead of dying in it)
	facts   map[string]string
	travel  journal.Travel
	undone  []string
	// ponrCleared: the point-of-no-return stage failed without changing anything, and the
	// runner cleared the mark.
	ponrCleared bool
}

// interrupted writes the journal and the intent of an earlier execution, and makes the world
// as that execution left it: the links switched once the switch ran, the config migrated once
// config-upgrade completed.
func interrupted(t *testing.T, lc *localCluster, ex execution) uint64 {
	t.Helper()
	ctx := context.Background()
	lc.mkdir("state")
	store := journal.NewStore(lc.path("state/journal.db"))
	host, _ := os.Hostname()
	run, err := store.CreateRun(ctx, journal.Run{Kind: "upgrade", From: "1.0.0", To: "1.1.0", Direction: "upgrade", Host: host, PID: 4242, Facts: ex.facts})
	if err != nil {
		t.Fatal(err)
	}
	rec := func(stage string, i int, st journal.State, msg string) {
		t.Helper()
		if _, err := store.Record(ctx, run.ID, journal.Event{Stage: stage, Index: i + 1, State: st, Message: msg}); err != nil {
			t.Fatal(err)
		}
	}
	stages := upgrade.Stages()
	ponr := upgrade.PONRStage(stages, upgrade.Up)
	for i, st := range stages {
		name := st.Name()
		if name == ponr {
			if err := store.SetPastPONR(ctx, run.ID, true); err != nil {
				t.Fatal(err)
			}
		}
		rec(name, i, journal.Started, "")
		if name == ex.in {
			if ex.failed != nil {
				rec(name, i, journal.Failed, ex.failed.Error())
			}
			break
		}
		rec(name, i, journal.Done, "")
		switch name {
		case "switch":
			lc.relink("1.1.0")
		case "config-upgrade":
			lc.write("var/lib/app/config.json", "{\n  \"title\": \"demo\",\n  \"version\": \"1.1.0\"\n}\n")
		}
		if name == ex.through && ex.in == "" {
			break
		}
	}
	if ex.ponrCleared {
		if err := store.SetPastPONR(ctx, run.ID, false); err != nil {
			t.Fatal(err)
		}
	}
	if ex.travel != "" {
		if err := store.SetTravel(ctx, run.ID, ex.travel); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range ex.undone {
		rec(name, 0, journal.Undone, "")
	}
	err = journal.WriteIntent(lc.path("state/intent.json"), journal.Intent{RunID: run.ID, From: "1.0.0", To: "1.1.0", Direction: "upgrade",
		Host: host, PID: 4242, App: "app", Config: lc.cfg, StateDir: lc.path("state")})
	if err != nil {
		t.Fatal(err)
	}
	return run.ID
}

// relink points both links at version's trees, as a switch does.
func (lc *localCluster) relink(version string) {
	lc.t.Helper()
	for _, l := range []string{"lib", "share"} {
		if err := os.Remove(lc.path("etc/app/" + l)); err != nil {
			lc.t.Fatal(err)
		}
		lc.symlink("/usr/"+l+"/app/"+version, "etc/app/"+l)
	}
}

// journalRun reads the only run of the journal.
func (lc *localCluster) journalRun() journal.Run {
	lc.t.Helper()
	runs, err := journal.NewStore(lc.path("state/journal.db")).Runs(context.Background())
	if err != nil || len(runs) != 1 {
		lc.t.Fatalf("journal runs = %v, %v; want one", runs, err)
	}
	return runs[0]
}

// atSource checks that the cluster is exactly where the run started: links, config, no intent.
func (lc *localCluster) atSource(config string) {
	lc.t.Helper()
	if lib, share := lc.readlink("etc/app/lib"), lc.readlink("etc/app/share"); lib != "/usr/lib/app/1.0.0" || share != "/usr/share/app/1.0.0" {
		lc.t.Errorf("links -> %s, %s; want the source 1.0.0", lib, share)
	}
	if got := lc.read("var/lib/app/config.json"); got != config {
		lc.t.Errorf("config = %q, want it untouched: %q", got, config)
	}
	if _, err := os.Stat(lc.path("state/intent.json")); !os.IsNotExist(err) {
		lc.t.Errorf("intent after the run ended: %v, want none", err)
	}
}

// TestInterruptedRuns are the ways an interrupted run used to strand the cluster: each
// starts from what an earlier execution left behind, runs what cron or the operator runs,
// and checks that the cluster ends exactly at the source, with a journal that says so.
func TestInterruptedRuns(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name  string
		ex    execution
		setup func(lc *localCluster)
		args  []string
		code  int
		// calls must appear in this order among the commands the recovery ran; never
		// must not appear at all.
		calls   []string
		never   []string
		outcome journal.Outcome
	}{
		{
			name:  "a resumed run that fails undoes what the first execution did",
			ex:    execution{through: "switch", facts: map[string]string{"queue_was_drained": "no"}},
			setup: func(lc *localCluster) { lc.setCommand("daemons_stop", "echo cannot stop >&2; exit 7") },
			args:  []string{"upgrade", "--resume"}, code: exitFailed,
			calls: []string{"start", "undrain"}, never: []string{"ensure-dirs"},
			outcome: journal.RolledBack,
		},
		{
			name: "a run that was rolling back is finished backwards, never pushed forward",
			ex:   execution{through: "stop-master", in: "reverify", failed: boom, travel: journal.RollingBack, undone: []string{"reverify"}, facts: map[string]string{"queue_was_drained": "no"}},
			args: []string{"upgrade", "--resume"}, code: exitFailed,
			calls: []string{"start", "undrain"}, never: []string{"drain", "ensure-dirs", "stop"},
			outcome: journal.RolledBack,
		},
		{
			name: "an undo never undrains a queue whose earlier state was never learned",
			ex:   execution{through: "intent", in: "drain"},
			args: []string{"upgrade", "--abort"}, code: exitOK,
			never:   []string{"undrain", "drain"},
			outcome: journal.Aborted,
		},
		{
			name: "an exec-mode PONR stage that changed nothing, then a crash in its rollback: abort finishes it",
			ex:   execution{through: "switch", in: "config-upgrade", failed: boom, ponrCleared: true, travel: journal.RollingBack, facts: map[string]string{"queue_was_drained": "no"}},
			args: []string{"upgrade", "--abort"}, code: exitOK,
			calls: []string{"start", "undrain"}, never: []string{"ensure-dirs"},
			outcome: journal.Aborted,
		},
		{
			name: "the same, resumed at boot: the undo is finished, the new daemons never start",
			ex:   execution{through: "switch", in: "config-upgrade", failed: boom, ponrCleared: true, travel: journal.RollingBack, facts: map[string]string{"queue_was_drained": "no"}},
			args: []string{"upgrade", "--resume"}, code: exitFailed,
			calls: []string{"start", "undrain"}, never: []string{"ensure-dirs", "post-upgrade 1.0.0"},
			outcome: journal.RolledBack,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
			config := lc.read("var/lib/app/config.json")
			interrupted(t, lc, tt.ex)
			if tt.setup != nil {
				tt.setup(lc)
			}
			code, out, errOut := lc.cutover(tt.args...)
			if code != tt.code {
				t.Errorf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(tt.args, " "), code, tt.code, out, errOut)
			}
			lc.atSource(config)
			calls := strings.Fields(strings.ReplaceAll(lc.read("calls"), " ", "_"))
			next := 0
			for _, c := range calls {
				if next < len(tt.calls) && c == strings.ReplaceAll(tt.calls[next], " ", "_") {
					next++
				}
				for _, n := range tt.never {
					if c == strings.ReplaceAll(n, " ", "_") {
						t.Errorf("the recovery ran %q; commands: %q", n, calls)
					}
				}
			}
			if next < len(tt.calls) {
				t.Errorf("commands %q lack %q in that order", calls, tt.calls)
			}
			if got := lc.journalRun(); got.Outcome != tt.outcome {
				t.Errorf("journal outcome = %s, want %s", got.Outcome, tt.outcome)
			}
		})
	}
}

// TestPendingRunRefusals are the cases in which a pending run must stay pending, untouched,
// and the exit code must say so.
func TestPendingRunRefusals(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, lc *localCluster)
		args    []string
		code    int
		want    string
	}{
		{"abort past the point of no return", func(t *testing.T, lc *localCluster) {
			interrupted(t, lc, execution{through: "config-upgrade", in: "ensure-dirs"})
		}, []string{"upgrade", "--abort"}, exitPastPONR, "cannot be undone"},
		{"an intent whose journal is missing", func(t *testing.T, lc *localCluster) {
			interrupted(t, lc, execution{through: "drain"})
			if err := os.Remove(lc.path("state/journal.db")); err != nil {
				t.Fatal(err)
			}
		}, []string{"upgrade", "--resume"}, exitPastPONR, "journal.db"},
		{"an intent whose journal is missing, aborted", func(t *testing.T, lc *localCluster) {
			interrupted(t, lc, execution{through: "drain"})
			if err := os.Remove(lc.path("state/journal.db")); err != nil {
				t.Fatal(err)
			}
		}, []string{"upgrade", "--abort"}, exitPastPONR, "intent.json"},
		{"--skip-node of the master", func(t *testing.T, lc *localCluster) {
			interrupted(t, lc, execution{through: "config-upgrade", in: "ensure-dirs"})
		}, []string{"upgrade", "--resume", "--skip-node", "MASTER"}, exitUsage, "the master cannot be skipped"},
		{"--skip-node of no node", func(t *testing.T, lc *localCluster) {
			interrupted(t, lc, execution{through: "config-upgrade", in: "ensure-dirs"})
		}, []string{"upgrade", "--abort", "--skip-node", "node9"}, exitPastPONR, "cannot be undone"},
		{"--skip-node with --to", func(t *testing.T, lc *localCluster) {
			interrupted(t, lc, execution{through: "drain"})
		}, []string{"upgrade", "--to=1.1.0", "--skip-node", "node2"}, exitUsage, "--skip-node goes with --resume or --abort"},
		{"the configuration of another application", func(t *testing.T, lc *localCluster) {
			interrupted(t, lc, execution{through: "drain"})
			lc.writeConfig(strings.Replace(lc.read("cutover.toml"), `app = "app"`, `app = "other"`, 1))
		}, []string{"upgrade", "--resume"}, exitUsage, `application "app"`},
		{"an intent that disagrees with its journal", func(t *testing.T, lc *localCluster) {
			id := interrupted(t, lc, execution{through: "drain"})
			host, _ := os.Hostname()
			err := journal.WriteIntent(lc.path("state/intent.json"), journal.Intent{RunID: id, From: "1.0.0", To: "9.9.9", Direction: "upgrade",
				Host: host, App: "app", Config: lc.cfg, StateDir: lc.path("state")})
			if err != nil {
				t.Fatal(err)
			}
		}, []string{"upgrade", "--resume"}, exitUsage, "disagrees with the journal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
			tt.prepare(t, lc)
			before := lc.snapshot()
			intent := lc.read("state/intent.json")
			host, _ := os.Hostname()
			args := slices.Clone(tt.args)
			for i, a := range args {
				args[i] = strings.ReplaceAll(a, "MASTER", host)
			}
			code, out, errOut := lc.cutover(args...)
			if code != tt.code || !strings.Contains(errOut, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q\nstdout:\n%s", code, errOut, tt.code, tt.want, out)
			}
			if after := lc.snapshot(); after != before {
				t.Errorf("the refusal changed the cluster:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if got := lc.read("state/intent.json"); got != intent {
				t.Errorf("the intent changed: %q, was %q", got, intent)
			}
		})
	}
}

// TestResumeReadsTheIntentUnderTheLock starts a resume while another run holds the lock and
// ends (rolls back, removes its intent) before the resume gets the lock: the resume must find
// no pending run and do nothing, not re-execute the run it saw pending before the lock.
func TestResumeReadsTheIntentUnderTheLock(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	config := lc.read("var/lib/app/config.json")
	id := interrupted(t, lc, execution{through: "drain", facts: map[string]string{"queue_was_drained": "no"}})
	host, _ := os.Hostname()
	// The node list waits for the test: the resume is held between reading its config and
	// taking the lock.
	lc.writeConfig(strings.Replace(lc.read("cutover.toml"), "[cluster]\n",
		fmt.Sprintf("[cluster]\nnodes_command = %q\n", fmt.Sprintf("while [ ! -e %s ]; do sleep 0.02; done; echo %s 127.0.0.1", lc.path("go"), host)), 1))
	lock, err := journal.AcquireLock(lc.path("state/lock"), journal.Holder{Host: host, PID: 4242})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errOut := lc.cutover("upgrade", "--resume")
		done <- result{code, out, errOut}
	}()
	time.Sleep(200 * time.Millisecond)
	// The run holding the lock ends: rolled back, intent removed, lock released.
	if err := journal.NewStore(lc.path("state/journal.db")).Finish(context.Background(), id, journal.RolledBack, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := journal.RemoveIntent(lc.path("state/intent.json")); err != nil {
		t.Fatal(err)
	}
	lock.Release()
	lc.write("go", "")
	res := <-done
	if res.code != exitOK || res.out != "" {
		t.Errorf("resume: exit %d, stdout %q, stderr %q; want exit 0 and nothing done", res.code, res.out, res.err)
	}
	if calls := lc.read("calls"); calls != "" {
		t.Errorf("the resume ran commands: %q", calls)
	}
	lc.atSource(config)
	if got := lc.journalRun().Outcome; got != journal.RolledBack {
		t.Errorf("journal outcome = %s, want rolled-back", got)
	}
}

// TestResumeKeepsRunOnHostNameMismatch: at boot the host may not have its name yet. The nodes
// name the configured master, which this host may well be: the run stays pending (exit 3),
// never archived.
func TestResumeKeepsRunOnHostNameMismatch(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	interrupted(t, lc, execution{through: "config-upgrade", in: "ensure-dirs"})
	host, _ := os.Hostname()
	lc.writeConfig(strings.Replace(lc.read("cutover.toml"), "[cluster]\n", fmt.Sprintf("[cluster]\nmaster_command = %q\n", "echo "+host), 1))
	cfg, err := upgrade.LoadConfig(lc.cfg)
	if err != nil {
		t.Fatal(err)
	}
	before, intent := lc.snapshot(), lc.read("state/intent.json")
	_, err = upgrade.Resume(context.Background(), cfg, upgrade.ResumeOptions{Hostname: "localhost", MasterWait: 100 * time.Millisecond})
	if err == nil || upgrade.IsNotMaster(err) || exitCode(err) != exitPastPONR {
		t.Errorf("Resume as %q = %v (exit %d), want the run kept pending (exit %d)", "localhost", err, exitCode(err), exitPastPONR)
	}
	if lc.read("state/intent.json") != intent || lc.snapshot() != before {
		t.Error("the resume changed the intent or the cluster")
	}
	if got := lc.journalRun().Outcome; got != journal.Running {
		t.Errorf("journal outcome = %s, want running (not archived)", got)
	}
}

// TestResumeIgnoresSIGHUP: a resume waiting for the master majority at boot outlives the
// hang-up of the session that started it, and keeps its run pending when it gives up.
func TestResumeIgnoresSIGHUP(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	interrupted(t, lc, execution{through: "drain"})
	lc.writeConfig(strings.Replace(lc.read("cutover.toml"), "[cluster]\n", "[cluster]\nmaster_command = \"exit 1\"\n", 1))
	cfg, err := upgrade.LoadConfig(lc.cfg)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		_ = syscall.Kill(os.Getpid(), syscall.SIGHUP) // kills this test binary unless ignored
	}()
	_, err = upgrade.Resume(context.Background(), cfg, upgrade.ResumeOptions{MasterWait: time.Second})
	if exitCode(err) != exitPastPONR {
		t.Errorf("Resume = %v (exit %d), want the run kept pending (exit %d)", err, exitCode(err), exitPastPONR)
	}
}

// TestConfirmInterrupted: SIGINT at the question answers at once, without waiting for Enter.
func TestConfirmInterrupted(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	cfg, err := upgrade.LoadConfig(lc.cfg)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := upgrade.Inventory(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &upgrade.Run{Target: upgrade.Target{From: "1.0.0", To: "1.1.0", Direction: upgrade.Up}, Config: cfg, Inventory: inv, Online: inv.Online()}
	in, _ := io.Pipe() // the operator never answers
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	done := make(chan error, 1)
	go func() { done <- confirm(ctx, in, io.Discard, r) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "nothing was changed") {
			t.Errorf("confirm after SIGINT = %v, want a refusal", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("confirm still waits for Enter 5 s after SIGINT")
	}
}

// TestStatusInterruptedRun: a run the journal calls running while no process holds the run
// lock (its process died, as a killed restore's does) is shown interrupted, not running.
func TestStatusInterruptedRun(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	lc.mkdir("state")
	store := journal.NewStore(lc.path("state/journal.db"))
	host, _ := os.Hostname()
	if _, err := store.CreateRun(context.Background(), journal.Run{Kind: "restore", From: "1.1.0", To: "1.0.0", Direction: "restore", Host: host, PID: 4242}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := lc.cutover("--output", "json", "status")
	if code != 0 {
		t.Fatalf("status: exit %d\n%s%s", code, out, errOut)
	}
	var doc struct {
		LastRun struct {
			Outcome string `json:"outcome"`
		} `json:"last_run"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("status document: %v\n%s", err, out)
	}
	if doc.LastRun.Outcome != "interrupted" {
		t.Errorf("last run %q, want interrupted", doc.LastRun.Outcome)
	}
}

// TestResumeQuorumWithoutALostNode: a two-node cluster that lost a node past the point of no
// return. The resume's master check cannot reach a majority of the two: it keeps the run
// pending (exit 3) and names each node and what it answered. Declared gone (--skip-node), the
// lost node leaves the vote: the master's own answer decides, which the journal records, and
// the run goes on.
func TestResumeQuorumWithoutALostNode(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	interrupted(t, lc, execution{through: "config-upgrade", in: "ensure-dirs"})
	host, _ := os.Hostname()
	addUnreachableNode(t, lc)
	lc.writeConfig(strings.Replace(lc.read("cutover.toml"), "[cluster]\n", fmt.Sprintf("[cluster]\nmaster_command = %q\n", "echo "+host), 1))
	cfg, err := upgrade.LoadConfig(lc.cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = upgrade.Resume(context.Background(), cfg, upgrade.ResumeOptions{Hostname: host, MasterWait: 100 * time.Millisecond})
	if exitCode(err) != exitPastPONR {
		t.Fatalf("Resume = %v (exit %d), want the run kept pending (exit %d)", err, exitCode(err), exitPastPONR)
	}
	msg := err.Error()
	for _, want := range []string{"no majority of the 2 voting nodes", "1 of them do, 2 needed", host + ` names "` + shortHost(host) + `"`, "node9 did not answer", "--skip-node"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal does not say %q: %s", want, msg)
		}
	}
	if strings.Contains(msg, "%!") {
		t.Errorf("the refusal holds a formatting error: %s", msg)
	}

	_, err = upgrade.Resume(context.Background(), cfg, upgrade.ResumeOptions{Hostname: host, MasterWait: 100 * time.Millisecond, SkipNodes: []string{"node9"}})
	if err != nil && strings.Contains(err.Error(), "master") {
		t.Fatalf("Resume --skip-node=node9 = %v, want the master check passed", err)
	}
	facts := lc.journalRun().Facts
	decided := ""
	for k, v := range facts {
		if strings.HasPrefix(k, "master-check.") {
			decided = v
		}
	}
	if !strings.Contains(decided, "1 of 1 voting nodes name this host") || !strings.Contains(decided, "node9 declared gone (--skip-node), not asked") {
		t.Errorf("the journal records the master check as %q", decided)
	}
}

// shortHost is host's first label.
func shortHost(host string) string { return strings.SplitN(host, ".", 2)[0] }

// TestPendingRefusalsNameTheWaysOut: while a run is pending, the commands that refuse to run
// name the ways out that exist: resume or abort before the point of no return, and past it
// resume only (with --skip-node), never the abort that would be refused.
func TestPendingRefusalsNameTheWaysOut(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ex    execution
		abort bool
	}{
		{"before the point of no return", execution{through: "drain"}, true},
		{"past the point of no return", execution{through: "config-upgrade", in: "ensure-dirs"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0", "1.2.0")
			interrupted(t, lc, tc.ex)
			for _, args := range [][]string{{"cfgupgrade"}, {"upgrade", "--to=1.2.0", "--yes"}} {
				code, out, errOut := lc.cutover(args...)
				msg := out + errOut
				if code == exitOK || !strings.Contains(msg, "cutover upgrade --resume") {
					t.Errorf("%v: exit %d, want a refusal naming the resume:\n%s", args, code, msg)
				}
				if got := strings.Contains(msg, "cutover upgrade --abort"); got != tc.abort {
					t.Errorf("%v: names the abort: %v, want %v:\n%s", args, got, tc.abort, msg)
				}
			}
		})
	}
}
