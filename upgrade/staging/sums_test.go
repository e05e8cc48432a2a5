package staging_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cutover/cutover/nodes/sshdtest"
	"github.com/cutover/cutover/upgrade/staging"
)

// TestSums hashes files on a real sshd node with each hasher the node may use: every sum is
// the file's SHA-256, names with spaces, stars and backslashes included, and a missing file
// is an error.
func TestSums(t *testing.T) {
	c := sshdtest.Start(t, 1)
	conn, err := pool(t, c).Conn(context.Background(), "node1")
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
			got, err := staging.Sums(context.Background(), conn, dir, names, h)
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
			if _, err := staging.Sums(context.Background(), conn, dir, []string{"plain", "missing"}, h); err == nil {
				t.Error("sums of a missing file: err = nil")
			}
		})
	}
}

// TestSumsScriptHasher runs the node's hashing script where openssl works (it must hash
// with it: OpenSSL's "SUM *NAME" lines) and where an `openssl` on PATH fails (a broken or
// restricted build: it must hash with sha256sum, whose records end in NUL). Both sums are
// right.
func TestSumsScriptHasher(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "plain"), []byte("contents\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("contents\n"))
	hexSum := hex.EncodeToString(sum[:])
	broken := t.TempDir()
	if err := os.WriteFile(filepath.Join(broken, "openssl"), []byte("#!/bin/sh\necho 'not a digest'\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(path string) string {
		cmd := exec.Command("sh", "-c", staging.SumsScript, "cutover-stage", dir, "")
		cmd.Env = []string{"PATH=" + path}
		cmd.Stdin = strings.NewReader("./plain\x00")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("PATH=%s: %v", path, err)
		}
		return string(out)
	}
	if got, want := run(broken+":/usr/bin:/bin"), hexSum+"  ./plain\x00"; got != want {
		t.Errorf("with a failing openssl: output %q, want sha256sum's %q", got, want)
	}
	if _, err := exec.LookPath("openssl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("openssl is not installed (run test/setup.sh): %v", err)
		}
		t.Skipf("openssl is not installed (run test/setup.sh): %v", err)
	}
	if got, want := run("/usr/bin:/bin"), hexSum+" *./plain\n"; got != want {
		t.Errorf("with openssl: output %q, want OpenSSL's %q", got, want)
	}
}
