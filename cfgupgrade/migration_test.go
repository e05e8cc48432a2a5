package cfgupgrade

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadMigrations(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("testdata", "migrations", "demo")
	migs, err := LoadMigrations(dir)
	if err != nil {
		t.Fatalf("LoadMigrations(%s): %v", dir, err)
	}
	want := []struct {
		from, to  string
		up, down  int
		firstPath string
	}{
		{"1.0", "1.1", 3, 3, "/nodes/*/address"},
		{"1.1", "1.2", 3, 3, "/instances/*/disk_template"},
		{"1.3", "1.4", 1, 1, "/workloads"},
	}
	if len(migs) != len(want) {
		t.Fatalf("LoadMigrations(%s) = %d migrations, want %d", dir, len(migs), len(want))
	}
	for i, w := range want {
		m := migs[i]
		if m.From != w.from || m.To != w.to || len(m.Up) != w.up || len(m.Down) != w.down || m.Up[0].Path != w.firstPath {
			t.Errorf("migration %d = %s to %s, %d up, %d down, first path %q; want %s to %s, %d, %d, %q",
				i, m.From, m.To, len(m.Up), len(m.Down), m.Up[0].Path, w.from, w.to, w.up, w.down, w.firstPath)
		}
		if wantFile := filepath.Join(dir, w.from+"-"+w.to+".json"); m.File != wantFile {
			t.Errorf("migration %d file = %q, want %q", i, m.File, wantFile)
		}
	}
}

func TestLoadMigrationsMissingDir(t *testing.T) {
	t.Parallel()
	migs, err := LoadMigrations(filepath.Join(t.TempDir(), "nothing"))
	if err != nil || len(migs) != 0 {
		t.Errorf("LoadMigrations(missing dir) = %v, %v; want none, no error", migs, err)
	}
}

func TestLoadMigrationsUnreadable(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "plain-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadMigrations(file); !errorMatches(err, "read migrations") {
		t.Errorf("LoadMigrations(a file) error = %v, want a read error", err)
	}
}

// TestLoadMigrationsBad loads each directory of testdata/bad and checks that
// the error names the file and, for an op, its list and index.
func TestLoadMigrationsBad(t *testing.T) {
	t.Parallel()
	tests := []struct {
		dir, file, want string
	}{
		{"unknown-op", "1.1-1.2.json", `up[2]: op "frobnicate" is unknown`},
		{"unknown-op-field", "1.0-1.1.json", `up[0]: invalid JSON: unknown field "vale"`},
		{"unknown-field", "1.0-1.1.json", `invalid JSON: unknown field "ups"`},
		{"missing-down", "1.0-1.1.json", `"down" is missing`},
		{"null-up", "1.0-1.1.json", `"up" is missing`},
		{"skips-minor", "1.0-1.2.json", "from 1.0 to 1.2 is not one minor step (want to 1.1, or to 2.0 for a hop"},
		{"hop-not-to-first-minor", "1.9-2.1.json", "from 1.9 to 2.1 is not one minor step (want to 1.10, or to 2.0 for a hop"},
		{"backwards", "1.2-1.1.json", "from 1.2 to 1.1 is not one minor step"},
		{"full-version", "1.0-1.1.json", `from: "1.0.0" is not MAJOR.MINOR`},
		{"leading-zero", "1.0-1.1.json", `from: "1.00" is not MAJOR.MINOR: number "00" has a leading zero`},
		{"relative-pointer", "1.0-1.1.json", `down[1]: path: pointer "a/b" does not start with "/"`},
		{"bad-escape", "1.0-1.1.json", `up[0]: path: pointer "/a~2b": "~" must be followed by 0 or 1`},
		{"root-path", "1.0-1.1.json", "up[0]: path is missing or empty (an op cannot address the whole document)"},
		{"move-without-from", "1.0-1.1.json", "up[0]: from is missing"},
		{"copy-with-value", "1.0-1.1.json", "up[0]: copy takes no value"},
		{"set-without-value", "1.0-1.1.json", "up[0]: set needs a value"},
		{"set-with-from", "1.0-1.1.json", "up[0]: set takes no from"},
		{"set-wildcard-last", "1.0-1.1.json", `up[0]: path "/nodes/*": set cannot have a "*" in the last segment`},
		{"remove-with-value", "1.0-1.1.json", "down[0]: remove takes only a path"},
		{"remove-if-absent", "1.0-1.1.json", "down[0]: remove takes only a path"},
		{"move-if-absent", "1.0-1.1.json", "up[0]: move takes no if_absent"},
		{"wildcard-mismatch", "1.0-1.1.json", `up[0]: from "/nodes/*/ip" has 1 "*" and path "/address" has 0`},
		{"move-into-itself", "1.0-1.1.json", `up[0]: cannot move "/a" into itself ("/a/b")`},
		{"missing-op", "1.0-1.1.json", "up[0]: op is missing"},
		{"wrong-type", "1.0-1.1.json", "up[0]: invalid JSON: cannot unmarshal number"},
		{"not-json", "1.0-1.1.json", "invalid JSON: unexpected EOF"},
		{"trailing-data", "1.0-1.1.json", "invalid JSON: data after the JSON value"},
		{"duplicate", "1.0-1.1.json", "the step from 1.0 is also in testdata/bad/duplicate/1.0-1.1-fix.json"},
	}
	entries, err := os.ReadDir(filepath.Join("testdata", "bad"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(tests) {
		t.Errorf("testdata/bad has %d cases, the table %d: keep them in step", len(entries), len(tests))
	}
	for _, tt := range tests {
		dir := filepath.Join("testdata", "bad", tt.dir)
		migs, err := LoadMigrations(dir)
		want := filepath.Join(dir, tt.file) + ": " + tt.want
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("LoadMigrations(%s) = %d migrations, %v; want error containing %q", dir, len(migs), err, want)
		}
		if migs != nil {
			t.Errorf("LoadMigrations(%s) returned migrations with its error", dir)
		}
	}
}

// TestLoadMigrationsReportsEveryError checks that one load names every bad
// op of every file, not only the first.
func TestLoadMigrationsReportsEveryError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "1.0-1.1.json"), `{"from": "1.0", "to": "1.1",
		"up": [{"op": "nope", "path": "/a"}, {"op": "set", "path": "/b"}], "down": [{"op": "remove"}]}`)
	writeFile(t, filepath.Join(dir, "1.1-1.2.json"), `{"from": "1.1", "to": "1.3", "up": [], "down": []}`)
	writeFile(t, filepath.Join(dir, "notes.txt"), `not a migration`)
	_, err := LoadMigrations(dir)
	for _, want := range []string{
		"1.0-1.1.json: up[0]: op \"nope\" is unknown",
		"1.0-1.1.json: up[1]: set needs a value",
		"1.0-1.1.json: down[0]: path is missing",
		"1.1-1.2.json: from 1.1 to 1.3 is not one minor step",
	} {
		if !errorMatches(err, want) {
			t.Errorf("LoadMigrations error = %v, want it to contain %q", err, want)
		}
	}
}

func writeFile(t *testing.T, name, data string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
