package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cutover/cutover/cfgupgrade"
	"github.com/cutover/cutover/upgrade"
	"github.com/cutover/cutover/upgrade/config"
)

// exampleBlock matches a fenced block that a document marks as an example with a comment
// on the line before it: <!-- example: NAME -->.
var exampleBlock = regexp.MustCompile("(?s)<!-- example: ([^>]+?) -->\n```[a-z]*\n(.*?)```")

// docExamples returns a document's marked examples by name.
func docExamples(t *testing.T, name string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, name))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range exampleBlock.FindAllStringSubmatch(string(data), -1) {
		out[m[1]] = m[2]
	}
	return out
}

// TestDocsMigrationExample runs the worked migration example of each document that has one
// through the migration engine: the migration file loads, takes the older config to the newer
// one as the document shows it, and its down ops take that back to the older config.
func TestDocsMigrationExample(t *testing.T) {
	for _, doc := range []string{"docs/migrations.md", "docs/guide.md"} {
		t.Run(doc, func(t *testing.T) {
			ex := docExamples(t, doc)
			var older, newer, fromV, toV string
			for name, text := range ex {
				if v, ok := strings.CutPrefix(name, "config "); ok {
					if older == "" || v < fromV {
						newer, toV = older, fromV
						older, fromV = text, v
					} else {
						newer, toV = text, v
					}
				}
			}
			mig, ok := ex["migration"]
			if !ok || older == "" || newer == "" {
				t.Fatalf("%s has no worked example (a migration and two configs marked <!-- example: ... -->); found %d", doc, len(ex))
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "example.json"), []byte(mig), 0o644); err != nil {
				t.Fatal(err)
			}
			migs, err := cfgupgrade.LoadMigrations(dir)
			if err != nil || len(migs) != 1 {
				t.Fatalf("the example migration of %s: %v (%d loaded)", doc, err, len(migs))
			}
			spec := cfgupgrade.Spec{File: "/example/config.json", VersionKey: "/version", Encoding: cfgupgrade.Semver}
			for _, step := range []struct{ from, to, in, want string }{{fromV, toV, older, newer}, {toV, fromV, newer, older}} {
				got, _, err := cfgupgrade.Migrate([]byte(step.in), spec, step.from, step.to, migs)
				if err != nil {
					t.Fatalf("%s -> %s: %v", step.from, step.to, err)
				}
				if !sameJSON(t, got, []byte(step.want)) {
					t.Errorf("%s: the example's migration from %s to %s gives\n%s\nwant\n%s", doc, step.from, step.to, got, step.want)
				}
			}
		})
	}
}

// sameJSON reports whether two JSON documents hold the same values, whatever their layout and
// the order of their members.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%v:\n%s", err, a)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%v:\n%s", err, b)
	}
	return reflect.DeepEqual(x, y)
}

// TestDocsUpgradeOutput checks the guide's sample of an upgrade's output against the output of
// a real run (testdata/output/upgrade-local-run.text): the first line, then preflight and
// verify-installed, the question, the run's line, the stages, each stage line laid out as the
// real one at its index, and the done line.
func TestDocsUpgradeOutput(t *testing.T) {
	sample, ok := docExamples(t, "docs/guide.md")["upgrade output"]
	if !ok {
		t.Fatal("docs/guide.md has no upgrade output sample marked <!-- example: upgrade output -->")
	}
	data, err := os.ReadFile(filepath.Join("testdata", "output", "upgrade-local-run.text"))
	if err != nil {
		t.Fatal(err)
	}
	stageLine := regexp.MustCompile(`^\[(..)/(\d+)\] (\S+)\s+(\S+)`)
	real := map[string][]string{} // index -> the stage name and state of the real run
	var realOrder []string        // the kinds of line of the real run, in order
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if m := stageLine.FindStringSubmatch(line); m != nil {
			real[m[1]] = []string{m[3], m[4]}
			realOrder = append(realOrder, "stage "+m[3])
			continue
		}
		realOrder = append(realOrder, lineKind(line))
	}
	var order []string
	for _, line := range strings.Split(strings.TrimSpace(sample), "\n") {
		switch m := stageLine.FindStringSubmatch(line); {
		case m != nil:
			want, ok := real[m[1]]
			if !ok || want[0] != m[3] {
				t.Errorf("the guide shows stage %s as [%s/%s], the real run %v", m[3], m[1], m[2], want)
			}
			if want := realStageLine(t, data, m[1]); len(line) < len(want) || line[:len(want)] != want {
				t.Errorf("the guide's line\n%s\nis not laid out as the real run's\n%s", line, want)
			}
			order = append(order, "stage "+m[3])
		case strings.HasPrefix(line, "# "), strings.TrimSpace(line) == "...", strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "        "),
			lineKind(line) == "wait":
			// the command, an elision, a line of the question's stage list, a wait of the sample's
			// own drain
		case strings.HasPrefix(line, "proceed? [y/N]"):
			order = append(order, "question")
		default:
			order = append(order, lineKind(line))
		}
	}
	// The guide's lines come in the real run's order; the question sits before the run's line.
	want := slices.Insert(slices.Clone(realOrder), slices.Index(realOrder, "run"), "header", "question")
	i := 0
	for _, kind := range order {
		for i < len(want) && want[i] != kind {
			i++
		}
		if i == len(want) {
			t.Errorf("the guide's upgrade output shows %q out of the real run's order %q (the guide's: %q)", kind, realOrder, order)
			break
		}
		i++
	}
	if len(order) == 0 || order[0] != "upgrade" || order[len(order)-1] != "done" {
		t.Errorf("the guide's upgrade output starts with %q and ends with %q, want the upgrade line and the done line", order[0], order[len(order)-1])
	}
}

