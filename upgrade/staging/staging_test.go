package staging_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/nodes/sshdtest"
	"github.com/cutover/cutover/upgrade/staging"
)

// writeTree makes a small version tree: nested directories, files of several modes and
// sizes, a link and an empty directory.
func writeTree(t *testing.T, dir string) {
	t.Helper()
	files := map[string]struct {
		data string
		mode os.FileMode
	}{
		"usr/sbin/app":              {strings.Repeat("binary ", 40000), 0o755},
		"usr/lib/libapp.so":         {strings.Repeat("lib ", 10000), 0o644},
		"etc/secret":                {"key\n", 0o600},
		"share/doc/README":          {"read me\n", 0o644},
		"share/doc/deep/a/b/c/file": {"deep\n", 0o640},
	}
	for name, f := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f.data), f.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../sbin/app", filepath.Join(dir, "usr/lib/app-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "var/empty"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// target is one node and a directory on it to stage into.
type target struct {
	name  string
	conn  *nodes.Conn
	final string
}

// targets returns the local master, an sshd node and an sshd node without SFTP, each with a
// final directory of its own that does not exist yet.
func targets(t *testing.T) []target {
	t.Helper()
	c := sshdtest.Start(t, 1)
	bare := sshdtest.Start(t, 1, sshdtest.WithoutSFTP())
	var out []target
	for _, cl := range []struct {
		name string
		c    *sshdtest.Cluster
	}{{"ssh", c}, {"ssh-without-sftp", bare}} {
		p := pool(t, cl.c)
		conn, err := p.Conn(context.Background(), "node1")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, target{cl.name, conn, filepath.Join(c.UserDir(t), "1.2.0")})
		if cl.name == "ssh" {
			local, err := p.Conn(context.Background(), "master")
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, target{"local", local, filepath.Join(t.TempDir(), "1.2.0")})
		}
	}
	return out
}

func pool(t *testing.T, c *sshdtest.Cluster) *nodes.Pool {
	t.Helper()
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
	t.Cleanup(func() { p.Close() })
	return p
}

// TestSendAndPlace stages a tree on each kind of node, interrupting the first copy halfway
// and damaging what the node holds: every rerun sends only what is missing or wrong, and the
// placed tree is exactly the source.
func TestSendAndPlace(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	writeTree(t, src)
	tree, err := staging.ReadTree(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()

			// Interrupted after the first file's bytes: the copy fails, nothing is in place.
			cut, cancel := context.WithCancel(ctx)
			_, err := staging.Send(cut, tg.conn, tree, tg.final, func(int64) { cancel() })
			cancel()
			if err == nil {
				t.Fatal("Send interrupted halfway: err = nil")
			}
			if _, err := os.Lstat(tg.final); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the final directory exists after an interrupted copy: %v", err)
			}

			// The rerun finishes, sending no more than everything.
			sent, err := staging.Send(ctx, tg.conn, tree, tg.final, nil)
			if err != nil {
				t.Fatal(err)
			}
			if sent.Bytes > tree.Bytes {
				t.Errorf("the rerun sent %d bytes, more than the tree's %d", sent.Bytes, tree.Bytes)
			}

			// A third run sends nothing.
			if sent, err = staging.Send(ctx, tg.conn, tree, tg.final, nil); err != nil || sent.Bytes != 0 {
				t.Errorf("Send of a complete copy sent %d bytes (err %v), want 0", sent.Bytes, err)
			}

			// Damage what the node holds: a changed file, an extra file, a mode, a file
			// where a directory belongs. The rerun repairs exactly that.
			tmp := staging.TempDir(tg.final)
			damage := []func() error{
				func() error { return os.WriteFile(filepath.Join(tmp, "share/doc/README"), []byte("changed\n"), 0o644) },
				func() error { return os.WriteFile(filepath.Join(tmp, "usr/extra"), []byte("x"), 0o644) },
				func() error { return os.Chmod(filepath.Join(tmp, "etc/secret"), 0o644) },
				func() error { return os.Remove(filepath.Join(tmp, "var/empty")) },
				func() error { return os.WriteFile(filepath.Join(tmp, "var/empty"), nil, 0o644) },
				// Other contents behind the same size, time and mode: a rerun does not
				// trust a file by its looks.
				func() error {
					p := filepath.Join(tmp, "share/doc/deep/a/b/c/file")
					fi, err := os.Stat(p)
					if err == nil {
						err = os.WriteFile(p, []byte("DEEP\n"), 0o640)
					}
					if err == nil {
						err = os.Chtimes(p, fi.ModTime(), fi.ModTime())
					}
					return err
				},
			}
			for _, d := range damage {
				if err := d(); err != nil {
					t.Fatal(err)
				}
			}
			if sent, err = staging.Send(ctx, tg.conn, tree, tg.final, nil); err != nil {
				t.Fatal(err)
			}
			if want := int64(len("read me\n") + len("key\n") + len("deep\n")); sent.Bytes != want {
				t.Errorf("the repair sent %d bytes, want %d (the changed files and the file whose mode changed)", sent.Bytes, want)
			}

			if ok, err := staging.Installed(ctx, tg.conn, tree, tg.final); ok || err != nil {
				t.Errorf("Installed before Place = %v, %v; want false, nil", ok, err)
			}
			if err := staging.Place(ctx, tg.conn, tree, tg.final, sent); err != nil {
				t.Fatal(err)
			}
			if ok, err := staging.Installed(ctx, tg.conn, tree, tg.final); !ok || err != nil {
				t.Errorf("Installed after Place = %v, %v; want true", ok, err)
			}
			got, err := staging.ReadTree(tg.final)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(tree) {
				t.Errorf("the placed tree differs from the source:\n got %s\nwant %s", describe(got), describe(tree))
			}
			if _, err := os.Lstat(tmp); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the temporary directory is still there: %v", err)
			}
			if err := staging.Place(ctx, tg.conn, tree, tg.final, sent); err == nil {
				t.Error("Place over an existing version: err = nil")
			}
			if err := os.WriteFile(filepath.Join(tg.final, "usr/lib/libapp.so"), []byte("other"), 0o644); err != nil {
				t.Fatal(err)
			}
			if ok, err := staging.Installed(ctx, tg.conn, tree, tg.final); ok || err == nil || !strings.Contains(err.Error(), "usr/lib/libapp.so has other contents") {
				t.Errorf("Installed of a changed tree = %v, %v; want an error naming the file", ok, err)
			}
		})
	}
}

