package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/upgrade/metrics"
)

// requirePromtool returns the path of promtool (Debian's prometheus package, installed by
// test/setup.sh): missing, it is a failure under CI=true and a skip elsewhere.
func requirePromtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is not installed (Debian's prometheus package; run test/setup.sh)")
		}
		t.Skip("promtool is not installed (Debian's prometheus package; run test/setup.sh)")
	}
	return p
}

// guideAlertRules returns the rule file the guide gives operators to copy.
func guideAlertRules(t *testing.T) string {
	t.Helper()
	guide := readDoc(t, "docs/guide.md")
	m := regexp.MustCompile("(?s)```yaml\n(groups:\n  - name: cutover\n.*?)```").FindStringSubmatch(guide)
	if m == nil {
		t.Fatal("docs/guide.md has no ```yaml block of the cutover alert rules")
	}
	return m[1]
}

// TestDocsAlertRules checks the guide's two alert rules with Prometheus's own tools:
// promtool check rules, then promtool test rules on series shaped as cutover writes them: the
// pending alert fires only after 30 minutes of one pending run, the version alert only for
// nodes on two versions outside a run, after 15 minutes, and neither while nothing is wrong.
func TestDocsAlertRules(t *testing.T) {
	promtool := requirePromtool(t)
	dir := t.TempDir()
	rules := filepath.Join(dir, "cutover-rules.yml")
	if err := os.WriteFile(rules, []byte(guideAlertRules(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", rules).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules on the guide's rules: %v\n%s", err, out)
	}
	// m1: run 8 pending since the start. m2: node4 left at 1.0.0, no run pending. m3: mixed
	// during a pending run, which is no alert. m4: healthy.
	tests := `rule_files: [cutover-rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'cutover_run_pending{instance="m1",app="demoapp",run="8",kind="upgrade",direction="upgrade",stage="config-upgrade",past_ponr="true"}'
        values: '1x60'
      - series: 'cutover_run_pending_start_timestamp_seconds{instance="m1",app="demoapp",run="8",kind="upgrade"}'
        values: '0x60'
      - series: 'cutover_node_version_info{instance="m2",app="demoapp",node="node1",version="1.1.0"}'
        values: '1x60'
      - series: 'cutover_node_version_info{instance="m2",app="demoapp",node="node4",version="1.0.0"}'
        values: '1x60'
      - series: 'cutover_run_pending{instance="m2",app="demoapp"}'
        values: '0x60'
      - series: 'cutover_node_version_info{instance="m3",app="demoapp",node="node1",version="1.1.0"}'
        values: '1x60'
      - series: 'cutover_node_version_info{instance="m3",app="demoapp",node="node2",version="1.0.0"}'
        values: '1x60'
      - series: 'cutover_run_pending{instance="m3",app="demoapp",run="3",kind="upgrade",direction="upgrade",stage="switch",past_ponr="false"}'
        values: '1x60'
      - series: 'cutover_run_pending_start_timestamp_seconds{instance="m3",app="demoapp",run="3",kind="upgrade"}'
        values: '1500x60'
      - series: 'cutover_node_version_info{instance="m4",app="demoapp",node="node1",version="1.1.0"}'
        values: '1x60'
      - series: 'cutover_run_pending{instance="m4",app="demoapp"}'
        values: '0x60'
    alert_rule_test:
      - eval_time: 10m
        alertname: CutoverNodesOnDifferentVersions
        exp_alerts: []
      - eval_time: 29m
        alertname: CutoverRunPending
        exp_alerts: []
      - eval_time: 31m
        alertname: CutoverRunPending
        exp_alerts:
          - exp_labels: {severity: page, instance: m1, app: demoapp, run: "8", kind: upgrade, direction: upgrade, stage: config-upgrade, past_ponr: "true"}
            exp_annotations:
              summary: "cutover run 8 (upgrade, upgrade) of demoapp on m1 has been pending for over 30 minutes"
              description: "Its last stage is config-upgrade; past its point of no return: true. Run 'cutover status' on the master: it says whether to resume, abort or finish it."
      - eval_time: 20m
        alertname: CutoverNodesOnDifferentVersions
        exp_alerts:
          - exp_labels: {severity: ticket, instance: m2, app: demoapp}
            exp_annotations:
              summary: "demoapp runs 2 different versions on the nodes of m2 outside a run"
              description: "Run 'cutover status' on the master: it lists the nodes behind and the 'cutover sync' command that catches each up."
`
	testFile := filepath.Join(dir, "cutover-rules-test.yml")
	if err := os.WriteFile(testFile, []byte(tests), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "test", "rules", testFile)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules on the guide's rules: %v\n%s", err, out)
	}
}

// TestDocsMetricsReference checks that docs/metrics.md names every metric cutover writes, and
// no other, and that the guide's rules use only those.
func TestDocsMetricsReference(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	text := string(metrics.Render(metrics.Snapshot{App: "a",
		Look:    metrics.Look{At: at, Nodes: []metrics.Node{{Name: "n", Version: "1", Reachable: true}}},
		Pending: &metrics.Pending{Run: 2, Kind: "upgrade", Started: at},
		Last:    []metrics.LastRun{{Kind: "upgrade", Run: 1, Result: "done", Started: at, Ended: at, DowntimeRecorded: true, LastSuccess: at}},
		Watch:   &metrics.Watch{Run: 1, Kind: "upgrade", State: "passed", Ends: at},
	}))
	written := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) `).FindAllStringSubmatch(text, -1) {
		written[m[1]] = true
	}
	ref := readDoc(t, "docs/metrics.md")
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(cutover_[a-z_]+)` \\|").FindAllStringSubmatch(ref, -1) {
		documented[m[1]] = true
	}
	if len(written) < 16 {
		t.Fatalf("found %d metrics in the rendering: the test no longer reads them", len(written))
	}
	for name := range written {
		if !documented[name] {
			t.Errorf("docs/metrics.md does not document %s", name)
		}
	}
	for name := range documented {
		if !written[name] {
			t.Errorf("docs/metrics.md documents %s, which cutover does not write", name)
		}
	}
	for _, name := range regexp.MustCompile(`cutover_[a-z_]+`).FindAllString(guideAlertRules(t), -1) {
		if !written[name] {
			t.Errorf("the guide's alert rules use %s, which cutover does not write", name)
		}
	}
	if !strings.Contains(text, "cutover_watch_state") {
		t.Error("the rendering lacks the watch")
	}
}
