package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cutover/cutover/test/cluster"
	"github.com/cutover/cutover/test/demoapp"
)

// makeTargets returns the targets the Makefile defines.
func makeTargets(t *testing.T) []string {
	t.Helper()
	var out []string
	rule := regexp.MustCompile(`^([a-z][a-z0-9 -]*):([^=]|$)`)
	for _, line := range strings.Split(readDoc(t, "Makefile"), "\n") {
		if m := rule.FindStringSubmatch(line); m != nil {
			out = append(out, strings.Fields(m[1])...)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// makeVariable returns the default a Makefile's NAME ?= VALUE gives.
func makeVariable(t *testing.T, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + `\s*\?=\s*(\S+)\s*$`).FindStringSubmatch(readDoc(t, "Makefile"))
	if m == nil {
		t.Fatalf("the Makefile has no %s ?= default", name)
	}
	return m[1]
}

// docMakeTargets returns, by document, the make targets the README and docs/ tell the reader to
// run: `make TARGET ...` in a code span, or a line make TARGET ... of a fenced block. A make
// whose first word is an assignment (make DESTDIR=... install) is the reader's own Makefile.
func docMakeTargets(t *testing.T) map[string][]string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	span := regexp.MustCompile("`make ([a-z][a-z0-9-]*)[ `]")
	fencedLine := regexp.MustCompile(`^\s*(?:# )?make ([a-z][a-z0-9-]*)(?:\s|$)`)
	out := map[string][]string{}
	for _, doc := range append([]string{"README.md"}, relAll(t, docs)...) {
		fenced := false
		for _, line := range strings.Split(readDoc(t, doc), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fenced = !fenced
				continue
			}
			if fenced {
				if m := fencedLine.FindStringSubmatch(line); m != nil {
					out[doc] = append(out[doc], m[1])
				}
				continue
			}
			for _, m := range span.FindAllStringSubmatch(line, -1) {
				out[doc] = append(out[doc], m[1])
			}
		}
	}
	return out
}

// relAll returns paths relative to the repository's root.
func relAll(t *testing.T, paths []string) []string {
	t.Helper()
	var out []string
	for _, p := range paths {
		rel, err := filepath.Rel(repoRoot, p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rel)
	}
	return out
}

// TestDocsMakeTargets: every make target the README and docs/ tell the reader to run is one
// of the Makefile's, and every target of the Makefile is told of somewhere.
func TestDocsMakeTargets(t *testing.T) {
	targets := makeTargets(t)
	if len(targets) < 10 {
		t.Fatalf("the Makefile's targets read as %q: the reading is broken", targets)
	}
	told := map[string]bool{}
	for doc, names := range docMakeTargets(t) {
		for _, name := range names {
			told[name] = true
			if !slices.Contains(targets, name) {
				t.Errorf("%s: `make %s`, which the Makefile does not have (its targets: %s)", doc, name, strings.Join(targets, " "))
			}
		}
	}
	for _, name := range targets {
		if !told[name] {
			t.Errorf("the Makefile's target %s is told of nowhere in the README or docs/", name)
		}
	}
}

// clusterctlUsage returns clusterctl's commands and the flags of its up command, as its usage
// lists them.
func clusterctlUsage(t *testing.T) (commands, upFlags []string) {
	t.Helper()
	src := readDoc(t, "test/cluster/clusterctl/main.go")
	start := strings.Index(src, "const usage = `")
	end := strings.Index(src[start+len("const usage = `"):], "`")
	if start < 0 || end < 0 {
		t.Fatal("clusterctl's usage is not where this test reads it")
	}
	usage := src[start : start+len("const usage = `")+end]
	line := regexp.MustCompile(`(?m)^  clusterctl \[-name NAME\] ([a-z|]+)(.*)$`)
	for _, m := range line.FindAllStringSubmatch(usage, -1) {
		for _, c := range strings.Split(m[1], "|") {
			if !slices.Contains(commands, c) {
				commands = append(commands, c)
			}
		}
		if m[1] == "up" {
			for _, f := range regexp.MustCompile(`\[?(-[a-z]+)`).FindAllStringSubmatch(m[2], -1) {
				if !slices.Contains(upFlags, f[1]) {
					upFlags = append(upFlags, f[1])
				}
			}
		}
	}
	return commands, upFlags
}

