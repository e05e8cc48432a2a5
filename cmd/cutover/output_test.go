package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/upgrade"
)

// sampleTime is the clock of every sample below.
var sampleTime = time.Date(2026, 11, 21, 18, 1, 2, 0, time.UTC)

// sampleRun is the event stream of a whole upgrade of a four-node cluster, as the runner
// reports it: a fan-out stage, a long wait, a warning, the point of no return on the master.
func sampleRun() []upgrade.Event {
	all := func(names ...string) []upgrade.NodeReport {
		var out []upgrade.NodeReport
		for _, n := range names {
			out = append(out, upgrade.NodeReport{Node: n, OK: true, Duration: 40 * time.Millisecond})
		}
		return out
	}
	four := all("node2", "node3", "node4", "node1")
	var evs []upgrade.Event
	at := sampleTime
	add := func(e upgrade.Event) {
		at = at.Add(100 * time.Millisecond)
		e.Time, e.Run = at, 7
		if e.Type == "stage" || e.Type == "undo" {
			e.Total = 19
		}
		evs = append(evs, e)
	}
	add(upgrade.Event{Type: "run", Message: "run 7: upgrade demoapp 1.0.0 -> 1.1.0 on 4 nodes (master node1, offline: none)"})
	stage := func(i int, name string, where upgrade.Where, nodes []upgrade.NodeReport, d time.Duration, msg string, ponr bool) {
		add(upgrade.Event{Type: "stage", Stage: name, Index: i, Where: string(where), State: "started", PONR: ponr})
		e := upgrade.Event{Type: "stage", Stage: name, Index: i, Where: string(where), State: "ok", Duration: d, Message: msg, Nodes: nodes, PONR: ponr}
		for _, n := range nodes {
			e.Of++
			if n.OK {
				e.OK++
			}
		}
		add(e)
	}
	stage(1, "preflight", upgrade.OnMaster, all("node1"), 300*time.Millisecond, "demoapp 1.0.0 -> 1.1.0 (upgrade)", false)
	stage(2, "verify-installed", upgrade.OnAll, four, 100*time.Millisecond, "", false)
	stage(3, "intent", upgrade.OnMaster, nil, 0, "", false)
	add(upgrade.Event{Type: "wait", Stage: "drain", Message: "waiting for 3 jobs to finish"})
	stage(4, "drain", upgrade.OnMaster, all("node1"), 12400*time.Millisecond, "waited for 3 jobs", false)
	stage(5, "pause-reconciler", upgrade.OnMaster, nil, 0, "no reconciler_pause command", false)
	stage(6, "stop-master", upgrade.OnMaster, all("node1"), 200*time.Millisecond, "", false)
	stage(7, "reverify", upgrade.OnAll, four, 100*time.Millisecond, "", false)
	stage(8, "stop-nodes", upgrade.OnOthers, all("node2", "node3", "node4"), 300*time.Millisecond, "", false)
	stage(9, "backup", upgrade.OnMaster, nil, 500*time.Millisecond, "/var/lib/cutover/backups/demoapp-1.0.0-to-1.1.0-20261121T180102Z.tar.gz", false)
	add(upgrade.Event{Type: "warn", Message: "node3: stderr of switch is not empty: tail: inotify cannot be used"})
	stage(11, "switch", upgrade.OnAll, four, 100*time.Millisecond, "", false)
	stage(12, "config-upgrade", upgrade.OnMaster, all("node2", "node3", "node4"), 50*time.Millisecond, "1 step (1.0 -> 1.1); copied to 3 nodes", true)
	stage(19, "finish", upgrade.OnMaster, nil, 0, "", false)
	return evs
}

// sampleFailedRun is a run whose stop-nodes fails on one node and is undone.
func sampleFailedRun() []upgrade.Event {
	at := sampleTime
	failed := []upgrade.NodeReport{
		{Node: "node2", OK: true, Duration: 30 * time.Millisecond},
		{Node: "node3", OK: false, ExitCode: 7, Error: "node3: demoapp daemon stop: exit status 7", StderrTail: "cannot stop: busy", Duration: 30 * time.Millisecond},
	}
	return []upgrade.Event{
		{Time: at, Type: "run", Run: 8, Message: "run 8: upgrade demoapp 1.0.0 -> 1.1.0 on 3 nodes (master node1, offline: node4)"},
		{Time: at, Type: "stage", Run: 8, Stage: "stop-nodes", Index: 8, Total: 19, Where: "others", State: "failed", OK: 1, Of: 2,
			Duration: 60 * time.Millisecond, Message: "node3: demoapp daemon stop: exit status 7\nmore", Nodes: failed},
		{Time: at, Type: "undo", Run: 8, Stage: "stop-nodes", Index: 8, Total: 19, State: "undone", Message: "started node2"},
		{Time: at, Type: "undo", Run: 8, Stage: "drain", Index: 4, Total: 19, State: "undone"},
	}
}

// outputCase is one command's output, printed by both printers.
type outputCase struct {
	name   string
	events []upgrade.Event
	print  func(o output) error
}

