package metrics

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var (
	t0   = time.Date(2026, 11, 21, 18, 1, 2, 0, time.UTC)
	look = Look{At: t0.Add(40 * time.Second), Nodes: []Node{
		{Name: "node2", Version: "1.1.0", Reachable: true},
		{Name: "node1", Version: "1.1.0", Reachable: true},
		{Name: "node3", Version: "1.1.0", Reachable: true},
		{Name: "node4", Version: "1.0.0", Reachable: false},
	}}
)

// goldenSnapshots are the snapshots whose rendering testdata/<name>.prom holds.
var goldenSnapshots = map[string]Snapshot{
	// An upgrade that ended done, node4 offline and left behind, an earlier sync.
	"done": {App: "demoapp", Look: look, Last: []LastRun{
		{Kind: "upgrade", Run: 7, Result: "done", Started: t0, Ended: t0.Add(31200 * time.Millisecond),
			Downtime: 12100 * time.Millisecond, DowntimeRecorded: true, LastSuccess: t0.Add(31200 * time.Millisecond)},
		{Kind: "sync", Run: 5, Result: "done", Started: t0.Add(-time.Hour), Ended: t0.Add(-time.Hour + 9*time.Second),
			Downtime: 4 * time.Second, DowntimeRecorded: true, LastSuccess: t0.Add(-time.Hour + 9*time.Second)},
	}},
	// An upgrade killed in config-upgrade, past its point of no return: pending, mixed.
	"pending-past-ponr": {App: "demoapp", Look: Look{At: t0.Add(20 * time.Second), Nodes: []Node{
		{Name: "node1", Version: "1.1.0", Reachable: true},
		{Name: "node2", Version: "1.1.0", Reachable: true},
		{Name: "node3", Version: "1.0.0", Reachable: false},
	}}, Pending: &Pending{Run: 8, Kind: "upgrade", Direction: "upgrade", Stage: "config-upgrade", PastPONR: true, Started: t0},
		Last: []LastRun{{Kind: "upgrade", Run: 7, Result: "done", Started: t0.Add(-2 * time.Hour), Ended: t0.Add(-2*time.Hour + 31*time.Second),
			Downtime: 12 * time.Second, DowntimeRecorded: true, LastSuccess: t0.Add(-2*time.Hour + 31*time.Second)}}},
	// An upgrade that failed before its point of no return and was rolled back; the last
	// done upgrade was earlier. A watch passed on that one.
	"rolled-back": {App: "demoapp", Look: Look{At: t0.Add(9 * time.Second), Nodes: []Node{
		{Name: "node1", Version: "1.0.0", Reachable: true},
		{Name: "node2", Version: "1.0.0", Reachable: true},
	}}, Last: []LastRun{{Kind: "upgrade", Run: 9, Result: "rolled-back", Started: t0, Ended: t0.Add(9 * time.Second),
		LastSuccess: t0.Add(-24 * time.Hour)}},
		Watch: &Watch{Run: 6, Kind: "upgrade", State: "passed", Ends: t0.Add(-23 * time.Hour)}},
	// A sync that caught node4 up, after an upgrade.
	"sync": {App: "demoapp", Look: Look{At: t0.Add(5 * time.Second), Nodes: []Node{
		{Name: "node1", Version: "1.1.0", Reachable: true},
		{Name: "node4", Version: "1.1.0", Reachable: true},
	}}, Last: []LastRun{
		{Kind: "sync", Run: 10, Result: "done", Started: t0, Ended: t0.Add(4500 * time.Millisecond),
			Downtime: 2 * time.Second, DowntimeRecorded: true, LastSuccess: t0.Add(4500 * time.Millisecond)},
		{Kind: "upgrade", Run: 7, Result: "done", Started: t0.Add(-time.Hour), Ended: t0.Add(-time.Hour + 31*time.Second),
			Downtime: 12 * time.Second, DowntimeRecorded: true, LastSuccess: t0.Add(-time.Hour + 31*time.Second)},
	}},
}

// TestRenderGolden compares the rendering of each snapshot with its golden file
// (go test ./upgrade/metrics -run TestRenderGolden -update rewrites them).
func TestRenderGolden(t *testing.T) {
	for name, s := range goldenSnapshots {
		t.Run(name, func(t *testing.T) {
			got := Render(s)
			path := filepath.Join("testdata", name+".prom")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Render(%s) differs from %s:\n%s", name, path, got)
			}
		})
	}
}

