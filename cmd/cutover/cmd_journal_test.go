package main

import (
	"crypto/sha256"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// stageNames are the 19 stages of an upgrade, in order.
var stageNames = []string{"preflight", "verify-installed", "intent", "drain", "pause-reconciler", "stop-master", "reverify",
	"stop-nodes", "backup", "config-downgrade", "switch", "config-upgrade", "ensure-dirs", "start", "redist-conf",
	"restart", "undrain", "post-upgrade", "finish"}

// normalizeOutput replaces what changes from one test run to the next (the temporary root,
// the host name, pids, times, durations, sizes) with fixed words. A word that stands in a
// padded column keeps the column's width, so the golden files show the real alignment.
func normalizeOutput(lc *localCluster, s string) string {
	host, _ := os.Hostname()
	s = strings.ReplaceAll(s, lc.root, "<ROOT>")
	rules := []struct {
		re   *regexp.Regexp
		with string
	}{
		{regexp.MustCompile(`\b` + regexp.QuoteMeta(host) + `\b`), "<HOST>"},
		{regexp.MustCompile(`\(pid \d+\)`), "(pid <PID>)"},
		{regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/[0-9]*`), "<BOOT-ID>"},
		{regexp.MustCompile(`"pid": \d+`), `"pid": 0`},
		{regexp.MustCompile(`"(duration_ns|size)": \d+`), `"$1": 0`},
		{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`), "YYYY-MM-DDThh:mm:ssZ"},
		{regexp.MustCompile(`\d{8}T\d{6}Z`), "YYYYMMDDThhmmssZ"},
		{regexp.MustCompile(`\b\d+\.\ds\b`), "<DUR>"},
		{regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|ms|s)\b`), "<DUR>"},
		{regexp.MustCompile(`\b\d+(\.\d)? (B|KiB|MiB)\b`), "<SIZE>"},
	}
	for _, r := range rules {
		// A word followed by two spaces or more stands in a padded column: keep the column's
		// width. One space is running text, whose words' lengths vary from run to run.
		padded := regexp.MustCompile(r.re.String() + `  +`)
		s = padded.ReplaceAllStringFunc(s, func(m string) string {
			out := strings.TrimRight(r.re.ReplaceAllString(m, r.with), " ") + " "
			for len(out) < len(m) {
				out += " "
			}
			return out
		})
		s = r.re.ReplaceAllString(s, r.with)
	}
	return s
}

func TestJournalLocal(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	if code, out, errOut := lc.cutover("journal"); code != 0 || out != "no runs yet\n" {
		t.Errorf("journal before any run: exit %d, stdout %q, stderr %q; want 0 and no runs yet", code, out, errOut)
	}
	if code, out, _ := lc.cutover("--output", "json", "journal"); code != 0 || !strings.Contains(out, `"runs": []`) {
		t.Errorf("journal --output json before any run: exit %d, %s; want an empty runs list", code, out)
	}
	if code, out, errOut := lc.cutover("upgrade", "--to=1.1.0", "--yes"); code != 0 {
		t.Fatalf("upgrade exit %d\n%s%s", code, out, errOut)
	}

	tests := []struct {
		golden string
		args   []string
	}{
		{"journal-list.golden", []string{"journal"}},
		{"journal-run.golden", []string{"journal", "1"}},
		{"journal-list-json.golden", []string{"--output", "json", "journal"}},
		{"journal-run-json.golden", []string{"--output", "json", "journal", "1"}},
	}
	for _, tt := range tests {
		code, out, errOut := lc.cutover(tt.args...)
		if code != 0 || errOut != "" {
			t.Errorf("%v: exit %d, stderr %q; want 0 and nothing", tt.args, code, errOut)
		}
		golden(t, tt.golden, []byte(normalizeOutput(lc, out)))
	}

	_, out, _ := lc.cutover("journal", "1")
	for i, stage := range stageNames {
		if !regexp.MustCompile(`(?m)^` + strconv.Itoa(i+1) + ` +` + regexp.QuoteMeta(stage) + ` +(done|skipped) `).MatchString(out) {
			t.Errorf("journal 1 does not show stage %d %s done or skipped:\n%s", i+1, stage, out)
		}
	}

	_, out, _ = lc.cutover("--output", "json", "journal", "1")
	var doc struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Runs       []struct {
			ID      uint64            `json:"id"`
			Outcome string            `json:"outcome"`
			Facts   map[string]string `json:"facts"`
			Events  []struct {
				Stage string `json:"stage"`
				State string `json:"state"`
				Nodes []struct {
					Node string `json:"node"`
					OK   bool   `json:"ok"`
				} `json:"nodes"`
			} `json:"events"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("journal 1 --output json: %v\n%s", err, out)
	}
	if doc.APIVersion != "cutover/v1" || doc.Kind != "Journal" || len(doc.Runs) != 1 {
		t.Fatalf("journal 1 --output json = %+v, want one run of kind Journal, cutover/v1", doc)
	}
	r := doc.Runs[0]
	if r.ID != 1 || r.Outcome != "done" || !strings.HasSuffix(r.Facts["backup"], ".tar.gz") {
		t.Errorf("run = id %d, outcome %s, facts %v; want run 1 done with its backup", r.ID, r.Outcome, r.Facts)
	}
	stages, nodeResults := map[string]bool{}, 0
	for _, e := range r.Events {
		stages[e.Stage] = true
		for _, n := range e.Nodes {
			if n.Node == "" || !n.OK {
				t.Errorf("stage %s %s: node result %+v, want a named node that succeeded", e.Stage, e.State, n)
			}
			nodeResults++
		}
	}
	if len(stages) != len(stageNames) || nodeResults == 0 {
		t.Errorf("the events name %d stages with %d node results, want %d stages and some results", len(stages), nodeResults, len(stageNames))
	}
}

