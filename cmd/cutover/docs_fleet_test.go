package main

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cutover/cutover/journal"
)

// readDoc returns a file of the repository as text.
func readDoc(t *testing.T, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// tableRows returns the rows of the Markdown tables of text whose first cell matches first
// (group 1 is the key), each row's key and its other cells.
func tableRows(text string, first *regexp.Regexp) (keys []string, rows map[string][]string) {
	rows = map[string][]string{}
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		m := first.FindStringSubmatch(strings.TrimSpace(cells[0]))
		if m == nil {
			continue
		}
		keys = append(keys, m[1])
		rows[m[1]] = cells[1:]
	}
	return keys, rows
}

// TestDocsFleetExitCodes: docs/fleet.md's table of exit codes lists every code cutover exits
// with but 0, and puts a run pending to another version under the code cutover really exits
// with for it.
func TestDocsFleetExitCodes(t *testing.T) {
	doc := readDoc(t, "docs/fleet.md")
	keys, rows := tableRows(doc, regexp.MustCompile(`^(\d+)$`))
	var codes []int
	for _, k := range keys {
		n, _ := strconv.Atoi(k)
		codes = append(codes, n)
	}
	want := []int{exitFailed, exitUsage, exitPastPONR, exitLocked, exitNotMaster, exitRolledBack}
	if !slices.Equal(codes, want) {
		t.Errorf("docs/fleet.md's exit codes are %v, want cutover's %v", codes, want)
	}

	// A run pending to 1.1.0; upgrade --to=1.0.0 is refused for it.
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	lc.mkdir("state")
	if err := journal.WriteIntent(lc.path("state/intent.json"), journal.Intent{RunID: 3, From: "1.0.0", To: "1.1.0"}); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := lc.cutover("upgrade", "--to=1.0.0", "--yes")
	if !strings.Contains(errOut, "is pending") {
		t.Fatalf("upgrade with a run pending to another version: exit %d, %q; want a refusal naming the pending run", code, errOut)
	}
	for k, cells := range rows {
		row := strings.Join(cells, " | ")
		mentions := strings.Contains(row, "pending to another version")
		if mentions && k != strconv.Itoa(code) {
			t.Errorf("docs/fleet.md puts a run pending to another version under exit code %s; cutover exits %d", k, code)
		}
		if !mentions && k == strconv.Itoa(code) {
			t.Errorf("docs/fleet.md's exit code %s does not say that a run pending to another version exits with it: %s", k, row)
		}
	}
}

// summaryStates returns the states the fleet summary callback prints, from its STATES.
func summaryStates(t *testing.T) []string {
	t.Helper()
	src := readDoc(t, "ansible/ansible_collections/cutover/fleet/plugins/callback/fleet_summary.py")
	m := regexp.MustCompile(`(?s)\nSTATES = \[(.*?)\]`).FindStringSubmatch(src)
	if m == nil {
		t.Fatal("fleet_summary.py has no STATES list")
	}
	var states []string
	for _, q := range regexp.MustCompile(`"([a-z-]+)"`).FindAllStringSubmatch(m[1], -1) {
		states = append(states, q[1])
	}
	return states
}

// TestDocsFleetSummaryStates: docs/fleet.md's table of the summary's states lists exactly the
// states the callback prints, the playbook's head names its words, and the sample summary
// uses none other.
func TestDocsFleetSummaryStates(t *testing.T) {
	states := summaryStates(t)
	doc := readDoc(t, "docs/fleet.md")
	_, table, ok := strings.Cut(doc, "\n| state | meaning |\n|---|---|\n")
	if !ok {
		t.Fatal("docs/fleet.md has no table of the summary's states")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	keys, _ := tableRows(table, regexp.MustCompile("^`([a-z-]+)`$"))
	if !slices.Equal(keys, states) {
		t.Errorf("docs/fleet.md's summary states are %v, want the callback's, in its order: %v", keys, states)
	}
	head := readDoc(t, "ansible/ansible_collections/cutover/fleet/playbooks/fleet_upgrade.yml")
	for _, w := range []string{"upgraded", "downgraded", "staged", "untouched"} {
		if !strings.Contains(head, w) {
			t.Errorf("the playbook's head does not name the summary's %q", w)
		}
	}
	sample := regexp.MustCompile("(?s)```\nCUTOVER FLEET SUMMARY[^\n]*\n(.*?)```").FindStringSubmatch(doc)
	if sample == nil {
		t.Fatal("docs/fleet.md shows no summary")
	}
	for i, line := range strings.Split(strings.TrimSpace(sample[1]), "\n") {
		fields := strings.Fields(line)
		state := fields[0]
		if i > 0 {
			state = fields[1]
		}
		if !slices.Contains(states, state) {
			t.Errorf("docs/fleet.md's sample summary line %q has the state %q, not one the callback prints", line, state)
		}
	}
}

// TestDocsDoneEventFields: docs/json.md names every field of upgrade's done event.
func TestDocsDoneEventFields(t *testing.T) {
	doc := readDoc(t, "docs/json.md")
	typ := reflect.TypeOf(upgradeDoneEvent{})
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Anonymous {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		if !strings.Contains(doc, "`"+name+"`") {
			t.Errorf("docs/json.md does not name the done event's field %s", name)
		}
	}
}
