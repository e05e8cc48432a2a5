package staging

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/nodes/sshdtest"
)

// TestSums hashes files on a real sshd node with each hasher the node may use: every sum is
// the file's SHA-256, names with spaces, stars and backslashes included.
func TestSums(t *testing.T) {
	c := sshdtest.Start(t, 1)
	s := c.Servers[0]
	inv, err := nodes.NewInventory("master", []nodes.Node{{Name: "master"}, {Name: "node1", Address: s.Addr, Port: s.Port}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := nodes.NewPool(inv, nodes.SSHConfig{User: c.User, IdentityFiles: []string{c.IdentityFile}, KnownHosts: []string{c.KnownHosts},
		ConnectTimeout: 5 * time.Second, CommandTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	conn, err := p.Conn(context.Background(), "node1")
	if err != nil {
		t.Fatal(err)
	}
	dir := c.UserDir(t)
	files := map[string]string{
		"plain":            "contents\n",
		"with space":       "",
		"star*and\\slash":  strings.Repeat("x", 100_000),
		"sub/dir/-leading": "dash\n",
	}
	want := map[string]string{}
	var names []string
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(body))
		want[name] = hex.EncodeToString(sum[:])
		names = append(names, name)
	}
	for _, h := range []string{"", "coreutils"} {
		t.Run("hasher="+h, func(t *testing.T) {
			defer func(old string) { hasher = old }(hasher)
			hasher = h
			got, err := sums(context.Background(), conn, dir, names)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Errorf("got %d sums, want %d: %v", len(got), len(want), got)
			}
			for name, sum := range want {
				if got[name] != sum {
					t.Errorf("%q: sum %q, want %q", name, got[name], sum)
				}
			}
			if _, err := sums(context.Background(), conn, dir, []string{"plain", "missing"}); err == nil {
				t.Error("sums of a missing file: err = nil")
			}
		})
	}
}

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

// TestSumsScriptWithoutAWorkingOpenSSL runs the node's script where `openssl` fails (a broken
// or restricted build): it hashes with sha256sum instead, and the sums are right.
func TestSumsScriptWithoutAWorkingOpenSSL(t *testing.T) {
	bin, dir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "openssl"), []byte("#!/bin/sh\necho 'not a digest'\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plain"), []byte("contents\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", sumsScript, "cutover-stage", dir, "")
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin"}
	cmd.Stdin = strings.NewReader("./plain\x00")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("contents\n"))
	if want := hex.EncodeToString(sum[:]) + "  ./plain\x00"; string(out) != want {
		t.Errorf("output %q, want sha256sum's %q", out, want)
	}
}