// TestDocsTestCluster: the README's "The test cluster by hand" lists every target of the test
// cluster in its table, each running the clusterctl command of its name; names clusterctl's
// commands and the flags of up as its usage has them; and its figures (the demo's nodes, the
// demo versions, the live one) are those of test/demo.sh and the cluster's code.
func TestDocsTestCluster(t *testing.T) {
	readme := readDoc(t, "README.md")
	start := strings.Index(readme, "\n## The test cluster by hand\n")
	if start < 0 {
		t.Fatal(`README.md has no section "The test cluster by hand"`)
	}
	section := readme[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	commands, upFlags := clusterctlUsage(t)
	if len(commands) < 8 || !slices.Contains(upFlags, "-nodes") {
		t.Fatalf("clusterctl's usage reads as commands %q, up flags %q: the reading is broken", commands, upFlags)
	}

	var inTable []string
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "| `make ") {
			cell := strings.Split(strings.Trim(line, "|"), " | ")[0]
			for _, m := range regexp.MustCompile("`make ([a-z-]+)").FindAllStringSubmatch(cell, -1) {
				inTable = append(inTable, m[1])
			}
		}
	}
	if len(inTable) == 0 {
		t.Fatal("the README's test cluster section has no table of targets")
	}
	for _, target := range makeTargets(t) {
		cmd, ok := strings.CutPrefix(target, "node-")
		if !ok {
			if cmd, ok = strings.CutPrefix(target, "cluster-"); !ok {
				continue
			}
		}
		if !slices.Contains(inTable, target) {
			t.Errorf("the README's test cluster table lacks make %s", target)
		}
		if !slices.Contains(commands, cmd) {
			t.Errorf("make %s: clusterctl has no command %s (its commands: %q)", target, cmd, commands)
		}
	}

	m := regexp.MustCompile("Its commands are (.*?);").FindStringSubmatch(strings.Join(strings.Fields(section), " "))
	if m == nil {
		t.Fatal("the README's test cluster section does not list clusterctl's commands (\"Its commands are ...;\")")
	}
	var listed []string
	for _, c := range regexp.MustCompile("`([a-z]+)`").FindAllStringSubmatch(m[1], -1) {
		listed = append(listed, c[1])
	}
	if a, b := slices.Sorted(slices.Values(listed)), slices.Sorted(slices.Values(commands)); !slices.Equal(a, b) {
		t.Errorf("the README lists clusterctl's commands %q, its usage has %q", a, b)
	}
	for _, f := range upFlags {
		if !strings.Contains(section, "`up "+f) {
			t.Errorf("the README's test cluster section does not name clusterctl's `up %s`", f)
		}
	}

	demo := regexp.MustCompile(`(?m)^NODES=\(([^)]*)\)$`).FindStringSubmatch(readDoc(t, "test/demo.sh"))
	if demo == nil {
		t.Fatal("test/demo.sh has no NODES=(...): the reading is broken")
	}
	if n := len(strings.Fields(demo[1])); !strings.Contains(readme, fmt.Sprintf("a %d-node demo cluster", n)) {
		t.Errorf("the README does not call make demo's cluster a %d-node demo cluster, as test/demo.sh starts it", n)
	}
	versions := strings.Join(demoapp.Versions[:len(demoapp.Versions)-1], ", ") + " and " + demoapp.Versions[len(demoapp.Versions)-1]
	if want := "`demoapp` " + versions + " side by side, " + cluster.DefaultLive + " live"; !strings.Contains(strings.Join(strings.Fields(section), " "), want) {
		t.Errorf("the README's test cluster section does not say %q, as the test cluster installs the demo application", want)
	}
}

// TestDocsMakeDefaults: the defaults the README gives for the Makefile's variables are the
// Makefile's.
func TestDocsMakeDefaults(t *testing.T) {
	readme := strings.Join(strings.Fields(readDoc(t, "README.md")), " ")
	list := func(name string) []string { return strings.Split(makeVariable(t, name), ",") }
	tests := []struct {
		variable string
		want     string // what the README says, built from the Makefile's default
	}{
		{"ROUNDS", "`ROUNDS` rounds in a row (" + makeVariable(t, "ROUNDS") + " unless set)"},
		{"FUZZTIME", "`FUZZTIME` each, " + makeVariable(t, "FUZZTIME") + " unless set"},
		{"BENCH_NODES", "over " + list("BENCH_NODES")[0] + " to " + list("BENCH_NODES")[len(list("BENCH_NODES"))-1] + " nodes (`BENCH_NODES`)"},
		{"SYNC_NODES", "at " + strings.Join(list("SYNC_NODES"), " and ") + " nodes (`SYNC_NODES`)"},
		{"NODES", "`make cluster-up [NODES=" + makeVariable(t, "NODES") + "]"},
		{"NAME", "(`" + makeVariable(t, "NAME") + "` unless set"},
	}
	for _, tt := range tests {
		if !strings.Contains(readme, tt.want) {
			t.Errorf("the README does not say %q, as the Makefile's default of %s has it", tt.want, tt.variable)
		}
	}
}
