package cfgupgrade

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzApplyOps applies random op lists to random documents, and migrates
// the documents with those ops: neither may panic, and a document that the
// ops changed must encode and read back unchanged.
//
//	go test -fuzz=FuzzApplyOps ./cfgupgrade/
func FuzzApplyOps(f *testing.F) {
	configs, _ := filepath.Glob(filepath.Join("testdata", "configs", "*.json"))
	migrations, _ := filepath.Glob(filepath.Join("testdata", "migrations", "*", "*.json"))
	bad, _ := filepath.Glob(filepath.Join("testdata", "bad", "*", "*.json"))
	var docs, opLists [][]byte
	for _, name := range configs {
		doc, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		docs = append(docs, doc)
	}
	for _, name := range append(migrations, bad...) {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		var m struct{ Up, Down json.RawMessage }
		if json.Unmarshal(data, &m) == nil {
			opLists = append(opLists, m.Up, m.Down)
		}
	}
	docs = append(docs, []byte(opsDoc), []byte(`{"version": "1.0.0", "a": [[], {}, null, 1e999]}`), []byte(`[1]`))
	opLists = append(opLists, []byte(`[{"op": "move", "from": "/*/*", "path": "/*/*/*"}]`),
		[]byte(`[{"op": "copy", "from": "/*", "path": "/*/-"}, {"op": "remove", "path": "/*/*/*"}]`))
	for _, doc := range docs {
		for _, ops := range opLists {
			f.Add(doc, []byte(ops))
		}
	}
	spec := Spec{VersionKey: "/version", Encoding: Semver}
	f.Fuzz(func(t *testing.T, doc, opList []byte) {
		var ops []Op
		if json.Unmarshal(opList, &ops) != nil {
			return
		}
		mig := Migration{From: "1.0", To: "1.1", Up: ops, Down: ops}
		Migrate(doc, spec, "1.0.0", "1.1.0", []Migration{mig})
		Migrate(doc, spec, "1.1.0", "1.0.0", []Migration{mig})

		root, err := decodeJSON(doc)
		if err != nil {
			return
		}
		root, err = applyOps(root, ops, "up", newBudget(root))
		if err != nil {
			return
		}
		out, err := encodeJSON(root)
		if err != nil {
			t.Fatalf("encode the result: %v", err)
		}
		back, err := decodeJSON(out)
		if err != nil {
			t.Fatalf("decode the result: %v\n%s", err, out)
		}
		if again, err := encodeJSON(back); err != nil || !bytes.Equal(again, out) {
			t.Fatalf("the result does not read back the same:\n%s\nread back as\n%s", out, again)
		}
	})
}
