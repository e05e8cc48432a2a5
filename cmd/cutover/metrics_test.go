package main

import (
	"os"
	"strings"
	"testing"
)

// withMetrics sets [metrics] textfile in the local cluster's config to a file in a directory
// of its own, and returns the file's path.
func withMetrics(t *testing.T, lc *localCluster) string {
	t.Helper()
	lc.mkdir("textfile")
	file := lc.path("textfile/cutover.prom")
	lc.writeConfig(lc.read("cutover.toml") + "[metrics]\ntextfile = \"" + file + "\"\n")
	return file
}

// hasLines fails the test unless text holds every line of want.
func hasLines(t *testing.T, what, text string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains("\n"+text, "\n"+w+"\n") {
			t.Errorf("%s lacks the line %s:\n%s", what, w, text)
		}
	}
}

// TestMetricsStatusAndRun follows the metrics file of a local cluster through a status, an
// upgrade (read by its own post-upgrade hook while the run is pending, and after it), and a
// run interrupted past its point of no return; status --output prometheus prints what the
// file holds.
func TestMetricsStatusAndRun(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	file := withMetrics(t, lc)
	host, _ := os.Hostname()

	code, out, errOut := lc.cutover("status", "--output", "prometheus", "--no-verify")
	if code != exitOK {
		t.Fatalf("status --output prometheus exit %d\n%s\n%s", code, out, errOut)
	}
	hasLines(t, "status --output prometheus", out,
		`cutover_node_version_info{app="app",node="`+host+`",version="1.0.0"} 1`,
		`cutover_node_reachable{app="app",node="`+host+`"} 1`,
		`cutover_nodes_unreachable{app="app"} 0`,
		`cutover_run_pending{app="app"} 0`)
	if got := lc.read("textfile/cutover.prom"); got != out {
		t.Errorf("status wrote %s:\n%s\nwant what it printed:\n%s", file, got, out)
	}
	// The look is kept, in a state directory made for it, so that a node no run reaches
	// keeps the version status saw.
	if look := lc.read("state/metrics-look.json"); !strings.Contains(look, `"version":"1.0.0"`) {
		t.Errorf("status kept the look %q, want the node at 1.0.0", look)
	}

	// The post-upgrade hook runs while the run is pending: it copies the metrics file as the
	// run's last stage end left it.
	lc.setCommand("post_upgrade", "cp "+file+" "+lc.path("during.prom"))
	code, out, errOut = lc.cutover("upgrade", "--to=1.1.0", "--yes")
	if code != exitOK {
		t.Fatalf("upgrade exit %d\n%s\n%s", code, out, errOut)
	}
	during := lc.read("during.prom")
	hasLines(t, "the metrics file during the run", during,
		`cutover_run_pending{app="app",run="1",kind="upgrade",direction="upgrade",stage="undrain",past_ponr="true"} 1`,
		`cutover_node_version_info{app="app",node="`+host+`",version="1.1.0"} 1`)
	after := lc.read("textfile/cutover.prom")
	hasLines(t, "the metrics file after the run", after,
		`cutover_run_pending{app="app"} 0`,
		`cutover_node_version_info{app="app",node="`+host+`",version="1.1.0"} 1`,
		`cutover_last_run_id{app="app",kind="upgrade"} 1`,
		`cutover_last_run_result{app="app",kind="upgrade",result="done"} 1`,
		`cutover_last_run_result{app="app",kind="upgrade",result="rolled-back"} 0`)
	for _, name := range []string{"cutover_last_run_duration_seconds", "cutover_last_run_downtime_seconds", "cutover_last_success_timestamp_seconds"} {
		if !strings.Contains(after, name+`{app="app",kind="upgrade"} `) {
			t.Errorf("the metrics file after the run lacks %s:\n%s", name, after)
		}
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("metrics file: %v, mode %v; want 0644", err, fi.Mode())
	}
	if entries, _ := os.ReadDir(lc.path("textfile")); len(entries) != 1 {
		t.Errorf("the textfile directory holds %d entries, want only cutover.prom (no temporary file left)", len(entries))
	}

	// A run interrupted past its point of no return is pending, and says so.
	pendingRun(t, lc, "ensure-dirs", false)
	code, out, errOut = lc.cutover("--output", "prometheus", "status", "--no-verify")
	if code != exitOK {
		t.Fatalf("status exit %d\n%s\n%s", code, out, errOut)
	}
	hasLines(t, "status --output prometheus of an interrupted run", out,
		`cutover_run_pending{app="app",run="2",kind="upgrade",direction="upgrade",stage="ensure-dirs",past_ponr="true"} 1`,
		`cutover_last_run_id{app="app",kind="upgrade"} 1`)
	if got := lc.read("textfile/cutover.prom"); got != out {
		t.Errorf("status wrote a file that differs from what it printed:\n%s", got)
	}
}

