package staging_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/nodes/sshdtest"
	"github.com/cutover/cutover/upgrade/staging"
	"github.com/cutover/cutover/upgrade/upgradetest"
)

// TestVerifyAgainstManifest places a tree on each kind of node and checks it against the
// manifest kept beside it: the placed tree passes; each alteration — other bytes behind the
// same size and time, a mode, an owner, an extra file, a missing file, a link's target — is
// found and named, and so is a manifest that is not one cutover wrote.
func TestVerifyAgainstManifest(t *testing.T) {
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
			if recorded, err := staging.Verify(ctx, tg.conn, tg.final); recorded || err != nil {
				t.Fatalf("Verify before staging = %v, %v; want no manifest, no error", recorded, err)
			}
			sent, err := staging.Send(ctx, tg.conn, tree, tg.final, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := staging.Place(ctx, tg.conn, tree, tg.final, sent); err != nil {
				t.Fatal(err)
			}
			manifest := staging.ManifestPath(tg.final)
			if fi, err := os.Lstat(manifest); err != nil || fi.Mode() != 0o644 {
				t.Fatalf("the manifest %s: %v, %v; want a file of mode 0644", manifest, fi, err)
			}
			if recorded, err := staging.Verify(ctx, tg.conn, tg.final); !recorded || err != nil {
				t.Fatalf("Verify of the placed tree = %v, %v; want recorded, no error", recorded, err)
			}
			if st, err := staging.Compare(ctx, tg.conn, tree, tg.final); st != staging.Same || err != nil {
				t.Fatalf("Compare of the placed tree = %v, %v; want Same", st, err)
			}
			p := func(name string) string { return filepath.Join(tg.final, name) }
			for _, tc := range []struct {
				name      string
				alter     func() error
				want      string
				undo      func() error
				compareOK bool // the tree still equals the source (Compare: Unrecorded)
			}{
				{name: "other bytes, same size and time", want: "share/doc/README has other contents (checksum)",
					alter: func() error { return rewriteKeepTime(p("share/doc/README"), "READ ME\n") },
					undo:  func() error { return rewriteKeepTime(p("share/doc/README"), "read me\n") }},
				{name: "mode", want: "etc/secret has mode -rw-r--r--, want -rw-------",
					alter: func() error { return os.Chmod(p("etc/secret"), 0o644) },
					undo:  func() error { return os.Chmod(p("etc/secret"), 0o600) }},
				{name: "owner", want: "usr/lib/libapp.so is owned by 65534:65534",
					alter: func() error { return os.Lchown(p("usr/lib/libapp.so"), 65534, 65534) },
					undo:  func() error { return chownLike(p("usr/lib/libapp.so"), p("usr/lib")) }},
				{name: "extra file", want: "usr/extra should not be there",
					alter: func() error { return os.WriteFile(p("usr/extra"), []byte("x"), 0o644) },
					undo:  func() error { return os.Remove(p("usr/extra")) }},
				{name: "missing file", want: "share/doc/deep/a/b/c/file is missing",
					alter: func() error { return os.Rename(p("share/doc/deep/a/b/c/file"), p("../moved")) },
					undo:  func() error { return os.Rename(p("../moved"), p("share/doc/deep/a/b/c/file")) }},
				{name: "link target", want: `usr/lib/app-link points to "/etc/shadow", want "../sbin/app"`,
					alter: func() error { return replaceLink(p("usr/lib/app-link"), "/etc/shadow", p("usr/lib")) },
					undo:  func() error { return replaceLink(p("usr/lib/app-link"), "../sbin/app", p("usr/lib")) }},
				{name: "manifest nested deep", want: "deeper than 128 levels", compareOK: true,
					alter: func() error { return swapManifest(manifest, strings.Repeat("[", 100000)) },
					undo:  func() error { return swapManifest(manifest, "") }},
				{name: "manifest with an unknown field", want: `unknown field "extra"`, compareOK: true,
					alter: func() error {
						return swapManifest(manifest, `{"format": 1, "mode": "0755", "extra": 1, "entries": []}`)
					},
					undo: func() error { return swapManifest(manifest, "") }},
				{name: "manifest a link", want: "is not a regular file", compareOK: true,
					alter: func() error { return swapManifestLink(manifest) },
					undo:  func() error { return swapManifest(manifest, "") }},
			} {
				if err := tc.alter(); err != nil {
					t.Fatal(err)
				}
				recorded, err := staging.Verify(ctx, tg.conn, tg.final)
				if !recorded || err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), tg.conn.Node()+": ") {
					t.Errorf("%s: Verify = %v, %v; want an error naming the node and %q", tc.name, recorded, err, tc.want)
				}
				st, err := staging.Compare(ctx, tg.conn, tree, tg.final)
				if want := staging.Differs; tc.compareOK && st != staging.Unrecorded || !tc.compareOK && st != want {
					t.Errorf("%s: Compare = %v, %v", tc.name, st, err)
				}
				if err := tc.undo(); err != nil {
					t.Fatal(err)
				}
				if recorded, err := staging.Verify(ctx, tg.conn, tg.final); !recorded || err != nil {
					t.Fatalf("%s undone: Verify = %v, %v; want no error", tc.name, recorded, err)
				}
			}
		})
	}
}

