package cfgupgrade

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fixture is a config in testdata/configs with the migrations that apply to it.
type fixture struct {
	config     string // file in testdata/configs
	migrations string // directory in testdata/migrations
	spec       Spec
	version    string // the config's version
}

var (
	demoFixture   = fixture{"demo-1.0.json", "demo", Spec{VersionKey: "/version", Encoding: Semver}, "1.0.0"}
	ganetiFixture = fixture{"ganeti-2.15.json", "ganeti", Spec{VersionKey: "/version", Encoding: Ganeti}, "2.15.0"}
)

func (f fixture) load(t *testing.T) ([]byte, []Migration) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("testdata", "configs", f.config))
	if err != nil {
		t.Fatal(err)
	}
	migs, err := LoadMigrations(filepath.Join("testdata", "migrations", f.migrations))
	if err != nil {
		t.Fatal(err)
	}
	return doc, migs
}

// TestMigrateRoundTrip checks the law down(up(x)) == x on every fixture and
// jump, and that the version moves as asked.
func TestMigrateRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		f     fixture
		to    string
		steps int
	}{
		{demoFixture, "1.0.7", 0},
		{demoFixture, "1.1.0", 1},
		{demoFixture, "1.2.0", 2},
		{demoFixture, "1.3.0", 3},
		{demoFixture, "1.4.2", 4},
		{demoFixture, "1.9.0", 5},
		{ganetiFixture, "2.16.0", 1},
		{ganetiFixture, "2.16.3", 1},
		{ganetiFixture, "2.17.0", 2},
	}
	for _, tt := range tests {
		t.Run(tt.f.config+"-"+tt.to, func(t *testing.T) {
			t.Parallel()
			doc, migs := tt.f.load(t)
			up, rep, err := Migrate(doc, tt.f.spec, tt.f.version, tt.to, migs)
			if err != nil {
				t.Fatalf("Migrate up to %s: %v", tt.to, err)
			}
			if rep.From != tt.f.version || rep.To != tt.to || len(rep.Steps) != tt.steps {
				t.Errorf("Migrate up report = %s to %s in %d steps, want %s to %s in %d", rep.From, rep.To, len(rep.Steps), tt.f.version, tt.to, tt.steps)
			}
			if v, err := VersionOf(up, tt.f.spec); err != nil || v != tt.to {
				t.Errorf("version after up = %q, %v; want %s", v, err, tt.to)
			}
			down, _, err := Migrate(up, tt.f.spec, tt.to, tt.f.version, migs)
			if err != nil {
				t.Fatalf("Migrate down to %s: %v", tt.f.version, err)
			}
			if !sameJSON(t, down, doc) {
				t.Errorf("down(up(x)) != x:\n%s", unifiedDiff("x", "down(up(x))", pretty(t, doc), down))
			}
		})
	}
}

// TestMigrateChains checks what the demo migrations do: 1.0 to 1.2 through
// two files, and 1.0 to 1.4 with 1.2 to 1.3 an identity step.
func TestMigrateChains(t *testing.T) {
	t.Parallel()
	doc, migs := demoFixture.load(t)
	tests := []struct {
		to      string
		present map[string]any // pointer -> value (nil: absent)
		steps   []string
	}{
		{"1.2.0", map[string]any{
			"/nodes/node1/address":         "10.0.0.11",
			"/nodes/node1/ip":              nil,
			"/cluster/master_address":      "10.0.0.10",
			"/cluster/display_name":        "demo",
			"/instances/db1/disk_template": "plain",
			"/instances/db1/uuid":          "12345678901234567890",
			"/queue/workers":               "2",
			"/nodes/node3/labels/zone":     "default",
		}, []string{"1.0>1.1 1.0-1.1.json", "1.1>1.2 1.1-1.2.json"}},
		{"1.4.0", map[string]any{
			"/instances":                    nil,
			"/workloads/web1/disk_template": "plain",
			"/workloads/db1/disk_gb":        "200.50",
		}, []string{"1.0>1.1 1.0-1.1.json", "1.1>1.2 1.1-1.2.json", "1.2>1.3 identity", "1.3>1.4 1.3-1.4.json"}},
	}
	for _, tt := range tests {
		out, rep, err := Migrate(doc, demoFixture.spec, "1.0.0", tt.to, migs)
		if err != nil {
			t.Fatalf("Migrate to %s: %v", tt.to, err)
		}
		root := mustDecode(t, string(out))
		for ptr, want := range tt.present {
			segs, _ := parsePointer(ptr)
			got, found, err := lookup(root, segs)
			if err != nil || found != (want != nil) || (found && jsonString(got) != want) {
				t.Errorf("Migrate to %s: %s = %v (found %v, %v), want %v", tt.to, ptr, got, found, err, want)
			}
		}
		var steps []string
		for _, s := range rep.Steps {
			what := filepath.Base(s.File)
			if s.Identity {
				what = "identity"
			}
			steps = append(steps, s.From+">"+s.To+" "+what)
		}
		if !reflect.DeepEqual(steps, tt.steps) {
			t.Errorf("Migrate to %s steps = %q, want %q", tt.to, steps, tt.steps)
		}
	}
}

