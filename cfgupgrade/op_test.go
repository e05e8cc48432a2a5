package cfgupgrade

import (
	"encoding/json"
	"strings"
	"testing"
)

// opsDoc is the document every case of TestOps starts from.
const opsDoc = `{
  "version": "1.0.0",
  "cluster": {"name": "demo", "master_ip": "10.0.0.10"},
  "nodes": {
    "n1": {"ip": "10.0.0.11", "tags": ["a"]},
    "n2": {"ip": "10.0.0.12", "tags": []},
    "n3": {"tags": ["b", "c"]}
  },
  "list": [{"x": 1}, {"x": 2}, {"x": 3}],
  "empty": {},
  "big": 12345678901234567890.000,
  "a/b": 1, "m~n": 2
}`

func TestOps(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		ops     string
		want    string // the expected document, as a patch on opsDoc: ops applied by hand
		wantErr string
	}{
		{name: "set new member",
			ops:  `[{"op": "set", "path": "/queue", "value": {"workers": 2}}]`,
			want: `[{"op": "set", "path": "/queue", "value": {"workers": 2}}]`},
		{name: "set replaces",
			ops:  `[{"op": "set", "path": "/cluster/name", "value": "prod"}]`,
			want: `[{"op": "set", "path": "/cluster/name", "value": "prod"}]`},
		{name: "set if_absent keeps an existing value",
			ops:  `[{"op": "set", "path": "/cluster/name", "value": "prod", "if_absent": true}]`,
			want: `[]`},
		{name: "set if_absent sets an absent value",
			ops:  `[{"op": "set", "path": "/cluster/port", "value": 1811, "if_absent": true}]`,
			want: `[{"op": "set", "path": "/cluster/port", "value": 1811}]`},
		{name: "set null",
			ops:  `[{"op": "set", "path": "/cluster/name", "value": null}]`,
			want: `[{"op": "set", "path": "/cluster/name", "value": null}]`},
		{name: "set keeps numbers exact",
			ops:  `[{"op": "set", "path": "/huge", "value": 98765432109876543210.50}]`,
			want: `[{"op": "set", "path": "/huge", "value": 98765432109876543210.50}]`},
		{name: "set with a missing parent",
			ops:     `[{"op": "set", "path": "/queue/workers", "value": 2}]`,
			wantErr: "set /queue/workers: parent /queue does not exist"},
		{name: "set below a scalar",
			ops:     `[{"op": "set", "path": "/cluster/name/x", "value": 2}]`,
			wantErr: `/cluster/name is the string "demo", not an object or array`},
		{name: "set wildcard in every node",
			ops: `[{"op": "set", "path": "/nodes/*/vcpus", "value": 4}]`,
			want: `[{"op": "set", "path": "/nodes/n1/vcpus", "value": 4}, {"op": "set", "path": "/nodes/n2/vcpus", "value": 4},
				{"op": "set", "path": "/nodes/n3/vcpus", "value": 4}]`},
		{name: "set wildcard values are independent",
			ops: `[{"op": "set", "path": "/nodes/*/labels", "value": {"zone": "a"}}, {"op": "set", "path": "/nodes/n1/labels/zone", "value": "b"}]`,
			want: `[{"op": "set", "path": "/nodes/n1/labels", "value": {"zone": "b"}}, {"op": "set", "path": "/nodes/n2/labels", "value": {"zone": "a"}},
				{"op": "set", "path": "/nodes/n3/labels", "value": {"zone": "a"}}]`},
		{name: "set wildcard over array elements",
			ops: `[{"op": "set", "path": "/list/*/y", "value": true}]`,
			want: `[{"op": "set", "path": "/list/0/y", "value": true}, {"op": "set", "path": "/list/1/y", "value": true},
				{"op": "set", "path": "/list/2/y", "value": true}]`},
		{name: "set wildcard over an empty object does nothing",
			ops:  `[{"op": "set", "path": "/empty/*/y", "value": 1}]`,
			want: `[]`},
		{name: "set wildcard with a missing parent in one match",
			ops:     `[{"op": "set", "path": "/nodes/*/disk/size", "value": 1}]`,
			wantErr: "parent /nodes/n1/disk does not exist"},
		{name: "set wildcard appends to every array",
			ops: `[{"op": "set", "path": "/nodes/*/tags/-", "value": "new"}]`,
			want: `[{"op": "set", "path": "/nodes/n1/tags", "value": ["a", "new"]}, {"op": "set", "path": "/nodes/n2/tags", "value": ["new"]},
				{"op": "set", "path": "/nodes/n3/tags", "value": ["b", "c", "new"]}]`},
		{name: "set array index replaces",
			ops:  `[{"op": "set", "path": "/list/1", "value": 9}]`,
			want: `[{"op": "set", "path": "/list", "value": [{"x": 1}, 9, {"x": 3}]}]`},
		{name: "set array index if_absent keeps",
			ops:  `[{"op": "set", "path": "/list/1", "value": 9, "if_absent": true}]`,
			want: `[]`},
		{name: "set array length appends",
			ops:  `[{"op": "set", "path": "/list/3", "value": 9}]`,
			want: `[{"op": "set", "path": "/list", "value": [{"x": 1}, {"x": 2}, {"x": 3}, 9]}]`},
		{name: "set array past the end",
			ops:     `[{"op": "set", "path": "/list/5", "value": 9}]`,
			wantErr: "index 5 is past the end of the array (length 3)"},
		{name: "set escaped keys",
			ops:  `[{"op": "set", "path": "/a~1b", "value": 10}, {"op": "set", "path": "/m~0n", "value": 20}]`,
			want: `[{"op": "set", "path": "/a~1b", "value": 10}, {"op": "set", "path": "/m~0n", "value": 20}]`},

		{name: "remove member",
			ops:  `[{"op": "remove", "path": "/cluster/master_ip"}]`,
			want: `[{"op": "remove", "path": "/cluster/master_ip"}]`},
		{name: "remove missing member does nothing",
			ops:  `[{"op": "remove", "path": "/cluster/nothing"}]`,
			want: `[]`},
		{name: "remove below a missing parent does nothing",
			ops:  `[{"op": "remove", "path": "/queue/workers"}]`,
			want: `[]`},
		{name: "remove below a scalar",
			ops:     `[{"op": "remove", "path": "/big/x"}]`,
			wantErr: "/big is the number 12345678901234567890.000, not an object or array"},
		{name: "remove wildcard in every node",
			ops:  `[{"op": "remove", "path": "/nodes/*/ip"}]`,
			want: `[{"op": "remove", "path": "/nodes/n1/ip"}, {"op": "remove", "path": "/nodes/n2/ip"}]`},
		{name: "remove every member",
			ops:  `[{"op": "remove", "path": "/nodes/*"}]`,
			want: `[{"op": "set", "path": "/nodes", "value": {}}]`},
		{name: "remove every array element",
			ops:  `[{"op": "remove", "path": "/nodes/*/tags/*"}]`,
			want: `[{"op": "set", "path": "/nodes/n1/tags", "value": []}, {"op": "set", "path": "/nodes/n3/tags", "value": []}]`},
		{name: "remove array element",
			ops:  `[{"op": "remove", "path": "/list/0"}]`,
			want: `[{"op": "set", "path": "/list", "value": [{"x": 2}, {"x": 3}]}]`},
		{name: "remove inside an array element",
			ops:  `[{"op": "remove", "path": "/list/1/x"}]`,
			want: `[{"op": "set", "path": "/list/1", "value": {}}]`},
		{name: "remove inside a missing array element does nothing",
			ops:  `[{"op": "remove", "path": "/list/9/x"}]`,
			want: `[]`},
		{name: "remove with a bad array index",
			ops:     `[{"op": "remove", "path": "/list/first/x"}]`,
			wantErr: `/list is an array and "first" is not an index`},
		{name: "remove array element past the end does nothing",
			ops:  `[{"op": "remove", "path": "/list/7"}]`,
			want: `[]`},

		{name: "move renames",
			ops:  `[{"op": "move", "from": "/cluster/master_ip", "path": "/cluster/master_address"}]`,
			want: `[{"op": "remove", "path": "/cluster/master_ip"}, {"op": "set", "path": "/cluster/master_address", "value": "10.0.0.10"}]`},
		{name: "move wildcard renames in every node",
			ops: `[{"op": "move", "from": "/nodes/*/ip", "path": "/nodes/*/address"}]`,
			want: `[{"op": "remove", "path": "/nodes/*/ip"}, {"op": "set", "path": "/nodes/n1/address", "value": "10.0.0.11"},
				{"op": "set", "path": "/nodes/n2/address", "value": "10.0.0.12"}]`},
		{name: "move wildcard to another object",
			ops:  `[{"op": "set", "path": "/addresses", "value": {}}, {"op": "move", "from": "/nodes/*/ip", "path": "/addresses/*"}]`,
			want: `[{"op": "remove", "path": "/nodes/*/ip"}, {"op": "set", "path": "/addresses", "value": {"n1": "10.0.0.11", "n2": "10.0.0.12"}}]`},
		{name: "move every array element",
			ops:  `[{"op": "set", "path": "/other", "value": []}, {"op": "move", "from": "/list/*", "path": "/other/*"}]`,
			want: `[{"op": "set", "path": "/list", "value": []}, {"op": "set", "path": "/other", "value": [{"x": 1}, {"x": 2}, {"x": 3}]}]`},
		{name: "move a missing member does nothing",
			ops:  `[{"op": "move", "from": "/cluster/nothing", "path": "/cluster/something"}]`,
			want: `[]`},
		{name: "move onto itself does nothing",
			ops:  `[{"op": "move", "from": "/cluster/name", "path": "/cluster/name"}]`,
			want: `[]`},
		{name: "move to an ancestor",
			ops:  `[{"op": "move", "from": "/cluster/name", "path": "/cluster"}]`,
			want: `[{"op": "set", "path": "/cluster", "value": "demo"}]`},
		{name: "move replaces the target",
			ops:  `[{"op": "move", "from": "/cluster/name", "path": "/cluster/master_ip"}]`,
			want: `[{"op": "remove", "path": "/cluster/name"}, {"op": "set", "path": "/cluster/master_ip", "value": "demo"}]`},
		{name: "move into its own child",
			ops:     `[{"op": "move", "from": "/nodes/*", "path": "/nodes/*/self"}]`,
			wantErr: `up[0]: cannot move "/nodes/*" into itself ("/nodes/*/self")`},
		{name: "move into its own child through wildcards",
			ops:     `[{"op": "move", "from": "/nodes/*", "path": "/nodes/n1/*"}]`,
			wantErr: "up[0]: move /nodes/* to /nodes/n1/*: cannot move /nodes/n1 into itself (/nodes/n1/n1)"},
		{name: "move to a missing parent",
			ops:     `[{"op": "move", "from": "/cluster/name", "path": "/meta/name"}]`,
			wantErr: "move /cluster/name to /meta/name: parent /meta does not exist"},

		{name: "copy",
			ops:  `[{"op": "copy", "from": "/cluster/name", "path": "/cluster/display_name"}]`,
			want: `[{"op": "set", "path": "/cluster/display_name", "value": "demo"}]`},
		{name: "copy wildcard in every node",
			ops: `[{"op": "copy", "from": "/nodes/*/tags", "path": "/nodes/*/old_tags"}]`,
			want: `[{"op": "set", "path": "/nodes/n1/old_tags", "value": ["a"]}, {"op": "set", "path": "/nodes/n2/old_tags", "value": []},
				{"op": "set", "path": "/nodes/n3/old_tags", "value": ["b", "c"]}]`},
		{name: "copy is a deep copy",
			ops:  `[{"op": "copy", "from": "/list/0", "path": "/first"}, {"op": "set", "path": "/first/x", "value": 100}]`,
			want: `[{"op": "set", "path": "/first", "value": {"x": 100}}]`},
		{name: "copy into its own child",
			ops:  `[{"op": "copy", "from": "/cluster", "path": "/cluster/backup"}]`,
			want: `[{"op": "set", "path": "/cluster/backup", "value": {"name": "demo", "master_ip": "10.0.0.10"}}]`},
		{name: "copy if_absent keeps the target",
			ops:  `[{"op": "copy", "from": "/cluster/name", "path": "/cluster/master_ip", "if_absent": true}]`,
			want: `[]`},
		{name: "copy a missing member does nothing",
			ops:  `[{"op": "copy", "from": "/nodes/*/address", "path": "/nodes/*/ip"}]`,
			want: `[]`},
		{name: "copy through a scalar",
			ops:     `[{"op": "copy", "from": "/big/*", "path": "/x/*"}]`,
			wantErr: "/big is the number",
		},

		{name: "ops apply in order",
			ops:  `[{"op": "set", "path": "/q", "value": {}}, {"op": "set", "path": "/q/w", "value": 1}, {"op": "move", "from": "/q/w", "path": "/q/v"}]`,
			want: `[{"op": "set", "path": "/q", "value": {"v": 1}}]`},
		{name: "a bad op is named by its index",
			ops:     `[{"op": "remove", "path": "/a"}, {"op": "set", "path": "/b"}]`,
			wantErr: "up[1]: set needs a value"},
		{name: "a failing op is named by its index",
			ops:     `[{"op": "remove", "path": "/a"}, {"op": "set", "path": "/x/y", "value": 1}]`,
			wantErr: "up[1]: set /x/y: parent /x does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := applyOps(mustDecode(t, opsDoc), mustOps(t, tt.ops), "up", &budget{left: 1000})
			if !errorMatches(err, tt.wantErr) {
				t.Fatalf("applyOps(%s) error = %v, want error containing %q", tt.ops, err, tt.wantErr)
			}
			if tt.wantErr != "" {
				return
			}
			want := patchByHand(t, mustDecode(t, opsDoc), tt.want)
			if g, w := canonical(t, got), canonical(t, want); g != w {
				t.Errorf("applyOps(%s) =\n%s\nwant\n%s", tt.ops, mustEncode(t, got), mustEncode(t, want))
			}
		})
	}
}

