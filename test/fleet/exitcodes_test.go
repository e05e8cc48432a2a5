package fleet

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// cutoverExitCodes returns cutover's exit codes as its source has them: the exit* constants of
// cmd/cutover (what exitCode returns) and what --help says of each (exitCodesHelp), as one line.
func cutoverExitCodes(t *testing.T) (consts map[string]int, help map[int]string) {
	t.Helper()
	fset := token.NewFileSet()
	dir := filepath.Join("..", "..", "cmd", "cutover")
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	consts = map[string]int{}
	var helpText string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					switch {
					case !ok:
					case name.Name == "exitCodesHelp" && lit.Kind == token.STRING:
						if helpText, err = strconv.Unquote(lit.Value); err != nil {
							t.Fatalf("exitCodesHelp: %v", err)
						}
					case strings.HasPrefix(name.Name, "exit") && lit.Kind == token.INT:
						n, err := strconv.Atoi(lit.Value)
						if err != nil {
							t.Fatalf("%s: %v", name.Name, err)
						}
						consts[name.Name] = n
					}
				}
			}
		}
	}
	if len(consts) == 0 || helpText == "" {
		t.Fatalf("cmd/cutover: found the exit codes %v and exitCodesHelp %q; want both", consts, helpText)
	}
	help = map[int]string{}
	entry := regexp.MustCompile(`^\s+(\d+)\s{2,}(\S.*)$`)
	last := -1
	for _, line := range strings.Split(helpText, "\n")[1:] { // after "EXIT CODES:"
		if m := entry.FindStringSubmatch(line); m != nil {
			last, _ = strconv.Atoi(m[1])
			help[last] = m[2]
			continue
		}
		if last < 0 || strings.TrimSpace(line) == "" {
			t.Fatalf("exitCodesHelp: line %q belongs to no code", line)
		}
		help[last] += " " + strings.TrimSpace(line)
	}
	return consts, help
}

// collectionExitMeanings returns EXIT_MEANINGS of the collection's module_utils/cutover.py.
func collectionExitMeanings(t *testing.T) map[int]string {
	t.Helper()
	python, err := exec.LookPath("python3")
	require(t, err == nil, "no python3 on this machine")
	path := filepath.Join(ansibleDir(t), "ansible_collections/cutover/fleet/plugins/module_utils/cutover.py")
	script := `import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("cutover_utils", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
print(json.dumps(m.EXIT_MEANINGS))`
	cmd := exec.Command(python, "-c", script, path)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reading EXIT_MEANINGS of %s: %v", path, err)
	}
	var raw map[string]string
	if err := json.Unmarshal(out, &raw); err != nil {
		t.Fatalf("EXIT_MEANINGS: %v: %s", err, out)
	}
	meanings := map[int]string{}
	for k, v := range raw {
		n, err := strconv.Atoi(k)
		if err != nil {
			t.Fatalf("EXIT_MEANINGS key %q: %v", k, err)
		}
		meanings[n] = v
	}
	return meanings
}

