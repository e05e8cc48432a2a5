package staging

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/cutover/cutover/nodes"
)

// fakeConn answers every command with fixed output.
type fakeConn struct{ out string }

func (fakeConn) Node() string { return "node1" }
func (f fakeConn) Run(ctx context.Context, argv ...string) (nodes.Result, error) {
	return nodes.Result{Stdout: []byte(f.out)}, nil
}
func (f fakeConn) RunInput(ctx context.Context, in io.Reader, argv ...string) (nodes.Result, error) {
	io.Copy(io.Discard, in)
	return f.Run(ctx, argv...)
}
func (f fakeConn) RunOutput(ctx context.Context, out io.Writer, argv ...string) (nodes.Result, error) {
	io.WriteString(out, f.out)
	return nodes.Result{}, nil
}

// TestSumsParse reads both hashers' output formats and refuses anything else.
func TestSumsParse(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name, out string
		want      map[string]string
	}{
		{"openssl", sum + " *./a b\n" + sum + " *./c\n", map[string]string{"a b": sum, "c": sum}},
		{"coreutils", sum + "  ./a b\x00" + sum + "  ./c\x00", map[string]string{"a b": sum, "c": sum}},
		{"empty", "", map[string]string{}},
		{"short sum", "abc *./a\n", nil},
		{"no dot slash", sum + " *a\n", nil},
		{"one space", sum + " ./a\n", nil},
		{"no name", sum + "\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sums(context.Background(), fakeConn{tc.out}, "/d", []string{"a"})
			if tc.want == nil {
				if err == nil {
					t.Fatalf("sums(%q) = %v, want an error", tc.out, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if !bytes.Equal([]byte(got[k]), []byte(v)) {
					t.Errorf("%q: %q, want %q", k, got[k], v)
				}
			}
		})
	}
}