// TestMetricsOutputOnlyForStatus checks that --output prometheus is refused where there are no
// metrics to print, as a usage error that touches nothing.
func TestMetricsOutputOnlyForStatus(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	for _, args := range [][]string{
		{"--output", "prometheus", "plan", "--to=1.1.0"},
		{"upgrade", "--to=1.1.0", "--yes", "--output", "prometheus"},
		{"journal", "--output=prometheus"},
	} {
		code, _, errOut := lc.cutover(args...)
		if code != exitUsage || !strings.Contains(errOut, "only 'cutover status' prints metrics") {
			t.Errorf("cutover %v: exit %d, stderr %q; want exit %d naming status", args, code, errOut, exitUsage)
		}
	}
	assertNothingWritten(t, lc)
}

// TestMetricsRefusesLink checks that a metrics file that is a link is refused, never written
// through, and that status says so without failing.
func TestMetricsRefusesLink(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	file := withMetrics(t, lc)
	lc.write("victim", "keep\n")
	if err := os.Symlink(lc.path("victim"), file); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := lc.cutover("status", "--no-verify")
	if code != exitOK || !strings.Contains(out, "warning: metrics: metrics file "+file+" is a symbolic link") {
		t.Errorf("status: exit %d, stdout:\n%s\nstderr:\n%s\nwant exit 0 and a warning about the link", code, out, errOut)
	}
	if got := lc.read("victim"); got != "keep\n" {
		t.Errorf("the link's target holds %q, want it untouched", got)
	}
	if target, err := os.Readlink(file); err != nil || target != lc.path("victim") {
		t.Errorf("the link is now %q (%v), want it left as it was", target, err)
	}
}

// TestMetricsWatch follows a run with a watch: its post-upgrade hook copies the metrics file
// before the watch (waiting), a verify during the watch copies it again (watching, its window's
// end), and after the run the watch has passed.
func TestMetricsWatch(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	file := withMetrics(t, lc)
	lc.writeConfig(strings.Replace(lc.read("cutover.toml"), "[metrics]\n", "[policy]\nwatch_interval = \"1s\"\n[metrics]\n", 1))
	lc.setCommand("post_upgrade", "cp "+file+" "+lc.path("before-watch.prom"))
	// verify runs in preflight too, before any file exists.
	lc.setCommand("verify", "! test -e "+file+" || cp "+file+" "+lc.path("during-watch.prom"))
	code, out, errOut := lc.cutover("upgrade", "--to=1.1.0", "--yes", "--watch=2s")
	if code != exitOK {
		t.Fatalf("upgrade --watch=2s exit %d\n%s\n%s", code, out, errOut)
	}
	hasLines(t, "the metrics file before the watch", lc.read("before-watch.prom"),
		`cutover_watch_state{app="app",run="1",kind="upgrade",state="waiting"} 1`)
	during := lc.read("during-watch.prom")
	hasLines(t, "the metrics file during the watch", during,
		`cutover_watch_state{app="app",run="1",kind="upgrade",state="watching"} 1`,
		`cutover_watch_check_failures{app="app",run="1",kind="upgrade"} 0`)
	if !strings.Contains(during, `cutover_watch_end_timestamp_seconds{app="app",run="1",kind="upgrade"} `) {
		t.Errorf("the metrics file during the watch lacks the window's end:\n%s", during)
	}
	hasLines(t, "the metrics file after the run", lc.read("textfile/cutover.prom"),
		`cutover_watch_state{app="app",run="1",kind="upgrade",state="passed"} 1`,
		`cutover_watch_state{app="app",run="1",kind="upgrade",state="watching"} 0`,
		`cutover_run_pending{app="app"} 0`,
		`cutover_last_run_result{app="app",kind="upgrade",result="done"} 1`)
}
