package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadTrustedRefuses: what cutover runs as root is read only from a regular root-owned
// file nobody else may write, of bounded size; a FIFO or a device is refused at once.
func TestReadTrustedRefuses(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.toml")
	if err := os.WriteFile(good, []byte("app = \"x\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadTrusted(good); err != nil {
		t.Fatalf("ReadTrusted(a 0600 file of ours) = %v", err)
	}
	mk := func(name string, mode os.FileMode, size int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Repeat("#", size)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, path, want string }{
		{"world-writable", mk("ww", 0o646, 10), "writable by group or others"},
		{"group-writable", mk("gw", 0o620, 10), "writable by group or others"},
		{"too large", mk("big", 0o600, MaxTrustedSize+1), "larger than"},
		{"a fifo", fifo, "not a regular file"},
		{"a device", "/dev/zero", "not a regular file"},
		{"a directory", dir, "not a regular file"},
	}
	if os.Geteuid() == 0 {
		other := mk("other", 0o600, 10)
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		tests = append(tests, struct{ name, path, want string }{"owned by nobody", other, "owned by uid 65534"})
	} else if os.Getenv("CI") == "true" {
		t.Error("CI runs as root: the ownership check must be tested")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() { _, err := ReadTrusted(tt.path); done <- err }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.path) {
					t.Errorf("ReadTrusted(%s) = %v, want an error naming it and %q", tt.path, err, tt.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("ReadTrusted(%s) still reads after 5 s", tt.path)
			}
		})
	}
	if _, err := Load(mk("cfg", 0o666, 10)); err == nil {
		t.Error("Load(a world-writable config) = nil, want a refusal")
	}
}
