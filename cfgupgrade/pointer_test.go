package cfgupgrade

import (
	"slices"
	"testing"
)

func TestParsePointer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{"", nil, ""},
		{"/", []string{""}, ""},
		{"/version", []string{"version"}, ""},
		{"/nodes/*/ip", []string{"nodes", "*", "ip"}, ""},
		{"/a~1b/m~0n", []string{"a/b", "m~n"}, ""},
		{"/~01", []string{"~1"}, ""},
		{"/list/-", []string{"list", "-"}, ""},
		{"version", nil, `does not start with "/"`},
		{"/a~", nil, `"~" must be followed by 0 or 1`},
		{"/a~2", nil, `"~" must be followed by 0 or 1`},
	}
	for _, tt := range tests {
		got, err := parsePointer(tt.in)
		if !errorMatches(err, tt.wantErr) || !slices.Equal(got, tt.want) {
			t.Errorf("parsePointer(%q) = %q, %v; want %q, error containing %q", tt.in, got, err, tt.want, tt.wantErr)
			continue
		}
		if err == nil {
			if back := formatPointer(got); back != tt.in {
				t.Errorf("formatPointer(%q) = %q, want %q", got, back, tt.in)
			}
		}
	}
}

func TestExpand(t *testing.T) {
	t.Parallel()
	doc := mustDecode(t, `{"nodes": {"b": {"ip": 1}, "a": {"ip": 2}, "c": {}}, "list": [{"x": 1}, {"x": 2}], "n": 3}`)
	tests := []struct {
		pattern string
		strict  bool
		want    []string
		wantErr string
	}{
		{"/nodes/*/ip", false, []string{"/nodes/a/ip", "/nodes/b/ip"}, ""},
		{"/nodes/*/ip", true, nil, "parent /nodes/c/ip does not exist"},
		{"/nodes/*", true, []string{"/nodes/a", "/nodes/b", "/nodes/c"}, ""},
		{"/list/*/x", true, []string{"/list/0/x", "/list/1/x"}, ""},
		{"/*", true, []string{"/list", "/n", "/nodes"}, ""},
		{"/missing/*", false, nil, ""},
		{"/n/*", false, nil, "/n is the number 3, not an object or array"},
		{"/list/x", false, nil, `/list is an array and "x" is not an index`},
		{"/list/01", false, nil, `"01" is not an index`},
		{"/list/5", false, nil, ""},
		{"", true, []string{""}, ""},
	}
	for _, tt := range tests {
		segs, _ := parsePointer(tt.pattern)
		ms, err := expand(doc, segs, tt.strict)
		var got []string
		for _, m := range ms {
			got = append(got, formatPointer(m.segs))
		}
		if !errorMatches(err, tt.wantErr) || !slices.Equal(got, tt.want) {
			t.Errorf("expand(%q, strict %v) = %q, %v; want %q, error containing %q", tt.pattern, tt.strict, got, err, tt.want, tt.wantErr)
		}
	}
}

func mustDecode(t *testing.T, s string) any {
	t.Helper()
	v, err := decodeJSON([]byte(s))
	if err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return v
}
