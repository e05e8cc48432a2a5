package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/test/cluster"
)

// textfile is where the test points [metrics] textfile: the textfile directory of Debian's
// prometheus-node-exporter, which the node image holds.
const textfile = "/var/lib/prometheus/node-exporter/cutover.prom"

// readerScript reads the metrics file on the master in a loop until /tmp/reader.stop exists,
// and counts the reads that found it, those that found it incomplete (it must begin with the
// first family's HELP line and end with a sample and a newline), and the distinct contents
// seen; a half-written file is kept for the report.
const readerScript = `#!/bin/bash
reads=0 bad=0
: >/tmp/reader.sums
while [ ! -e /tmp/reader.stop ]; do
	data=$(cat ` + textfile + ` 2>/dev/null; echo x) || continue
	[ "$data" = x ] && continue
	reads=$((reads + 1))
	data=${data%x}
	last=${data%$'\n'}
	last=${last##*$'\n'}
	if [[ "$data" != "# HELP cutover_node_version_info "* || "$data" != *$'\n' || "$last" != cutover_*" "* ]]; then
		bad=$((bad + 1))
		printf '%s' "$data" >/tmp/reader.bad
	fi
	printf '%s' "$data" | md5sum >>/tmp/reader.sums
	sleep 0.01
done
echo "$reads $bad $(sort -u /tmp/reader.sums | wc -l)" >/tmp/reader.result
`

// scrape fetches node_exporter's /metrics on the master with curl and returns the lines of
// cutover's metrics and of the textfile collector's own, as node_exporter serves them: labels
// in name order, values in Go's shortest float form.
func scrape(t *testing.T, c *cluster.Cluster) string {
	t.Helper()
	out := must(t, c, c.Master, "curl -fsS --max-time 10 http://localhost:9100/metrics")
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "cutover_") || strings.HasPrefix(l, "node_textfile_") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n") + "\n"
}

// expect fails the test unless the scrape holds every line of want, and none of absent.
func expect(t *testing.T, step, scraped string, want []string, absent ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains("\n"+scraped, "\n"+w+"\n") {
			t.Errorf("%s: node_exporter's /metrics lacks the line\n  %s\nit has:\n%s", step, w, scraped)
		}
	}
	for _, a := range absent {
		if strings.Contains(scraped, a) {
			t.Errorf("%s: node_exporter's /metrics has %s, which it must not:\n%s", step, a, scraped)
		}
	}
}

// value returns the value of the series series in scraped, failing the test when it is absent.
func value(t *testing.T, step, scraped, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(scraped)
	if m == nil {
		t.Fatalf("%s: node_exporter's /metrics lacks %s:\n%s", step, series, scraped)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("%s: %s has the value %q", step, series, m[1])
	}
	return v
}

// versions returns the lines of cutover_node_version_info for the nodes at version, one per
// node.
func versions(version string, nodes ...string) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, fmt.Sprintf(`cutover_node_version_info{app="demoapp",node=%q,version=%q} 1`, n, version))
	}
	return out
}

