// Command benchtable reads the output of `go test -bench` (make bench) on its standard input
// and prints one table of the figures cutover has targets for: each figure, cutover's value,
// the reference it is measured against (gnt-cluster upgrade, one dial round, pdsh, pdcp),
// the target and whether it is met. Figures whose benchmark did not run are left out.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// target is one figure of the table: the metric unit of a benchmark (a prefix of its name,
// sub-benchmarks included), the reference metric printed beside it, and the bound.
type target struct {
	what      string
	bench     string // the benchmark name, or a prefix ending in "/"
	unit      string
	reference string // the unit of the reference figure, "" for none
	max       float64
}

var targets = []target{
	{"Ganeti downtime, upgrade, x gnt-cluster upgrade", "BenchmarkGanetiSideBySide", "x-down-up", "s-down-ganeti-up", 0.3},
	{"Ganeti downtime, downgrade, x gnt-cluster upgrade", "BenchmarkGanetiSideBySide", "x-down-down", "s-down-ganeti-down", 0.3},
	{"Ganeti downtime, upgrade, x the master daemons' restart", "BenchmarkGanetiSideBySide", "x-down-up-of-restart", "s-down-restart", 1.3},
	{"Ganeti downtime, downgrade, x the master daemons' restart", "BenchmarkGanetiSideBySide", "x-down-down-of-restart", "s-down-restart", 1.3},
	{"no-op run, x one dial round", "BenchmarkUpgradeRun/nodes=256", "x-run-of-dial", "s/dial-round", 1.5},
	{"no-op run: downtime, s", "BenchmarkUpgradeRun/nodes=256", "s-downtime", "", 1.5},
	{"no-op run: peak RSS, MB", "BenchmarkUpgradeRun/nodes=256", "MB-peak-rss", "", 64},
	{"no-op run: time per node, 256 x 64 nodes", "BenchmarkUpgradeRun/", "flat-256-of-64", "", 1.10},
	{"no-op run: its syncs, x the run without them, 32 nodes", "BenchmarkSyncCost/nodes=32", "x-sync-cost", "s/run-unsynced", 1.10},
	{"no-op run: its syncs, x the run without them, 256 nodes", "BenchmarkSyncCost/nodes=256", "x-sync-cost", "s/run-unsynced", 1.10},
	{"stage, x pdcp -r", "BenchmarkStage/", "x-of-pdcp", "s/pdcp", 0.8},
	{"restage of an unchanged tree, x pdcp -r", "BenchmarkStage/", "restage-x-of-pdcp", "s/pdcp", 0.02},
	{"stage, master among the targets, x pdcp -r + cp -a + sync", "BenchmarkStageRun/", "x-of-floor", "s/floor", 1.0},
	{"restage of an unchanged version, x its first stage", "BenchmarkStageRun/", "restage-x-of-stage", "s/stage", 0.02},
}

// floors are the figures of the same work with nothing of cutover's around it, beside the
// target of cutover's own figure: where a floor is above the target, no change to cutover can
// meet the target on the machine measured.
var floors = []target{
	{"Ganeti all nodes' restart at once, x the master's restart", "BenchmarkGanetiSideBySide", "x-restart-all-of-restart", "s-down-restart-all", 1.3},
	{"Ganeti downtime, upgrade, x all nodes' restart at once", "BenchmarkGanetiSideBySide", "x-down-up-of-restart-all", "", 0},
	{"Ganeti downtime, downgrade, x all nodes' restart at once", "BenchmarkGanetiSideBySide", "x-down-down-of-restart-all", "", 0},
	{"no-op run's floor (the nodes' work alone), x one dial round", "BenchmarkUpgradeRun/nodes=256", "x-floor-of-dial", "s/floor", 1.5},
	{"no-op run's downtime floor, s", "BenchmarkUpgradeRun/nodes=256", "s-downtime-floor", "", 1.5},
	{"no-op run, x its floor", "BenchmarkUpgradeRun/nodes=256", "x-run-of-floor", "", 0},
	{"stage's floor (the bare transfer), x pdcp -r", "BenchmarkStage/", "bare-x-of-pdcp", "s/pdcp", 0.8},
	{"stage's floor (transfer, checksums, flush), x pdcp -r", "BenchmarkStage/", "checked-x-of-pdcp", "s/pdcp", 0.8},
	{"stage with the master's floor (pdcp -r + cp -a + sync), s", "BenchmarkStageRun/", "s/floor", "", 0},
	{"restage's floor (one dial round), x the first stage", "BenchmarkStageRun/", "dial-x-of-stage", "s/dial-round", 0.02},
	{"restage's floor (a read of each node), x first stage", "BenchmarkStageRun/", "read-x-of-stage", "s/read-round", 0.02},
	{"restage, x its floor (a read of each node)", "BenchmarkStageRun/", "restage-x-of-read", "", 0},
}