func describe(t *staging.Tree) string {
	var b strings.Builder
	fmt.Fprintf(&b, "root %v;", t.Mode)
	for _, e := range t.Entries {
		fmt.Fprintf(&b, " %s %c %v %s%s;", e.Name, e.Kind, e.Mode, e.Sum, e.Target)
	}
	return b.String()
}

// TestNodeKilledMidTransfer kills the node's sshd, with its sessions, while a large tree is
// on its way: the copy fails naming the node, nothing is in place, and once the node is back
// a rerun finishes the copy without sending again what had arrived.
func TestNodeKilledMidTransfer(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	for i := range 40 {
		p := filepath.Join(src, fmt.Sprintf("lib/part%02d", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.Repeat(fmt.Sprintf("%02d", i), 256<<10)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tree, err := staging.ReadTree(src)
	if err != nil {
		t.Fatal(err)
	}
	c := sshdtest.Start(t, 1)
	p := pool(t, c)
	final := filepath.Join(c.UserDir(t), "2.0.0")
	ctx := context.Background()
	conn, err := p.Conn(ctx, "node1")
	if err != nil {
		t.Fatal(err)
	}
	var seen int64
	killed := false
	_, err = staging.Send(ctx, conn, tree, final, func(n int64) {
		seen += n
		if !killed && seen >= tree.Bytes/2 {
			killed = true
			c.Servers[0].Kill(t)
		}
	})
	if err == nil || !strings.HasPrefix(err.Error(), "node1: ") {
		t.Fatalf("Send to a node killed halfway: err = %v, want an error naming node1", err)
	}
	if _, err := os.Lstat(final); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the final directory exists after a cut-off copy: %v", err)
	}
	c.Servers[0].Restart(t)
	conn, err = p.Conn(ctx, "node1")
	if err != nil {
		t.Fatal(err)
	}
	sent, err := staging.Send(ctx, conn, tree, final, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sent.Bytes >= tree.Bytes {
		t.Errorf("the rerun sent %d of %d bytes: it sent again what had arrived", sent.Bytes, tree.Bytes)
	}
	if err := staging.Place(ctx, conn, tree, final, sent); err != nil {
		t.Fatal(err)
	}
	got, err := staging.ReadTree(final)
	if err != nil || !got.Equal(tree) {
		t.Fatalf("the placed tree differs from the source (err %v)", err)
	}
	t.Logf("first copy cut off after %d of %d bytes; the rerun sent %d", seen, tree.Bytes, sent.Bytes)
}