// TestRenderValues checks the figures operators alert on, apart from the goldens' layout.
func TestRenderValues(t *testing.T) {
	for _, tc := range []struct {
		snapshot string
		want     []string
		absent   []string
	}{
		{"done", []string{
			`cutover_node_version_info{app="demoapp",node="node4",version="1.0.0"} 1`,
			`cutover_node_reachable{app="demoapp",node="node4"} 0`,
			`cutover_nodes_unreachable{app="demoapp"} 1`,
			`cutover_run_pending{app="demoapp"} 0`,
			`cutover_last_run_duration_seconds{app="demoapp",kind="upgrade"} 31.2`,
			`cutover_last_run_downtime_seconds{app="demoapp",kind="upgrade"} 12.1`,
			`cutover_last_run_result{app="demoapp",kind="upgrade",result="done"} 1`,
			`cutover_last_run_result{app="demoapp",kind="upgrade",result="failed"} 0`,
			`cutover_last_run_start_timestamp_seconds{app="demoapp",kind="upgrade"} 1795284062`,
			`cutover_last_run_end_timestamp_seconds{app="demoapp",kind="upgrade"} 1795284093.2`,
		}, []string{"cutover_watch_state", "cutover_run_pending_start"}},
		{"pending-past-ponr", []string{
			`cutover_run_pending{app="demoapp",run="8",kind="upgrade",direction="upgrade",stage="config-upgrade",past_ponr="true"} 1`,
			`cutover_run_pending_start_timestamp_seconds{app="demoapp",run="8",kind="upgrade"} 1795284062`,
		}, nil},
		{"rolled-back", []string{
			`cutover_last_run_result{app="demoapp",kind="upgrade",result="rolled-back"} 1`,
			`cutover_last_success_timestamp_seconds{app="demoapp",kind="upgrade"} 1795197662`,
			`cutover_watch_state{app="demoapp",run="6",kind="upgrade",state="passed"} 1`,
			`cutover_watch_state{app="demoapp",run="6",kind="upgrade",state="watching"} 0`,
			`cutover_watch_check_failures{app="demoapp",run="6",kind="upgrade"} 0`,
			`cutover_watch_end_timestamp_seconds{app="demoapp",run="6",kind="upgrade"} 1795201262`,
		}, []string{"cutover_last_run_downtime_seconds{"}},
	} {
		got := string(Render(goldenSnapshots[tc.snapshot]))
		for _, w := range tc.want {
			if !strings.Contains(got, w+"\n") {
				t.Errorf("Render(%s) lacks the line %s:\n%s", tc.snapshot, w, got)
			}
		}
		for _, a := range tc.absent {
			if strings.Contains(got, a) {
				t.Errorf("Render(%s) has %s, which it must not:\n%s", tc.snapshot, a, got)
			}
		}
	}
}

// TestRenderEscapes checks that a label value cannot end its label or line.
func TestRenderEscapes(t *testing.T) {
	got := string(Render(Snapshot{App: "a\"b\\c\nd", Look: Look{Nodes: []Node{{Name: "n", Version: "1\"}", Reachable: true}}}}))
	if !strings.Contains(got, `cutover_node_version_info{app="a\"b\\c\nd",node="n",version="1\"}"} 1`+"\n") {
		t.Errorf("label values are not escaped:\n%s", got)
	}
}

// TestPromtoolCheckMetrics runs Prometheus's own linter, promtool check metrics (Debian's
// prometheus package; test/setup.sh installs it), on every golden file. Under CI=true a missing
// promtool is a failure.
func TestPromtoolCheckMetrics(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is not installed (Debian's prometheus package; run test/setup.sh)")
		}
		t.Skip("promtool is not installed (Debian's prometheus package; run test/setup.sh)")
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "*.prom"))
	if len(files) < len(goldenSnapshots) {
		t.Fatalf("testdata holds %d golden files, want %d", len(files), len(goldenSnapshots))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = bytes.NewReader(data)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics < %s: %v\n%s", f, err, out)
		}
	}
}