func outputCases() []outputCase {
	done := &upgrade.Result{Run: 7, App: "demoapp", From: "1.0.0", To: "1.1.0", Direction: upgrade.Up, Nodes: 4,
		Backup: "/var/lib/cutover/backups/demoapp-1.0.0-to-1.1.0-20261121T180102Z.tar.gz", Log: "/var/lib/cutover/log/run-7.log",
		Duration: 31200 * time.Millisecond, Downtime: upgrade.Downtime{Cluster: 2 * time.Second, Nodes: map[string]time.Duration{"node1": 2 * time.Second}}}
	offline := *done
	offline.Nodes, offline.Offline = 3, []string{"node4"}
	failed := &upgrade.Result{Run: 8, App: "demoapp", From: "1.0.0", To: "1.1.0", Direction: upgrade.Up, Nodes: 3, Offline: []string{"node4"},
		Log: "/var/lib/cutover/log/run-8.log", Duration: time.Second}
	failErr := fmt.Errorf("stop-nodes: %w", errors.New("node3: demoapp daemon stop: exit status 7"))
	sync := &upgrade.SyncResult{Run: 9, App: "demoapp", To: "1.1.0", Nodes: []upgrade.SyncNode{{Name: "node4", From: "1.0.0", Offline: true}},
		Log: "/var/lib/cutover/log/run-9.log", Duration: 2 * time.Second}
	staged := &upgrade.StagingResult{Run: 10, App: "demoapp", Version: "1.2.0", Nodes: []string{"node1", "node2", "node3"}, Already: []string{"node1"},
		TreeBytes: 12_500_000, Sent: 25_000_000, Log: "/var/lib/cutover/log/run-10.log", Duration: 3 * time.Second}
	pruned := &upgrade.PruneResult{Run: 11, App: "demoapp", Remove: map[string][]string{"node2": {"0.9.0"}, "node1": {"0.8.0", "0.9.0"}},
		Log: "/var/lib/cutover/log/run-11.log", Duration: time.Second}
	cfg := &upgrade.CfgupgradeReport{File: "/var/lib/demoapp/config.json", From: "1.0.0", To: "1.1.0",
		Diff: "--- /var/lib/demoapp/config.json 1.0.0\n+++ /var/lib/demoapp/config.json 1.1.0\n-  \"name\": \"demo\"\n+  \"title\": \"demo\"\n"}
	cfgDone := *cfg
	cfgDone.Diff, cfgDone.Backup = "", "/var/lib/demoapp/config.json.20261121T180102Z.bak"
	cfgSame := &upgrade.CfgupgradeReport{File: "/var/lib/demoapp/config.json", From: "1.1.0", To: "1.1.0"}
	restored := &upgrade.RestoreReport{ID: "demoapp-1.0.0-to-1.1.0-20261121T180102Z", Archive: "/var/lib/cutover/backups/demoapp-1.0.0-to-1.1.0-20261121T180102Z.tar.gz",
		Run: 12, Version: "1.0.0", Previous: "1.1.0", Kept: "/var/lib/cutover/backups/demoapp-1.1.0-before-restore-20261121T190000Z.tar.gz",
		Links: map[string]string{"/etc/demoapp/share": "/usr/share/demoapp/1.0.0", "/etc/demoapp/lib": "/usr/lib/demoapp/1.0.0"},
		Files: []string{"/var/lib/demoapp/config.json"}, Dirs: []string{"/var/lib/demoapp", "/etc/demoapp"}, Symlinks: []string{"/etc/demoapp/lib", "/etc/demoapp/share"},
		Warnings: []string{}}
	runs := &upgrade.JournalReport{Path: "/var/lib/cutover/journal.db", Runs: []upgrade.RunReport{
		{ID: 1, Kind: "upgrade", From: "1.0.0", To: "1.1.0", Direction: "upgrade", Host: "node1", PID: 4242, Started: sampleTime,
			Ended: sampleTime.Add(31 * time.Second), Duration: 31 * time.Second, Outcome: "done", Offline: []string{}},
		{ID: 2, Kind: "sync", From: "1.0.0", To: "1.1.0", Direction: "upgrade", Host: "node1", PID: 4343, Started: sampleTime.Add(time.Hour),
			Outcome: "interrupted", Pending: true, Offline: []string{"node4"}},
	}}
	noResume := sampleStatus(false)
	noResume.Resume = upgrade.BootResume{}
	both := sampleStatus(false)
	both.Resume = upgrade.BootResume{Unit: true, Cron: []string{"/etc/cron.d/cutover"}}
	return []outputCase{
		{"upgrade", sampleRun(), func(o output) error { o.upgradeDone(done, nil, false); return nil }},
		{"upgrade-offline", nil, func(o output) error { o.upgradeDone(&offline, nil, false); return nil }},
		{"upgrade-dry-run", nil, func(o output) error { o.upgradeDone(&offline, nil, true); return nil }},
		{"upgrade-failed", sampleFailedRun(), func(o output) error { o.upgradeDone(failed, failErr, false); return nil }},
		{"upgrade-nothing", nil, func(o output) error {
			o.upgradeDone(&upgrade.Result{App: "demoapp", From: "1.1.0", To: "1.1.0", Nothing: true}, nil, false)
			return nil
		}},
		{"resume-nothing-pending", nil, func(o output) error { o.upgradeDone(&upgrade.Result{Nothing: true}, nil, false); return nil }},
		{"abort", nil, func(o output) error {
			o.abortDone(&upgrade.Result{Run: 8, App: "demoapp", From: "1.0.0", To: "1.1.0", Nodes: 1}, nil)
			return nil
		}},
		{"sync", nil, func(o output) error { o.syncDone(sync, nil, false); return nil }},
		{"sync-dry-run", nil, func(o output) error { o.syncDone(sync, nil, true); return nil }},
		{"stage", nil, func(o output) error { o.stageDone(staged, nil, false); return nil }},
		{"stage-dry-run", nil, func(o output) error { o.stageDone(staged, nil, true); return nil }},
		{"prune", nil, func(o output) error { o.pruneDone(pruned, nil, false); return nil }},
		{"prune-dry-run", nil, func(o output) error { o.pruneDone(pruned, nil, true); return nil }},
		{"plan-proceed", nil, func(o output) error { return o.plan(samplePlan(false)) }},
		{"plan-refused", nil, func(o output) error { return o.plan(samplePlan(true)) }},
		{"plan-nothing", nil, func(o output) error {
			return o.plan(&upgrade.PlanReport{App: "demoapp", From: "1.1.0", To: "1.1.0", Direction: upgrade.Same, Master: "node1",
				Nodes: []string{"node1", "node2"}, Nothing: true, Proceed: true, Checks: []upgrade.Check{
					{Name: "live-version", Node: "node1", OK: true, Message: "demoapp runs 1.1.0"},
					{Name: "target", OK: true, Message: "the cluster already runs 1.1.0: upgrade would do nothing"}}})
		}},
		{"status", nil, func(o output) error { return o.status(sampleStatus(false)) }},
		{"status-running", nil, func(o output) error { return o.status(sampleStatus(true)) }},
		{"status-no-resume", nil, func(o output) error { return o.status(noResume) }},
		{"status-resume-twice", nil, func(o output) error { return o.status(both) }},
		{"journal-list", nil, func(o output) error { return o.journal(runs) }},
		{"backup-restore", nil, func(o output) error { return o.backupRestore(restored) }},
		{"cfgupgrade-dry-run", nil, func(o output) error { return o.cfgupgrade(cfg, true) }},
		{"cfgupgrade", nil, func(o output) error { return o.cfgupgrade(&cfgDone, false) }},
		{"cfgupgrade-nothing", nil, func(o output) error { return o.cfgupgrade(cfgSame, false) }},
		{"version", nil, func(o output) error { return o.version("0~git20261121180102.0123456789ab") }},
	}
}