// TestMetricsNodeExporter runs Debian's prometheus-node-exporter on the master, reading the
// textfile directory cutover writes to, and checks what its /metrics says after an upgrade
// that leaves an offline node behind, a run killed past its point of no return (and a status
// with a node cut off), its resume, and a sync of the node left behind; a reader loops over
// the file throughout and never finds it half-written, and promtool passes the last file.
func TestMetricsNodeExporter(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{})
	ctx := context.Background()
	must(t, c, c.Master, `printf '\n[metrics]\ntextfile = "`+textfile+`"\n' >> /etc/cutover/cutover.toml`)
	// Debian's init script, with Debian's defaults: node_exporter runs as prometheus and
	// reads /var/lib/prometheus/node-exporter.
	must(t, c, c.Master, "/etc/init.d/prometheus-node-exporter start >/dev/null")
	deadline := time.Now().Add(30 * time.Second)
	for sh(t, c, c.Master, "curl -fsS --max-time 2 -o /dev/null http://localhost:9100/metrics").ExitCode != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("node_exporter does not answer on the master:\n%s", sh(t, c, c.Master, "cat /var/log/prometheus/prometheus-node-exporter.log").Stdout)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := c.WriteFile(ctx, c.Master, "/tmp/reader", []byte(readerScript)); err != nil {
		t.Fatal(err)
	}
	must(t, c, c.Master, "chmod 0755 /tmp/reader && rm -f /tmp/reader.stop /tmp/reader.result && (setsid /tmp/reader </dev/null >/dev/null 2>&1 &)")

	// The first look: every node at 1.0.0.
	if res := cutover(t, c, "status", "--no-verify"); res.ExitCode != 0 {
		t.Fatalf("status: exit %d", res.ExitCode)
	}
	got := scrape(t, c)
	expect(t, "status", got, append(versions("1.0.0", "node1", "node2", "node3", "node4"),
		`cutover_run_pending{app="demoapp"} 0`, `cutover_nodes_unreachable{app="demoapp"} 0`,
		`node_textfile_scrape_error 0`), "cutover_last_run_")

	// An upgrade with node4 offline: it stays at 1.0.0, as it was last seen.
	must(t, c, c.Master, `sed -i '/^name = "node4"$/a offline = true' /etc/cutover/cutover.toml`)
	setAppOffline(t, c, "node4", true)
	if res := cutover(t, c, "upgrade", "--to=1.1.0", "--yes"); res.ExitCode != 0 {
		t.Fatalf("upgrade: exit %d", res.ExitCode)
	}
	got = scrape(t, c)
	expect(t, "after the upgrade", got, append(append(versions("1.1.0", "node1", "node2", "node3"), versions("1.0.0", "node4")...),
		`cutover_run_pending{app="demoapp"} 0`,
		`cutover_last_run_id{app="demoapp",kind="upgrade"} 1`,
		`cutover_last_run_result{app="demoapp",kind="upgrade",result="done"} 1`,
		`cutover_last_run_result{app="demoapp",kind="upgrade",result="failed"} 0`,
		`node_textfile_scrape_error 0`))
	end := value(t, "after the upgrade", got, `cutover_last_run_end_timestamp_seconds{app="demoapp",kind="upgrade"}`)
	start := value(t, "after the upgrade", got, `cutover_last_run_start_timestamp_seconds{app="demoapp",kind="upgrade"}`)
	duration := value(t, "after the upgrade", got, `cutover_last_run_duration_seconds{app="demoapp",kind="upgrade"}`)
	downtime := value(t, "after the upgrade", got, `cutover_last_run_downtime_seconds{app="demoapp",kind="upgrade"}`)
	success := value(t, "after the upgrade", got, `cutover_last_success_timestamp_seconds{app="demoapp",kind="upgrade"}`)
	if now := float64(time.Now().Unix()); start < now-600 || end < start || end > now+5 || success != end ||
		duration < end-start-0.002 || duration > end-start+0.002 || downtime <= 0 || downtime > duration {
		t.Errorf("after the upgrade: start %f end %f duration %f downtime %f success %f (now %f): want start <= end = success, duration = end - start, 0 < downtime <= duration",
			start, end, duration, downtime, success, now)
	}

	// A run to 1.2.0 killed in ensure-dirs, past its point of no return: pending, as the last
	// stage end (config-upgrade) left it, the online nodes switched.
	h := startHeld(t, c, "ensure-dirs", "upgrade", "--to=1.2.0", "--yes")
	must(t, c, c.Master, "pkill -KILL -x cutover")
	h.wait(t)
	must(t, c, c.Master, "rm -rf "+holdDir)
	got = scrape(t, c)
	expect(t, "killed past the point of no return", got, append(append(versions("1.2.0", "node1", "node2", "node3"), versions("1.0.0", "node4")...),
		`cutover_run_pending{app="demoapp",direction="upgrade",kind="upgrade",past_ponr="true",run="2",stage="config-upgrade"} 1`,
		`cutover_last_run_id{app="demoapp",kind="upgrade"} 1`), `cutover_run_pending{app="demoapp"} 0`)
	if s := value(t, "killed", got, `cutover_run_pending_start_timestamp_seconds{app="demoapp",kind="upgrade",run="2"}`); s < end {
		t.Errorf("the pending run started at %f, before the last run ended (%f)", s, end)
	}
	// status, with node3 cut off: the stage the run died in, and node3 unreachable at its
	// last known version.
	if err := c.Cut(ctx, "node3"); err != nil {
		t.Fatal(err)
	}
	res := cutover(t, c, "status", "--no-verify")
	if err := c.Heal(ctx, "node3"); err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("status with node3 cut off: exit %d", res.ExitCode)
	}
	got = scrape(t, c)
	expect(t, "status of the interrupted run", got, append(versions("1.2.0", "node1", "node2", "node3"),
		`cutover_run_pending{app="demoapp",direction="upgrade",kind="upgrade",past_ponr="true",run="2",stage="ensure-dirs"} 1`,
		`cutover_node_reachable{app="demoapp",node="node3"} 0`, `cutover_node_reachable{app="demoapp",node="node2"} 1`,
		`cutover_nodes_unreachable{app="demoapp"} 1`))

	// The resume finishes it.
	waitSSH(t, c, "node3")
	if res := cutover(t, c, "upgrade", "--resume"); res.ExitCode != 0 {
		t.Fatalf("resume: exit %d", res.ExitCode)
	}
	got = scrape(t, c)
	expect(t, "after the resume", got, append(versions("1.2.0", "node1", "node2", "node3"),
		`cutover_run_pending{app="demoapp"} 0`, `cutover_nodes_unreachable{app="demoapp"} 0`,
		`cutover_last_run_id{app="demoapp",kind="upgrade"} 2`,
		`cutover_last_run_result{app="demoapp",kind="upgrade",result="done"} 1`))

	// node4 is back and a sync brings it to the cluster's version.
	must(t, c, c.Master, `sed -i '/^offline = true$/d' /etc/cutover/cutover.toml`)
	setAppOffline(t, c, "node4", false)
	if res := cutover(t, c, "sync", "--yes", "node4"); res.ExitCode != 0 {
		t.Fatalf("sync node4: exit %d", res.ExitCode)
	}
	got = scrape(t, c)
	expect(t, "after the sync", got, append(versions("1.2.0", "node1", "node2", "node3", "node4"),
		`cutover_run_pending{app="demoapp"} 0`,
		`cutover_last_run_id{app="demoapp",kind="sync"} 3`,
		`cutover_last_run_result{app="demoapp",kind="sync",result="done"} 1`,
		`cutover_last_run_id{app="demoapp",kind="upgrade"} 2`,
		`node_textfile_scrape_error 0`), `version="1.0.0"`, `version="1.1.0"`)
	value(t, "after the sync", got, `cutover_last_success_timestamp_seconds{app="demoapp",kind="sync"}`)
	t.Logf("node_exporter's /metrics after the sync:\n%s", got)

	// The reader never found the file half-written, and saw it change.
	must(t, c, c.Master, "touch /tmp/reader.stop")
	var result string
	for deadline := time.Now().Add(30 * time.Second); ; {
		if r := sh(t, c, c.Master, "cat /tmp/reader.result"); r.ExitCode == 0 && r.Stdout != "" {
			result = strings.TrimSpace(r.Stdout)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reader did not stop")
		}
		time.Sleep(200 * time.Millisecond)
	}
	var reads, bad, distinct int
	if _, err := fmt.Sscan(result, &reads, &bad, &distinct); err != nil {
		t.Fatalf("reader result %q: %v", result, err)
	}
	t.Logf("reader: %d reads, %d incomplete, %d distinct contents", reads, bad, distinct)
	if bad != 0 {
		t.Errorf("the reader found the metrics file incomplete %d times of %d; one of them:\n%s", bad, reads, sh(t, c, c.Master, "cat /tmp/reader.bad").Stdout)
	}
	if reads < 100 || distinct < 10 {
		t.Errorf("the reader read the file %d times and saw %d contents: too few to tell", reads, distinct)
	}
	if ls := must(t, c, c.Master, "ls -A /var/lib/prometheus/node-exporter"); ls != "cutover.prom" {
		t.Errorf("the textfile directory holds %q, want only cutover.prom", ls)
	}

	// Prometheus's own linter passes the file cutover wrote.
	data, err := c.ReadFile(ctx, c.Master, textfile)
	if err != nil {
		t.Fatal(err)
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is not installed (Debian's prometheus package; run test/setup.sh)")
		}
		t.Log("promtool is not installed: the file is not linted")
		return
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(data)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics on the master's file: %v\n%s\n%s", err, out, data)
	}
}

// waitSSH waits until node answers over SSH again after a cut.
func waitSSH(t *testing.T, c *cluster.Cluster, node string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.WaitSSH(ctx, node); err != nil {
		t.Fatalf("%s after the heal: %v", node, err)
	}
}