// patchByHand applies concrete set and remove ops (a wildcard only as the
// last segment of a remove of object members), so that expected documents
// are written as small edits of opsDoc rather than whole documents.
func patchByHand(t *testing.T, doc any, ops string) any {
	t.Helper()
	for _, op := range mustOps(t, ops) {
		segs, err := parsePointer(op.Path)
		if err != nil {
			t.Fatal(err)
		}
		switch op.Op {
		case opSet:
			v := mustDecode(t, string(op.Value))
			if doc, err = setAt(doc, segs, v, false); err != nil {
				t.Fatal(err)
			}
		case opRemove:
			ms, err := expand(doc, segs, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				if doc, err = removeAt(doc, m.segs); err != nil {
					t.Fatal(err)
				}
			}
		default:
			t.Fatalf("patchByHand: op %q", op.Op)
		}
	}
	return doc
}

func mustOps(t *testing.T, s string) []Op {
	t.Helper()
	var ops []Op
	if err := json.Unmarshal([]byte(s), &ops); err != nil {
		t.Fatalf("decode ops %s: %v", s, err)
	}
	return ops
}

func mustEncode(t *testing.T, v any) string {
	t.Helper()
	b, err := encodeJSON(v)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return string(b)
}

// TestOpsGrowthIsBounded checks that ops that double the document are
// refused before they exhaust memory.
func TestOpsGrowthIsBounded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		op     string
		n      int
		budget *budget // nil: newBudget
	}{
		{"copy into itself", `{"op": "copy", "from": "/a", "path": "/a/-"}`, 40, nil},
		{"set a large value", `{"op": "set", "path": "/a/-", "value": [1, 2, 3, [4, 5]]}`, 200, &budget{left: 1000}},
	}
	for _, tt := range tests {
		ops := "[" + strings.Repeat(tt.op+",", tt.n) + `{"op": "remove", "path": "/x"}]`
		doc := mustDecode(t, `{"a": [1]}`)
		b := tt.budget
		if b == nil {
			b = newBudget(doc)
		}
		_, err := applyOps(doc, mustOps(t, ops), "up", b)
		if !errorMatches(err, "the migration makes the config too large") {
			t.Errorf("%s: applyOps error = %v, want the growth refused", tt.name, err)
		}
	}
}