func TestJournalRefusals(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	if code, out, errOut := lc.cutover("upgrade", "--to=1.1.0", "--yes"); code != 0 {
		t.Fatalf("upgrade exit %d\n%s%s", code, out, errOut)
	}
	sum := func() [32]byte {
		data, err := os.ReadFile(lc.path("state/journal.db"))
		if err != nil {
			t.Fatal(err)
		}
		return sha256.Sum256(data)
	}
	before := sum()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"letters", []string{"journal", "abc"}, `run "abc": not a run id`},
		{"negative", []string{"journal", "-1"}, "-1"},
		{"unknown", []string{"journal", "99999"}, "no run 99999 in the journal"},
		{"shell", []string{"journal", "1;rm"}, `run "1;rm": not a run id`},
		{"zero", []string{"journal", "0"}, `run "0": not a run id`},
		{"leading zero", []string{"journal", "01"}, `run "01": not a run id`},
		{"too big", []string{"journal", "99999999999999999999999"}, "not a run id"},
		{"two runs", []string{"journal", "1", "2"}, "at most one run id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := lc.cutover(tt.args...)
			if code != exitUsage || !strings.Contains(errOut, tt.want) || out != "" {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d, nothing on stdout and %q", tt.args, code, out, errOut, exitUsage, tt.want)
			}
			if !strings.HasPrefix(errOut, "cutover: ") || strings.Count(errOut, "\n") != 1 {
				t.Errorf("stderr %q is not one cutover: line", errOut)
			}
		})
	}
	if sum() != before {
		t.Errorf("a refused journal command changed the journal")
	}
}

func TestJournalWithoutJournal(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0")
	code, _, errOut := lc.cutover("journal", "5")
	if code != exitUsage || !strings.Contains(errOut, "no run 5 in the journal") {
		t.Errorf("journal 5 without a journal: exit %d, stderr %q; want %d and no run 5", code, errOut, exitUsage)
	}
	if _, err := os.Stat(lc.path("state/journal.db")); !os.IsNotExist(err) {
		t.Errorf("journal created a journal file: %v", err)
	}
}

func TestJournalFailedRun(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	lc.setCommand("daemons_stop", "echo cannot stop >&2; exit 7")
	if code, out, errOut := lc.cutover("upgrade", "--to=1.1.0", "--yes"); code != exitFailed {
		t.Fatalf("upgrade exit %d, want %d\n%s%s", code, exitFailed, out, errOut)
	}
	code, out, errOut := lc.cutover("journal", "1")
	if code != 0 || errOut != "" {
		t.Fatalf("journal 1: exit %d, stderr %q", code, errOut)
	}
	golden(t, "journal-failed.golden", []byte(normalizeOutput(lc, out)))
	for _, want := range []string{
		"run 1: upgrade 1.0.0 -> 1.1.0 (upgrade): rolled-back",
		"stop-master        failed",
		": FAILED, exit 7",
		"exit 7: cannot stop",
		"drain              undone",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("journal 1 of a rolled-back run lacks %q:\n%s", want, out)
		}
	}
	if _, out, _ := lc.cutover("journal"); !regexp.MustCompile(`(?m)^1 +upgrade +1\.0\.0 -> 1\.1\.0 +upgrade .* rolled-back`).MatchString(out) {
		t.Errorf("journal does not list run 1 as rolled back:\n%s", out)
	}
}