// TestOutput prints every command's output with both printers and compares each with its
// golden file in testdata/output/ (-update rewrites them). The journal and backup commands
// are also covered by golden files of real runs (cmd_journal_test.go, cmd_backup_test.go).
func TestOutput(t *testing.T) {
	for _, tt := range outputCases() {
		t.Run(tt.name, func(t *testing.T) {
			for _, format := range []string{"text", "json"} {
				var b bytes.Buffer
				var o output = &textOutput{w: &b}
				if format == "json" {
					o = &jsonOutput{w: &b, now: func() time.Time { return sampleTime }}
				}
				for _, e := range tt.events {
					o.Report(e)
				}
				if err := tt.print(o); err != nil {
					t.Fatal(err)
				}
				if format == "json" {
					checkJSON(t, b.Bytes())
				}
				golden(t, "output/"+tt.name+"."+format, b.Bytes())
			}
		})
	}
}

// checkJSON checks the JSON convention: one document, or one object per line.
func checkJSON(t *testing.T, out []byte) {
	t.Helper()
	if json.Valid(out) {
		return
	}
	for i, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("line %d is not a JSON object: %s", i+1, line)
		}
	}
}

func TestCount(t *testing.T) {
	for _, tt := range []struct {
		n    int
		noun string
		want string
	}{
		{0, "node", "0 nodes"}, {1, "node", "1 node"}, {2, "job", "2 jobs"}, {1, "directory", "1 directory"}, {3, "directory", "3 directories"},
	} {
		if got := count(tt.n, tt.noun); got != tt.want {
			t.Errorf("count(%d, %q) = %q, want %q", tt.n, tt.noun, got, tt.want)
		}
	}
	for _, tt := range []struct {
		ok, of int
		want   string
	}{{1, 1, "1 node"}, {4, 4, "4 nodes"}, {3, 4, "3 of 4 nodes"}, {0, 1, "0 of 1 node"}} {
		if got := nodeCount(tt.ok, tt.of); got != tt.want {
			t.Errorf("nodeCount(%d, %d) = %q, want %q", tt.ok, tt.of, got, tt.want)
		}
	}
}
