package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/upgrade"
)

func TestStatusLocal(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	before := lc.snapshot()
	code, out, errOut := lc.cutover("status")
	if code != exitOK {
		t.Fatalf("status exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	host, _ := os.Hostname()
	for _, want := range []string{"app 1.0.0 on 1 node (master " + host, "1.0.0  1.0.0  1.0.0 1.1.0", "verify: ok", "pending: none"} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
	if after := lc.snapshot(); after != before {
		t.Errorf("status changed the cluster:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	assertNothingWritten(t, lc)

	code, out, _ = lc.cutover("--output", "json", "status", "--no-verify")
	if code != exitOK {
		t.Fatalf("status --output json exit %d", code)
	}
	golden(t, "status-local.json.golden", normalize(t, lc, out))
	assertNothingWritten(t, lc)
}

// cronDaemon installs a cron daemon in the local cluster's root, started at boot by its init
// script.
func cronDaemon(t *testing.T, lc *localCluster) {
	t.Helper()
	for _, dir := range []string{"usr/sbin", "etc/init.d"} {
		lc.mkdir(dir)
	}
	for _, f := range []string{"usr/sbin/cron", "etc/init.d/cron"} {
		if err := os.WriteFile(lc.path(f), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStatusShows(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, lc *localCluster)
		want  []string
	}{
		{"links disagree", func(t *testing.T, lc *localCluster) {
			os.Remove(lc.path("etc/app/share"))
			lc.symlink("/usr/share/app/1.1.0", "etc/app/share")
		}, []string{"broken", "1.0.0  1.1.0", "points to version 1.1.0", "app version unknown"}},
		{"not side by side", func(t *testing.T, lc *localCluster) {
			os.Remove(lc.path("etc/app/lib"))
			lc.mkdir("etc/app/lib")
		}, []string{"broken", "not a symlink"}},
		{"unhealthy", func(t *testing.T, lc *localCluster) {
			lc.setCommand("verify", "echo node3 FAILED unreachable; exit 1")
		}, []string{"verify: FAILED (exit 1)", "  node3 FAILED unreachable"}},
		{"unreachable node", addUnreachableNode, []string{"node9", "unreachable", "connection refused"}},
		{"interrupted run", func(t *testing.T, lc *localCluster) {
			pendingRun(t, lc, "stop-nodes", false)
		}, []string{"pending: run 1, upgrade 1.0.0 -> 1.1.0, at stop-nodes (failed", "before the point of no return", "upgrade --abort"}},
		{"interrupted past the point of no return", func(t *testing.T, lc *localCluster) {
			pendingRun(t, lc, "ensure-dirs", false)
		}, []string{"at ensure-dirs", "past the point of no return", "finish it with 'cutover upgrade --resume'"}},
		{"no resume at boot", func(t *testing.T, lc *localCluster) {}, []string{"resume at boot: none", "warning: nothing resumes an interrupted run at boot"}},
		{"resume at boot by cron", func(t *testing.T, lc *localCluster) {
			lc.mkdir("etc/cron.d")
			lc.write("etc/cron.d/cutover", "PATH=/usr/sbin:/usr/bin:/sbin:/bin\n@reboot root [ -x /usr/sbin/cutover ] && /usr/sbin/cutover upgrade --resume\n")
			cronDaemon(t, lc)
		}, []string{"resume at boot: @reboot in ", "/etc/cron.d/cutover\n"}},
		{"resume at boot by cron without a cron daemon", func(t *testing.T, lc *localCluster) {
			lc.mkdir("etc/cron.d")
			lc.write("etc/cron.d/cutover", "@reboot root [ -x /usr/sbin/cutover ] && /usr/sbin/cutover upgrade --resume\n")
		}, []string{"/etc/cron.d/cutover, which would not run\n", "warning: the @reboot line in ", "no cron daemon is installed", "apt-get install cron"}},
		{"resume at boot by root's crontab", func(t *testing.T, lc *localCluster) {
			lc.mkdir("var/spool/cron/crontabs")
			lc.write("var/spool/cron/crontabs/root", "@reboot /usr/sbin/cutover upgrade --resume\n")
		}, []string{"resume at boot: @reboot in ", "/var/spool/cron/crontabs/root"}},
		{"resume at boot by systemd", func(t *testing.T, lc *localCluster) {
			lc.mkdir("etc/systemd/system/multi-user.target.wants")
			lc.symlink("/lib/systemd/system/cutover-resume.service", "etc/systemd/system/multi-user.target.wants/cutover-resume.service")
			lc.mkdir("run/systemd/system")
			lc.mkdir("lib/systemd/system")
			lc.write("lib/systemd/system/cutover-resume.service", "[Service]\n")
		}, []string{"resume at boot: cutover-resume.service\n"}},
		{"resume at boot by systemd where systemd does not run", func(t *testing.T, lc *localCluster) {
			lc.mkdir("etc/systemd/system/multi-user.target.wants")
			lc.symlink("/lib/systemd/system/cutover-resume.service", "etc/systemd/system/multi-user.target.wants/cutover-resume.service")
			lc.mkdir("lib/systemd/system")
			lc.write("lib/systemd/system/cutover-resume.service", "[Service]\n")
		}, []string{"resume at boot: cutover-resume.service, which would not run\n", "systemd does not run this host"}},
		{"resume at boot twice", func(t *testing.T, lc *localCluster) {
			lc.mkdir("etc/cron.d")
			lc.write("etc/cron.d/cutover", "@reboot root /usr/sbin/cutover upgrade --resume\n")
			lc.mkdir("etc/systemd/system/multi-user.target.wants")
			lc.symlink("/lib/systemd/system/cutover-resume.service", "etc/systemd/system/multi-user.target.wants/cutover-resume.service")
		}, []string{"resume at boot: cutover-resume.service and @reboot in ", "warning: both would resume"}},
		{"a commented resume line does not count", func(t *testing.T, lc *localCluster) {
			lc.mkdir("etc/cron.d")
			lc.write("etc/cron.d/cutover", "#@reboot root /usr/sbin/cutover upgrade --resume\n")
		}, []string{"resume at boot: none"}},
		{"corrupt journal", func(t *testing.T, lc *localCluster) {
			lc.mkdir("state")
			lc.write("state/journal.db", "not a journal")
		}, []string{"pending: none", "warning: ", "not a valid cutover journal"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
			tt.setup(t, lc)
			before := treeSnapshot(t, lc.root)
			code, out, errOut := lc.cutover("status")
			if code != exitOK {
				t.Errorf("status exit %d, want 0\nstderr:\n%s", code, errOut)
			}
			for _, want := range tt.want {
				if !strings.Contains(out, want) {
					t.Errorf("status output lacks %q:\n%s", want, out)
				}
			}
			if after := treeSnapshot(t, lc.root); after != before {
				t.Errorf("status wrote something:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if calls := lc.read("calls"); strings.Trim(calls, "verify\n") != "" {
				t.Errorf("status ran %q, want at most verify", calls)
			}
		})
	}
}

// pendingRun records in the local cluster's journal a run 1.0.0 -> 1.1.0 whose last event
// is stage failing, writes its intent and, with held, holds the run lock as a running
// cutover would.
func pendingRun(t *testing.T, lc *localCluster, stage string, held bool) {
	t.Helper()
	ctx := context.Background()
	store := journal.NewStore(lc.path("state/journal.db"))
	run, err := store.CreateRun(ctx, journal.Run{Kind: "upgrade", From: "1.0.0", To: "1.1.0", Direction: "upgrade", Host: "node1", PID: 4242})
	if err != nil {
		t.Fatal(err)
	}
	stages := upgrade.Stages()
	ponr := upgrade.PONRStage(stages, upgrade.Up)
	for i, st := range stages {
		if st.Name() == ponr {
			// The runner marks the point of no return before its stage starts.
			if err := store.SetPastPONR(ctx, run.ID, true); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := store.Record(ctx, run.ID, journal.Event{Stage: st.Name(), Index: i + 1, State: journal.Started}); err != nil {
			t.Fatal(err)
		}
		if st.Name() == stage {
			break
		}
		if _, err := store.Record(ctx, run.ID, journal.Event{Stage: st.Name(), Index: i + 1, State: journal.Done}); err != nil {
			t.Fatal(err)
		}
	}
	if !held {
		if _, err := store.Record(ctx, run.ID, journal.Event{Stage: stage, State: journal.Failed, Message: "cut off"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := journal.WriteIntent(lc.path("state/intent.json"), journal.Intent{RunID: run.ID, From: "1.0.0", To: "1.1.0", Direction: "upgrade", Host: "node1", PID: 4242}); err != nil {
		t.Fatal(err)
	}
	if held {
		lock, err := journal.AcquireLock(lc.path("state/lock"), journal.Holder{Host: "node1", PID: 4242, Command: "cutover upgrade --to=1.1.0 --yes"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lock.Release() })
	}
}

// TestStatusDuringRun reads the status while a run holds the lock: it answers at once, names
// the run, its stage and the holder, and does not run verify.
func TestStatusDuringRun(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	pendingRun(t, lc, "backup", true)
	start := time.Now()
	code, out, errOut := lc.cutover("--output", "json", "status")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("status took %s during a run", d)
	}
	if code != exitOK {
		t.Fatalf("status exit %d\nstderr:\n%s", code, errOut)
	}
	var doc statusDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("not one JSON document: %v\n%s", err, out)
	}
	if doc.APIVersion != "cutover/v1" || doc.Kind != "Status" {
		t.Errorf("apiVersion %q kind %q", doc.APIVersion, doc.Kind)
	}
	if p := doc.Pending; p == nil || p.Run != 1 || p.Stage != "backup" || p.State != "started" || p.PastPONR {
		t.Errorf("pending = %+v, want run 1 at backup, started, before the PONR", p)
	}
	if l := doc.Lock; l == nil || l.PID != 4242 || l.Host != "node1" || l.Command != "cutover upgrade --to=1.1.0 --yes" {
		t.Errorf("lock = %+v, want pid 4242 on node1", l)
	}
	if v := doc.Verify; v == nil || v.Ran || !strings.Contains(v.Skipped, "holds the lock") {
		t.Errorf("verify = %+v, want skipped while the lock is held", v)
	}
	if strings.Contains(lc.read("calls"), "verify") {
		t.Errorf("status ran verify during a run")
	}
	if len(doc.Behind) != 0 {
		t.Errorf("behind = %+v during a run, want none", doc.Behind)
	}
	// The holder still holds the lock.
	if _, err := journal.AcquireLock(lc.path("state/lock"), journal.Holder{}); !journal.IsLocked(err) {
		t.Errorf("after status the lock is not held: %v", err)
	}
}

func TestStatusUsage(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0")
	for _, tt := range []struct {
		args     []string
		setup    func()
		wantCode int
		want     string
	}{
		{[]string{"status", "node1"}, nil, exitUsage, "takes no arguments"},
		{[]string{"status"}, func() {
			lc.writeConfig(strings.Replace(lc.read("cutover.toml"), "[commands]", "[commands]\nfrobnicate = 1", 1))
		}, exitUsage, `unknown key "commands.frobnicate"`},
	} {
		if tt.setup != nil {
			tt.setup()
		}
		code, _, errOut := lc.cutover(tt.args...)
		if code != tt.wantCode || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tt.args, code, errOut, tt.wantCode, tt.want)
		}
	}
}

// sampleStatus is the status of a four-node cluster for the printers' golden files: node3's
// links disagree, node4 is offline and behind, node2 cannot be reached; with running, a run
// holds the lock in its backup stage.
func sampleStatus(running bool) *upgrade.StatusReport {
	at := time.Date(2026, 11, 21, 18, 1, 2, 0, time.UTC)
	all := []string{"1.0.0", "1.1.0", "1.2.0"}
	st := &upgrade.StatusReport{
		App: "demoapp", Master: "node1", Version: "1.1.0",
		Nodes: []upgrade.NodeStatus{
			{Name: "node1", Address: "10.77.1.11", Reachable: true, Lib: "1.1.0", Share: "1.1.0", Live: "1.1.0", Installed: all},
			{Name: "node2", Address: "10.77.1.12", Error: "dial 10.77.1.12:22: connect: no route to host"},
			{Name: "node3", Address: "10.77.1.13", Reachable: true, Lib: "1.1.0", Share: "1.0.0", Installed: all,
				LinkError: "/etc/demoapp/lib points to version 1.1.0 but /etc/demoapp/share points to version 1.0.0"},
			{Name: "node4", Address: "10.77.1.14", Offline: true, Reachable: true, Lib: "1.0.0", Share: "1.0.0", Live: "1.0.0", Installed: all[:2]},
		},
		Verify: &upgrade.VerifyStatus{Ran: true, ExitCode: 1, Error: "exit status 1: verify failed on 2 of 3 online nodes",
			Output: []string{"node1 ok 1.1.0 (config 1.1.0)", "node2 FAILED unreachable at 10.77.1.12:7070", "node3 FAILED version 1.0.0, want 1.1.0", "node4 offline, skipped"}},
		LastRun: &upgrade.RunSummary{Run: 6, Kind: "upgrade", From: "1.0.0", To: "1.1.0", Outcome: "done", Started: at.Add(-time.Minute), Ended: at,
			LastStage: "finish", LastState: "done", Offline: []string{"node4"}},
		Behind: []upgrade.BehindNode{{Node: "node4", Version: "1.0.0", Command: "cutover sync node4"}},
		Resume: upgrade.BootResume{Cron: []string{"/etc/cron.d/cutover"}},
	}
	if running {
		st.Resume = upgrade.BootResume{Unit: true}
		st.Verify = &upgrade.VerifyStatus{Skipped: "not run while a run holds the lock (pid 4242 on node1)"}
		st.Pending = &upgrade.PendingRun{Run: 7, From: "1.1.0", To: "1.2.0", Direction: "upgrade", Created: at.Add(time.Hour), Host: "node1", PID: 4242,
			Outcome: "running", Stage: "backup", State: "started", At: at.Add(time.Hour + 30*time.Second)}
		st.Lock = &journal.Holder{Host: "node1", PID: 4242, Started: at.Add(time.Hour), Command: "cutover upgrade --to=1.2.0 --yes"}
		st.LastRun = &upgrade.RunSummary{Run: 7, Kind: "upgrade", From: "1.1.0", To: "1.2.0", Outcome: "running", Started: at.Add(time.Hour),
			LastStage: "backup", LastState: "started"}
		st.Behind = nil
	}
	return st
}

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	writeTable(&b, [][]string{{"a", "bbb", ""}, {"cc", "d", "e f"}, {"é", "", ""}})
	want := "  a   bbb\n  cc  d    e f\n  é\n"
	if b.String() != want {
		t.Errorf("writeTable =\n%q\nwant\n%q", b.String(), want)
	}
}