// lineKind names the kind of a line of an upgrade's text output, for comparing orders.
func lineKind(line string) string {
	switch {
	case strings.HasPrefix(line, "upgrade "):
		return "upgrade"
	case regexp.MustCompile(`^run \d+: upgrade \S+ \S+ -> \S+$`).MatchString(line):
		return "run"
	case strings.HasPrefix(line, "done: "):
		return "done"
	case strings.HasPrefix(line, "        waiting"):
		return "wait"
	case regexp.MustCompile(`^\S+ \S+ -> \S+ \(\w+\) on \d+ nodes? \(master [^)]*\)$`).MatchString(line):
		return "header"
	}
	return line
}

// realStageLine returns the part of the real run's line for the stage at index (as printed,
// " 3" or "12") that does not depend on the cluster: up to and with the state.
func realStageLine(t *testing.T, data []byte, index string) string {
	t.Helper()
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "["+index+"/") {
			m := regexp.MustCompile(`^\[../\d+\] \S+\s+\S+`).FindString(line)
			return m
		}
	}
	t.Fatalf("the real run has no stage [%s/...]", index)
	return ""
}

// TestDocsShopConfig: the configuration of the guide's own application is one cutover accepts,
// and the unknown-key error the guide shows is the one cutover gives for a misspelled key.
func TestDocsShopConfig(t *testing.T) {
	text, ok := docExamples(t, "docs/guide.md")["shop config"]
	if !ok {
		t.Fatal("docs/guide.md has no configuration marked <!-- example: shop config -->")
	}
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatalf("the guide's configuration: %v", err)
	}
	if cfg.App != "shop" || len(cfg.Cluster.Nodes) != 2 || cfg.Commands.QueueBusy == "" {
		t.Errorf("the guide's configuration reads as app %q, %d nodes, queue_busy %q", cfg.App, len(cfg.Cluster.Nodes), cfg.Commands.QueueBusy)
	}
	typo := strings.Replace(text, "daemons_stop =", "daemon_stop =", 1)
	_, perr := config.Parse([]byte(typo))
	if perr == nil {
		t.Fatal("a misspelled daemons_stop is accepted")
	}
	_, msg, _ := strings.Cut(perr.Error(), "unknown key")
	guide, err := os.ReadFile(filepath.Join(repoRoot, "docs", "guide.md"))
	if err != nil {
		t.Fatal(err)
	}
	if msg == "" || !strings.Contains(string(guide), "unknown key"+msg) {
		t.Errorf("the guide does not show cutover's error for a misspelled key:\n%v", perr)
	}
}

// TestDocsCronLine: the @reboot line the guide shows is the one the package installs.
func TestDocsCronLine(t *testing.T) {
	reboot := func(name string) []string {
		data, err := os.ReadFile(filepath.Join(repoRoot, name))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, line := range strings.Split(string(data), "\n") {
			if line = strings.TrimSpace(line); strings.HasPrefix(line, "@reboot root ") {
				out = append(out, line)
			}
		}
		return out
	}
	want := reboot("packaging/cutover.cron")
	got := reboot("docs/guide.md")
	if len(want) != 1 || len(got) != 1 || got[0] != want[0] {
		t.Errorf("docs/guide.md shows the @reboot line\n%q\nand the package installs\n%q", got, want)
	}
}

// TestDocsPlanMigrations: the part of plan's output that migrations.md shows is what plan
// prints for its worked example, a plan from 2.3.1 to 2.5.0 with 2.5's tree holding the
// example's migration.
func TestDocsPlanMigrations(t *testing.T) {
	ex := docExamples(t, "docs/migrations.md")
	sample, ok := ex["plan output"]
	if !ok {
		t.Fatal("docs/migrations.md has no plan output marked <!-- example: plan output -->")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "2.3-2.4.json"), []byte(ex["migration"]), 0o644); err != nil {
		t.Fatal(err)
	}
	migs, err := cfgupgrade.LoadMigrations(dir)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := cfgupgrade.Plan(migs, "2.3.1", "2.5.0")
	if err != nil {
		t.Fatal(err)
	}
	p := &upgrade.PlanReport{App: "shop", From: "2.3.1", To: "2.5.0", Direction: upgrade.Up, Master: "shop1", Proceed: true}
	for _, s := range plan {
		step := upgrade.MigrationStep{From: s.From, To: s.To, File: s.File}
		for _, op := range s.Ops {
			step.Ops = append(step.Ops, op.String())
		}
		p.Migrations = append(p.Migrations, step)
	}
	var b strings.Builder
	if err := (&textOutput{w: &b}).plan(p); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "\n"+sample) {
		t.Errorf("docs/migrations.md shows plan's output as\n%s\nand plan prints\n%s", sample, b.String())
	}
}