func TestMigrateRefuses(t *testing.T) {
	t.Parallel()
	doc, migs := demoFixture.load(t)
	semver := Spec{File: "/var/lib/demoapp/config.json", VersionKey: "/version", Encoding: Semver}
	failing := []Migration{{From: "1.0", To: "1.1", File: "1.0-1.1.json",
		Up: []Op{{Op: "remove", Path: "/a"}, {Op: "set", Path: "/queue/drained/x", Value: []byte("1")}}}}
	tests := []struct {
		name     string
		doc      string
		spec     Spec
		from, to string
		migs     []Migration
		wantErr  string
		mismatch bool
	}{
		{"newer config", `{"version": "1.2.0"}`, semver, "1.0.0", "1.1.0", migs,
			"/var/lib/demoapp/config.json: config version 1.2.0 does not match the live version 1.0.0", true},
		{"older config", `{"version": "0.9.1"}`, semver, "1.0.0", "1.1.0", migs,
			"config version 0.9.1 does not match the live version 1.0.0", true},
		{"already migrated", `{"version": "1.1.0"}`, semver, "1.0.0", "1.1.0", migs,
			"config version 1.1.0 does not match the live version 1.0.0", true},
		{"foreign version", `{"version": "banana"}`, semver, "1.0.0", "1.1.0", migs,
			`/var/lib/demoapp/config.json: version at /version: version "banana"`, false},
		{"no version", `{"ver": "1.0.0"}`, semver, "1.0.0", "1.1.0", migs,
			"/var/lib/demoapp/config.json: no version at /version", false},
		{"not JSON", `{"version": "1.0.0"`, semver, "1.0.0", "1.1.0", migs, "not a JSON document", false},
		{"two documents", `{"version": "1.0.0"} {}`, semver, "1.0.0", "1.1.0", migs, "data after the JSON value", false},
		{"empty", ``, semver, "1.0.0", "1.1.0", migs, "not a JSON document: no JSON value", false},
		{"ganeti config read as semver", `{"version": 1000000}`, semver, "1.0.0", "1.1.0", migs,
			"version at /version: version is the number 1000000, want a string", false},
		{"bad live version", string(doc), semver, "1.0", "1.1.0", migs, "live version", false},
		{"bad target version", string(doc), semver, "1.0.0", "", migs, "target version", false},
		{"major hop", string(doc), semver, "1.0.0", "2.0.0", migs, "changes the major version", false},
		{"no version key", string(doc), Spec{Encoding: Semver}, "1.0.0", "1.1.0", migs, "version key is empty", false},
		{"wildcard version key", string(doc), Spec{VersionKey: "/*", Encoding: Semver}, "1.0.0", "1.1.0", migs, `version key "/*" cannot have a "*"`, false},
		{"no encoding", string(doc), Spec{VersionKey: "/version"}, "1.0.0", "1.1.0", migs, "version encoding is empty", false},
		{"ganeti target with pre-release", `{"version": 1000000}`, Spec{VersionKey: "/version", Encoding: Ganeti}, "1.0.0", "1.1.0-rc1", migs,
			"cannot hold a pre-release", false},
		{"failing op", string(doc), semver, "1.0.0", "1.1.0", failing,
			`migrate /var/lib/demoapp/config.json from 1.0 to 1.1: 1.0-1.1.json: up[1]: set /queue/drained/x: /queue/drained is the boolean false, not an object or array`, false},
		{"op removes the version's parent", `{"meta": {"version": "1.0.0"}}`, Spec{VersionKey: "/meta/version", Encoding: Semver}, "1.0.0", "1.1.0",
			[]Migration{{From: "1.0", To: "1.1", Up: []Op{{Op: "remove", Path: "/meta"}}}}, "set version /meta/version: parent /meta does not exist", false},
	}
	for _, tt := range tests {
		out, rep, err := Migrate([]byte(tt.doc), tt.spec, tt.from, tt.to, tt.migs)
		if !errorMatches(err, tt.wantErr) || tt.wantErr == "" {
			t.Errorf("%s: Migrate error = %v, want error containing %q", tt.name, err, tt.wantErr)
		}
		if IsMismatch(err) != tt.mismatch {
			t.Errorf("%s: IsMismatch(%v) = %v, want %v", tt.name, err, !tt.mismatch, tt.mismatch)
		}
		if out != nil || !reflect.DeepEqual(rep, Report{}) {
			t.Errorf("%s: Migrate returned a document or report with its error", tt.name)
		}
	}
}

// sameJSON reports whether a and b are the same JSON value, whatever the order of their
// objects' members and their layout.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	return canonical(t, mustDecode(t, string(a))) == canonical(t, mustDecode(t, string(b)))
}

// canonical writes a decoded value as JSON with every object's members sorted, so that two
// values compare equal whatever their order.
func canonical(t *testing.T, v any) string {
	t.Helper()
	var plain func(v any) any
	plain = func(v any) any {
		switch x := v.(type) {
		case *object:
			m := map[string]any{}
			x.each(func(name string, c any) { m[name] = plain(c) })
			return m
		case []any:
			s := make([]any, len(x))
			for i, c := range x {
				s[i] = plain(c)
			}
			return s
		}
		return v
	}
	b, err := json.Marshal(plain(v))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func pretty(t *testing.T, doc []byte) []byte {
	t.Helper()
	b, err := encodeJSON(mustDecode(t, string(doc)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jsonString renders a decoded scalar as its JSON text, unquoted for strings.
func jsonString(v any) string {
	b, err := encodeJSON(v)
	if err != nil {
		return "!" + err.Error()
	}
	return strings.Trim(strings.TrimSpace(string(b)), `"`)
}