// rewriteKeepTime writes data to name and gives it back its modification time.
func rewriteKeepTime(name, data string) error {
	fi, err := os.Stat(name)
	if err != nil {
		return err
	}
	if err := os.WriteFile(name, []byte(data), fi.Mode()); err != nil {
		return err
	}
	return os.Chtimes(name, fi.ModTime(), fi.ModTime())
}

// chownLike gives name the owner of like.
func chownLike(name, like string) error {
	fi, err := os.Lstat(like)
	if err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	return os.Lchown(name, int(st.Uid), int(st.Gid))
}

// replaceLink points the link name at target, owned like the directory like.
func replaceLink(name, target, like string) error {
	if err := os.Remove(name); err != nil {
		return err
	}
	if err := os.Symlink(target, name); err != nil {
		return err
	}
	return chownLike(name, like)
}

// swapManifest replaces the manifest with data, keeping the original beside it; an empty
// data puts the original back.
func swapManifest(manifest, data string) error {
	saved := manifest + ".saved"
	if data == "" {
		return os.Rename(saved, manifest)
	}
	if err := os.Rename(manifest, saved); err != nil {
		return err
	}
	return os.WriteFile(manifest, []byte(data), 0o644)
}

func swapManifestLink(manifest string) error {
	if err := os.Rename(manifest, manifest+".saved"); err != nil {
		return err
	}
	return os.Symlink(manifest+".saved", manifest)
}

// TestFreshBaseDirectories stages into a base directory that does not exist yet, with the
// process's umask at 077: the directories made for it get mode 0755, as the package manager
// makes them, not the umask's 0700. (Not parallel: the umask is the process's.)
func TestFreshBaseDirectories(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	src := t.TempDir()
	writeTree(t, src)
	tree, err := staging.ReadTree(src)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	local := upgradetest.LocalConn(t)
	root := filepath.Join(t.TempDir(), "fresh")
	final := filepath.Join(root, "usr/lib/app/1.2.0")
	sent, err := staging.Send(ctx, local, tree, final, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := staging.Place(ctx, local, tree, final, sent); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{root, filepath.Join(root, "usr"), filepath.Join(root, "usr/lib"), filepath.Join(root, "usr/lib/app")} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v, %v; want mode 0755", d, fi.Mode(), err)
		}
	}
	if fi, err := os.Stat(final); err != nil || fi.Mode() != tree.Mode|os.ModeDir {
		t.Errorf("%s: %v, %v; want the tree's mode %v", final, fi.Mode(), err, tree.Mode)
	}
}

// TestLargeTreeListing stages a tree whose listing and checksums are each more than a
// command's read limit (4 MiB) over SSH: they stream or go in batches, and the tree is
// staged, placed and verified whole.
func TestLargeTreeListing(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	// 8,000 files with paths of about 610 bytes: over 5 MiB of listing and of checksums.
	long := strings.Repeat("n", 200)
	for i := range 8000 {
		dir := filepath.Join(src, fmt.Sprintf("d%02d%s", i/400, long), long)
		if i%400 == 0 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s%04d", long, i)), []byte{byte(i)}, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tree, err := staging.ReadTree(src)
	if err != nil {
		t.Fatal(err)
	}
	c := sshdtest.Start(t, 1)
	s := c.Servers[0]
	inv, err := nodes.NewInventory("master", []nodes.Node{{Name: "master"}, {Name: "node1", Address: s.Addr, Port: s.Port}})
	if err != nil {
		t.Fatal(err)
	}
	// Loaded test machines unpack thousands of files slowly.
	p, err := nodes.NewPool(inv, nodes.SSHConfig{User: c.User, IdentityFiles: []string{c.IdentityFile}, KnownHosts: []string{c.KnownHosts},
		ConnectTimeout: 10 * time.Second, CommandTimeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	conn, err := p.Conn(ctx, "node1")
	if err != nil {
		t.Fatal(err)
	}
	final := filepath.Join(c.UserDir(t), "1.2.0")
	if _, err := staging.Send(ctx, conn, tree, final, nil); err != nil {
		t.Fatal(err)
	}
	// A rerun lists and checksums everything the node holds, and sends nothing.
	sent, err := staging.Send(ctx, conn, tree, final, nil)
	if err != nil || sent.Bytes != 0 {
		t.Fatalf("rerun: sent %d, %v; want nothing", sent.Bytes, err)
	}
	if err := staging.Place(ctx, conn, tree, final, sent); err != nil {
		t.Fatal(err)
	}
	if recorded, err := staging.Verify(ctx, conn, final); !recorded || err != nil {
		t.Fatalf("Verify = %v, %v", recorded, err)
	}
	// The manifest follows the listing in the same stream.
	if st, err := staging.Compare(ctx, conn, tree, final); st != staging.Same || err != nil {
		t.Fatalf("Compare = %v, %v; want Same", st, err)
	}
	fi, err := os.Stat(staging.ManifestPath(final))
	if err != nil || fi.Size() < 4<<20 {
		t.Errorf("the manifest: %v, %v; want more than the read limit, read whole", fi, err)
	}
}
