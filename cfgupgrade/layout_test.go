package cfgupgrade

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// layoutMigs renames every node's ip to address, adds a queue setting and a member to
// every node, and removes a cluster setting: what a migration does to a real config.
var layoutMigs = []Migration{{From: "1.0", To: "1.1", File: "1.0-1.1.json", Up: []Op{
	{Op: "move", From: "/nodes/*/ip", Path: "/nodes/*/address"},
	{Op: "set", Path: "/nodes/*/zone", Value: []byte(`"default"`)},
	{Op: "set", Path: "/queue/workers", Value: []byte(`2`)},
	{Op: "remove", Path: "/cluster/legacy"},
}}}

// TestMigrateKeepsLayout: the migrated config changes by the migration only. Its members
// keep their order (version stays first), a renamed member keeps its place, new members go
// at the end of their object, and the indentation (two spaces, four, a tab, one line), the
// spacing, the line ends and the final newline (or its absence) are the original's.
func TestMigrateKeepsLayout(t *testing.T) {
	t.Parallel()
	spec := Spec{VersionKey: "/version", Encoding: Semver}
	tests := []struct{ name, doc, want string }{
		{"two spaces",
			"{\n  \"version\": \"1.0.0\",\n  \"nodes\": {\n    \"n1\": {\n      \"ip\": \"10.0.0.1\",\n      \"vcpus\": 4\n    }\n  },\n  \"cluster\": {\n    \"name\": \"demo\",\n    \"legacy\": true,\n    \"serial\": 7\n  },\n  \"queue\": {}\n}\n",
			"{\n  \"version\": \"1.1.0\",\n  \"nodes\": {\n    \"n1\": {\n      \"address\": \"10.0.0.1\",\n      \"vcpus\": 4,\n      \"zone\": \"default\"\n    }\n  },\n  \"cluster\": {\n    \"name\": \"demo\",\n    \"serial\": 7\n  },\n  \"queue\": {\n    \"workers\": 2\n  }\n}\n"},
		{"four spaces",
			"{\n    \"version\": \"1.0.0\",\n    \"nodes\": {\"n1\": {\"vcpus\": 4, \"ip\": \"10.0.0.1\"}},\n    \"queue\": {\"drained\": false}\n}\n",
			"{\n    \"version\": \"1.1.0\",\n    \"nodes\": {\"n1\": {\"vcpus\": 4, \"address\": \"10.0.0.1\", \"zone\": \"default\"}},\n    \"queue\": {\"drained\": false, \"workers\": 2}\n}\n"},
		{"tabs, no final newline",
			"{\n\t\"version\": \"1.0.0\",\n\t\"nodes\": {},\n\t\"queue\": {}\n}",
			"{\n\t\"version\": \"1.1.0\",\n\t\"nodes\": {},\n\t\"queue\": {\n\t\t\"workers\": 2\n\t}\n}"},
		{"first line deeper than one level",
			"{\"nodes\": {\n        \"n1\": {\"ip\": \"a\"}}, \"queue\": {}, \"version\": \"1.0.0\"}\n",
			"{\n    \"nodes\": {\n        \"n1\": {\"address\": \"a\", \"zone\": \"default\"}\n    },\n    \"queue\": {\n        \"workers\": 2\n    },\n    \"version\": \"1.1.0\"\n}\n"},
		{"CRLF line ends",
			"{\r\n  \"version\": \"1.0.0\",\r\n  \"queue\": {},\r\n  \"nodes\": {}\r\n}\r\n",
			"{\r\n  \"version\": \"1.1.0\",\r\n  \"queue\": {\r\n    \"workers\": 2\r\n  },\r\n  \"nodes\": {}\r\n}\r\n"},
		{"one line with spaces",
			`{"version": "1.0.0", "queue": {}, "nodes": {"n2": {"ip": "b"}, "n1": {"ip": "a"}}}` + "\n",
			`{"version": "1.1.0", "queue": {"workers": 2}, "nodes": {"n2": {"address": "b", "zone": "default"}, "n1": {"address": "a", "zone": "default"}}}` + "\n"},
		{"compact",
			`{"version":"1.0.0","queue":{},"list":[1,2],"nodes":{"n1":{"ip":"a"}}}`,
			`{"version":"1.1.0","queue":{"workers":2},"list":[1,2],"nodes":{"n1":{"address":"a","zone":"default"}}}`},
		{"numbers as written, no HTML escaping",
			`{"z": 1.50, "version": "1.0.0", "a": "<b>&", "big": 123456789012345678901234567890, "e": 1e3, "queue": {}, "nodes": {}}`,
			`{"z": 1.50, "version": "1.1.0", "a": "<b>&", "big": 123456789012345678901234567890, "e": 1e3, "queue": {"workers": 2}, "nodes": {}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := Migrate([]byte(tt.doc), spec, "1.0.0", "1.1.0", layoutMigs)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Errorf("Migrate(%q) =\n%q\nwant\n%q", tt.doc, out, tt.want)
			}
		})
	}
}

// TestMigrateDiff: the report's diff shows the members in the config's order, indented by
// two spaces, whatever the config's layout.
func TestMigrateDiff(t *testing.T) {
	t.Parallel()
	spec := Spec{VersionKey: "/v", Encoding: Ganeti}
	doc := `{"z": 1.50, "v": 1000000, "a": "<b>&"}`
	_, rep, err := Migrate([]byte(doc), spec, "1.0.0", "1.0.3", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `--- config 1.0.0
+++ config 1.0.3
@@ -1,5 +1,5 @@
 {
   "z": 1.50,
-  "v": 1000000,
+  "v": 1000003,
   "a": "<b>&"
 }
`
	if rep.Diff != want {
		t.Errorf("Migrate diff =\n%s\nwant\n%s", rep.Diff, want)
	}
}

// TestMoveKeepsPlace: a move within one object renames the member where it stands, also
// over a member of the new name, which it replaces (the renamed one keeps its place); a move to another object adds the
// member at the end there; a move over an existing member elsewhere replaces it in place.
func TestMoveKeepsPlace(t *testing.T) {
	t.Parallel()
	doc := `{"a": 1, "b": 2, "c": 3, "o": {"x": 0}}`
	tests := []struct{ op, want string }{
		{`{"op": "move", "from": "/b", "path": "/B"}`, `{"a": 1, "B": 2, "c": 3, "o": {"x": 0}}`},
		{`{"op": "move", "from": "/c", "path": "/a"}`, `{"b": 2, "a": 3, "o": {"x": 0}}`},
		{`{"op": "move", "from": "/a", "path": "/c"}`, `{"c": 1, "b": 2, "o": {"x": 0}}`},
		{`{"op": "move", "from": "/a", "path": "/o/a"}`, `{"b": 2, "c": 3, "o": {"x": 0, "a": 1}}`},
		{`{"op": "move", "from": "/o/x", "path": "/b"}`, `{"a": 1, "b": 0, "c": 3, "o": {}}`},
		{`{"op": "copy", "from": "/a", "path": "/o/a"}`, `{"a": 1, "b": 2, "c": 3, "o": {"x": 0, "a": 1}}`},
		{`{"op": "remove", "path": "/b"}, {"op": "set", "path": "/b", "value": 9}`, `{"a": 1, "c": 3, "o": {"x": 0}, "b": 9}`},
	}
	for _, tt := range tests {
		root, err := applyOps(mustDecode(t, doc), mustOps(t, "["+tt.op+"]"), "up", &budget{left: 100})
		if err != nil {
			t.Fatalf("%s: %v", tt.op, err)
		}
		got, err := layoutOf([]byte(doc)).encode(root)
		if err != nil || string(got) != tt.want {
			t.Errorf("%s: %s, %v; want %s", tt.op, got, err, tt.want)
		}
	}
}

// TestObjectRemovesInLinearTime: removing every member of a large object, as a remove of
// "/big/*" does, compacts the removed members away instead of shifting the rest each time.
func TestObjectRemovesInLinearTime(t *testing.T) {
	t.Parallel()
	o := newObject()
	const n = 200_000
	for i := range n {
		o.set(strings.Repeat("k", 1+i%7)+string(rune('a'+i%26))+itoa(i), i)
	}
	for _, name := range o.names() {
		o.remove(name)
	}
	if o.len() != 0 || len(o.members) > 1 {
		t.Errorf("after removing every member: len %d, %d members kept", o.len(), len(o.members))
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

// TestMigrateFileDiff keeps, for each fixture, the diff between the config file before and
// after a migration, line by line as the file is: it shows the migration's changes and
// nothing else (no sorting, no reindenting, no object or array on one line spread over many).
//
//	go test ./cfgupgrade/ -run TestMigrateFileDiff -update
func TestMigrateFileDiff(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		f      fixture
		to     string
		golden string
	}{
		{demoFixture, "1.2.0", "file-demo-1.0.0-1.2.0.diff"},
		{ganetiFixture, "2.16.0", "file-ganeti-2.15.0-2.16.0.diff"},
	} {
		doc, migs := tt.f.load(t)
		out, _, err := Migrate(doc, tt.f.spec, tt.f.version, tt.to, migs)
		if err != nil {
			t.Fatal(err)
		}
		got := unifiedDiff(tt.f.config, tt.f.config+" migrated to "+tt.to, doc, out)
		golden := filepath.Join("testdata", "golden", tt.golden)
		if *update {
			if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test -update to create it)", err)
		}
		if got != string(want) {
			t.Errorf("%s migrated to %s, the file's diff =\n%s\nwant (%s)\n%s", tt.f.config, tt.to, got, golden, want)
		}
	}
}
