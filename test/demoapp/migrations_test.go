package demoapp

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// migration is one file of migrations/, in cutover's declarative format.
type migration struct {
	From string `json:"from"`
	To   string `json:"to"`
	Up   []op   `json:"up"`
	Down []op   `json:"down"`
}

// op is one step of a migration.
type op struct {
	Op       string `json:"op"`
	Path     string `json:"path"`
	From     string `json:"from"`
	Value    any    `json:"value"`
	IfAbsent bool   `json:"if_absent"`
}

// loadMigration reads migrations/name strictly: unknown fields are an error.
func loadMigration(t *testing.T, name string) migration {
	t.Helper()
	data, err := migrations.ReadFile("migrations/" + name)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	var m migration
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m
}

// loadFixture reads testdata/config-VERSION.json.
func loadFixture(t *testing.T, version string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "config-"+version+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestMigrationFilesShape(t *testing.T) {
	t.Parallel()
	entries, err := migrations.ReadDir("migrations")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(Versions)-1 {
		t.Errorf("%d migration files, want one per minor step (%d)", len(entries), len(Versions)-1)
	}
	for _, e := range entries {
		m := loadMigration(t, e.Name())
		if want := m.From + "-" + m.To + ".json"; e.Name() != want {
			t.Errorf("%s holds from %q to %q; want it named %s", e.Name(), m.From, m.To, want)
		}
		if len(m.Up) == 0 || len(m.Down) == 0 {
			t.Errorf("%s: %d up and %d down ops, want both", e.Name(), len(m.Up), len(m.Down))
		}
		for _, o := range append(append([]op{}, m.Up...), m.Down...) {
			if err := o.check(); err != nil {
				t.Errorf("%s: %v", e.Name(), err)
			}
		}
	}
}

// TestMigrations applies the migrations to the 1.0 config and back, and checks each step
// gives exactly the next version's config as Stage writes it.
func TestMigrations(t *testing.T) {
	t.Parallel()
	steps := []struct {
		file     string
		from, to string
	}{
		{"1.0-1.1.json", "1.0.0", "1.1.0"},
		{"1.1-1.2.json", "1.1.0", "1.2.0"},
	}
	for _, s := range steps {
		t.Run(s.file, func(t *testing.T) {
			t.Parallel()
			m := loadMigration(t, s.file)
			up := loadFixture(t, s.from)
			if err := applyOps(up, m.Up); err != nil {
				t.Fatalf("up: %v", err)
			}
			up["version"] = s.to
			if want := loadFixture(t, s.to); !reflect.DeepEqual(up, want) {
				t.Errorf("up(config %s) =\n%v\nwant\n%v", s.from, up, want)
			}
			if err := applyOps(up, m.Down); err != nil {
				t.Fatalf("down: %v", err)
			}
			up["version"] = s.from
			if want := loadFixture(t, s.from); !reflect.DeepEqual(up, want) {
				t.Errorf("down(up(config %s)) =\n%v\nwant it unchanged\n%v", s.from, up, want)
			}
		})
	}
}

// TestMigratedConfigStartsDaemon migrates the 1.0 config up step by step and starts each
// version's daemon on the result.
func TestMigratedConfigStartsDaemon(t *testing.T) {
	t.Parallel()
	doc := loadFixture(t, "1.0.0")
	for i, file := range []string{"1.0-1.1.json", "1.1-1.2.json"} {
		v := Versions[i+1]
		if err := applyOps(doc, loadMigration(t, file).Up); err != nil {
			t.Fatal(err)
		}
		doc["version"] = v
		n := singleNode(t, v)
		writeJSON(t, n.path("var/lib/demoapp/config.json"), doc)
		if _, errOut, code := n.run("daemon", "start"); code != 0 {
			t.Fatalf("daemon %s on the migrated config: exit %d, %s", v, code, errOut)
		}
		if got := n.must("daemon", "status"); got != "running "+v+"\n" {
			t.Errorf("status = %q", got)
		}
		n.must("daemon", "stop")
	}
}

// check reports whether o is a well-formed op.
func (o op) check() error {
	if !strings.HasPrefix(o.Path, "/") {
		return fmt.Errorf("op %q: path %q is not a JSON Pointer", o.Op, o.Path)
	}
	switch o.Op {
	case "set":
		if o.Value == nil || o.From != "" {
			return fmt.Errorf("set %s: want a value and no from", o.Path)
		}
	case "remove":
		if o.Value != nil || o.From != "" || o.IfAbsent {
			return fmt.Errorf("remove %s: want only a path", o.Path)
		}
	case "move", "copy":
		if !strings.HasPrefix(o.From, "/") || o.Value != nil || o.IfAbsent {
			return fmt.Errorf("%s %s: want a from pointer and no value", o.Op, o.Path)
		}
		if strings.Count(o.From, "*") != strings.Count(o.Path, "*") {
			return fmt.Errorf("%s %s: from %s has another number of wildcards", o.Op, o.Path, o.From)
		}
	default:
		return fmt.Errorf("unknown op %q", o.Op)
	}
	return nil
}

// applyOps is a small applier of cutover's migration ops for the tests: JSON Pointer paths
// into objects, '*' matching every member of an object, wildcards of from bound in order
// into path. Every op must find what it works on.
func applyOps(doc map[string]any, ops []op) error {
	for _, o := range ops {
		if err := o.check(); err != nil {
			return err
		}
		switch o.Op {
		case "set":
			for _, m := range expand(doc, split(o.Path), nil) {
				parent, key := m.parent, m.key
				if _, ok := parent[key]; ok && o.IfAbsent {
					continue
				}
				parent[key] = o.Value
			}
		case "remove":
			ms := expand(doc, split(o.Path), nil)
			for _, m := range ms {
				if _, ok := m.parent[m.key]; !ok {
					return fmt.Errorf("remove %s: %s does not exist", o.Path, m.key)
				}
				delete(m.parent, m.key)
			}
			if len(ms) == 0 {
				return fmt.Errorf("remove %s: nothing matches", o.Path)
			}
		case "move", "copy":
			ms := expand(doc, split(o.From), nil)
			if len(ms) == 0 {
				return fmt.Errorf("%s %s: nothing matches %s", o.Op, o.Path, o.From)
			}
			for _, m := range ms {
				v, ok := m.parent[m.key]
				if !ok {
					return fmt.Errorf("%s: %s does not exist", o.Op, o.From)
				}
				dest := expand(doc, bind(split(o.Path), m.wild), nil)
				if len(dest) != 1 {
					return fmt.Errorf("%s %s: no single destination", o.Op, o.Path)
				}
				if o.Op == "move" {
					delete(m.parent, m.key)
				}
				dest[0].parent[dest[0].key] = v
			}
		}
	}
	return nil
}

// match is one place a pointer names: the member key of object parent.
type match struct {
	parent map[string]any
	key    string
	wild   []string // what each '*' stood for
}

func split(pointer string) []string {
	toks := strings.Split(pointer[1:], "/")
	for i, tok := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
	}
	return toks
}

func bind(toks, wild []string) []string {
	out := append([]string(nil), toks...)
	for i := range out {
		if out[i] == "*" && len(wild) > 0 {
			out[i], wild = wild[0], wild[1:]
		}
	}
	return out
}

// expand returns the places toks names in obj; the last member need not exist.
func expand(obj map[string]any, toks, wild []string) []match {
	keys := []string{toks[0]}
	if toks[0] == "*" {
		keys = nil
		for k := range obj {
			keys = append(keys, k)
		}
	}
	var out []match
	for _, k := range keys {
		w := wild
		if toks[0] == "*" {
			w = append(append([]string(nil), wild...), k)
		}
		if len(toks) == 1 {
			out = append(out, match{obj, k, w})
			continue
		}
		if child, ok := obj[k].(map[string]any); ok {
			out = append(out, expand(child, toks[1:], w)...)
		}
	}
	return out
}