// line matches a benchmark result: its name (without the -GOMAXPROCS suffix), its count,
// and the "value unit" pairs.
var line = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+(.*)$`)

type results map[string]map[string]float64

func parse(r io.Reader) (results, error) {
	res := results{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := line.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		fields := strings.Fields(m[3])
		metrics := map[string]float64{}
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				continue
			}
			metrics[fields[i+1]] = v
		}
		res[m[1]] = metrics
	}
	return res, sc.Err()
}

// derive adds the figures computed from others: the time per node at 256 nodes against 64.
func (res results) derive() {
	if a, b := res["BenchmarkUpgradeRun/nodes=64"], res["BenchmarkUpgradeRun/nodes=256"]; a != nil && b != nil && a["ms-run-per-node"] > 0 {
		b["flat-256-of-64"] = b["ms-run-per-node"] / a["ms-run-per-node"]
	}
}

// table prints the figures with targets, then the floors that were measured, and returns
// how many figures miss their target.
func table(w io.Writer, res results) int {
	res.derive()
	var names []string
	for n := range res {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "%-60s %-28s %9s %22s %8s  %s\n", "figure", "benchmark", "cutover", "reference", "target", "met")
	missed := rows(w, res, names, targets)
	var b strings.Builder
	if rows(&b, res, names, floors); b.Len() > 0 {
		fmt.Fprintf(w, "\n%-60s %-28s %9s %22s %8s  %s\n", "floor on this machine", "benchmark", "floor", "reference", "target", "below")
		io.WriteString(w, b.String())
	}
	return missed
}

// rows prints the rows of list that res has, "met" (or "below") when the value is within the
// target, and returns how many are not; a target of 0 has none.
func rows(w io.Writer, res results, names []string, list []target) int {
	missed := 0
	for _, t := range list {
		for _, n := range names {
			if n != t.bench && !(strings.HasSuffix(t.bench, "/") && strings.HasPrefix(n, t.bench)) {
				continue
			}
			v, ok := res[n][t.unit]
			if !ok {
				continue
			}
			ref := ""
			if r, ok := res[n][t.reference]; ok {
				ref = fmt.Sprintf("%.3g %s", r, t.reference)
			}
			met, bound := "yes", "≤ "+strconv.FormatFloat(t.max, 'g', -1, 64)
			if t.max == 0 {
				met, bound = "", ""
			} else if v > t.max {
				met, missed = "NO", missed+1
			}
			row := fmt.Sprintf("%-60s %-28s %9.3g %22s %8s  %s", t.what, strings.TrimPrefix(n, "Benchmark"), v, ref, bound, met)
			fmt.Fprintln(w, strings.TrimRight(row, " "))
		}
	}
	return missed
}

func main() {
	res, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
	fmt.Println()
	if missed := table(os.Stdout, res); missed > 0 {
		fmt.Printf("\n%d figures miss their target.\n", missed)
	}
}