func sortedCodes[V any](m map[int]V) []int {
	var codes []int
	for c := range m {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	return codes
}

// TestExitCodesMatchCutover checks that the collection gives every exit code of cutover the
// meaning cutover's --help gives it, and no other code: EXIT_MEANINGS against the exit*
// constants and exitCodesHelp of cmd/cutover; and that the modules' documentation of rc and
// docs/fleet.md's table name every code.
func TestExitCodesMatchCutover(t *testing.T) {
	consts, help := cutoverExitCodes(t)
	codes := map[int]bool{}
	for name, n := range consts {
		if codes[n] {
			t.Errorf("cmd/cutover: two exit* constants are %d (%s among them)", n, name)
		}
		codes[n] = true
	}
	if got, want := sortedCodes(help), sortedCodes(codes); !slices.Equal(got, want) {
		t.Errorf("cutover --help documents the exit codes %v; its exit* constants are %v", got, want)
	}

	meanings := collectionExitMeanings(t)
	if got, want := sortedCodes(meanings), sortedCodes(codes); !slices.Equal(got, want) {
		t.Errorf("EXIT_MEANINGS of module_utils/cutover.py has the codes %v; cutover's are %v", got, want)
	}
	space := regexp.MustCompile(`\s+`)
	for _, code := range sortedCodes(help) {
		got, ok := meanings[code]
		if !ok {
			continue
		}
		if want := help[code]; space.ReplaceAllString(got, " ") != space.ReplaceAllString(want, " ") {
			t.Errorf("EXIT_MEANINGS[%d] = %q; cutover --help says %q", code, got, want)
		}
	}

	// Each module that lists the codes in its rc's documentation lists them all.
	rcDoc := regexp.MustCompile(`(?s)\nrc:\n\s+description:(.*?)\n\s+returned:`)
	listed := regexp.MustCompile(`(?:\(|;\s+)(\d+)\s`)
	modules, err := filepath.Glob(filepath.Join(ansibleDir(t), "ansible_collections/cutover/fleet/plugins/modules/*.py"))
	if err != nil || len(modules) == 0 {
		t.Fatalf("the collection's modules: %v (found %d)", err, len(modules))
	}
	for _, path := range modules {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m := rcDoc.FindSubmatch(data)
		if m == nil || !strings.Contains(string(m[1]), "(0 ") {
			continue
		}
		got := map[int]bool{}
		for _, c := range listed.FindAllSubmatch(m[1], -1) {
			n, _ := strconv.Atoi(string(c[1]))
			got[n] = true
		}
		if g, w := sortedCodes(got), sortedCodes(codes); !slices.Equal(g, w) {
			t.Errorf("%s documents rc as %v; cutover's exit codes are %v", filepath.Base(path), g, w)
		}
	}

	// docs/fleet.md's table of what a failed task's rc means has a row for each failure code.
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "fleet.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range sortedCodes(codes) {
		if code == 0 {
			continue
		}
		if !regexp.MustCompile(`(?m)^\| ` + strconv.Itoa(code) + ` \|`).Match(data) {
			t.Errorf("docs/fleet.md: the table of rc has no row for exit code %d (%s)", code, help[code])
		}
	}
}

// TestExitMeaningOfAPendingRun: a run refused because another one is pending exits 1, but
// exit_meaning does not call the cluster as before: it names the pending run. A failed
// task's message and details are bounded.
func TestExitMeaningOfAPendingRun(t *testing.T) {
	python, err := exec.LookPath("python3")
	require(t, err == nil, "no python3 on this machine")
	path := filepath.Join(ansibleDir(t), "ansible_collections/cutover/fleet/plugins/module_utils/cutover.py")
	script := `import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("cutover_utils", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
print(json.dumps(dict(
    pending=m.exit_meaning(1, {"run": 3, "from": "2.3.1", "to": "2.4.2"}),
    plain=m.exit_meaning(1),
    short=len(m.short("x" * 100000)),
    bounded=len(m.bounded("y" * 100000)),
    listed=len(m.bounded_list(["z" * 5000] * 500)),
)))`
	cmd := exec.Command(python, "-c", script, path)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("module_utils/cutover.py: %v", err)
	}
	var got struct {
		Pending, Plain         string
		Short, Bounded, Listed int
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if strings.Contains(got.Pending, "as before") || !strings.Contains(got.Pending, "run 3 (2.3.1 -> 2.4.2) is pending") || !strings.Contains(got.Pending, "drained") {
		t.Errorf("exit_meaning(1) with a pending run = %q, want the pending run named and no claim that the cluster is as before", got.Pending)
	}
	if !strings.Contains(got.Plain, "as before") {
		t.Errorf("exit_meaning(1) = %q, want cutover's own words", got.Plain)
	}
	if got.Short > 700 || got.Bounded > 2100 || got.Listed > 21 {
		t.Errorf("bounds: a message of 100000 characters gives %d, a detail %d, a list of 500 %d entries; want at most 700, 2100, 21", got.Short, got.Bounded, got.Listed)
	}
}
