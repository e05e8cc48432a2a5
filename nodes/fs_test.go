package nodes_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/nodes/sshdtest"
)

// fsTarget is a connection and a directory it may write to. Both transports
// reach this machine, so the test checks results with the os package.
type fsTarget struct {
	name string
	conn *nodes.Conn
}

// fsTargets returns a local target, an SSH target and an SSH target whose
// sshd has no SFTP subsystem (file operations over commands), each with a
// fresh directory for every call of dir.
func fsTargets(t *testing.T) (targets []fsTarget, cluster *sshdtest.Cluster) {
	t.Helper()
	c := sshdtest.Start(t, 1)
	p := newPool(t, c, nil)
	bare := sshdtest.Start(t, 1, sshdtest.WithoutSFTP())
	pb := newPool(t, bare, nil)
	return []fsTarget{
		{name: "local", conn: conn(t, p, localMaster)},
		{name: "ssh", conn: conn(t, p, "node1")},
		{name: "ssh-without-sftp", conn: conn(t, pb, "node1")},
	}, c
}

// newDir returns a new directory the target's login may write to.
func (ft fsTarget) newDir(t *testing.T, c *sshdtest.Cluster) string {
	t.Helper()
	if ft.conn.Local() {
		return t.TempDir()
	}
	return c.UserDir(t)
}

func TestFileOperations(t *testing.T) {
	t.Parallel()
	targets, cluster := fsTargets(t)
	for _, ft := range targets {
		t.Run(ft.name, func(t *testing.T) {
			t.Parallel()
			c := ft.conn
			dir := ft.newDir(t, cluster)
			file := filepath.Join(dir, "config.json")

			// WriteFileAtomic creates with exactly the mode asked for.
			if err := c.WriteFileAtomic(file, []byte("one"), 0o640); err != nil {
				t.Fatal(err)
			}
			assertFile(t, file, "one", 0o640)
			// and replaces contents and mode, leaving no temporary file.
			if err := c.WriteFileAtomic(file, []byte("two\n"), 0o604); err != nil {
				t.Fatal(err)
			}
			assertFile(t, file, "two\n", 0o604)
			data, err := c.ReadFile(file)
			if err != nil || string(data) != "two\n" {
				t.Errorf("ReadFile = %q, %v; want %q", data, err, "two\n")
			}

			// Symlink, Readlink, Lstat and Stat.
			link := filepath.Join(dir, "current")
			if err := c.Symlink("config.json", link); err != nil {
				t.Fatal(err)
			}
			if target, err := c.Readlink(link); err != nil || target != "config.json" {
				t.Errorf("Readlink = %q, %v; want config.json", target, err)
			}
			if fi, err := c.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
				t.Errorf("Lstat(link) = %v, %v; want a symlink", fi, err)
			}
			if fi, err := c.Stat(link); err != nil || !fi.Mode().IsRegular() || fi.Size() != 4 {
				t.Errorf("Stat(link) = %v, %v; want the 4-byte regular file", fi, err)
			}
			if err := c.Symlink("other", link); err == nil {
				t.Error("Symlink over an existing name: err = nil, want an error")
			}

			// MkdirAll creates parents with the mode asked for and accepts
			// an existing directory.
			deep := filepath.Join(dir, "a", "b", "c")
			if err := c.MkdirAll(deep, 0o750); err != nil {
				t.Fatal(err)
			}
			for _, d := range []string{filepath.Join(dir, "a"), deep} {
				if fi, err := os.Stat(d); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o750 {
					t.Errorf("after MkdirAll: %s = %v, %v; want a 0750 directory", d, fi, err)
				}
			}
			if err := c.MkdirAll(deep, 0o700); err != nil {
				t.Errorf("MkdirAll of an existing directory: %v", err)
			}
			if err := c.MkdirAll(filepath.Join(file, "sub"), 0o755); err == nil {
				t.Error("MkdirAll below a file: err = nil, want an error")
			}

			// Chmod.
			if err := c.Chmod(file, 0o600); err != nil {
				t.Fatal(err)
			}
			assertFile(t, file, "two\n", 0o600)

			// ReadDir lists entries sorted, links as links.
			infos, err := c.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, fi := range infos {
				names = append(names, fi.Name())
			}
			if want := []string{"a", "config.json", "current"}; !reflect.DeepEqual(names, want) {
				t.Errorf("ReadDir names = %v, want %v (no temporary files)", names, want)
			}
			if len(infos) == 3 && (!infos[0].IsDir() || infos[2].Mode()&fs.ModeSymlink == 0) {
				t.Errorf("ReadDir modes: a=%v current=%v, want a directory and a symlink", infos[0].Mode(), infos[2].Mode())
			}

			// Remove takes files, links and empty directories only.
			if err := c.Remove(filepath.Join(dir, "a")); err == nil {
				t.Error("Remove of a non-empty directory: err = nil, want an error")
			}
			for _, name := range []string{link, deep, file} {
				if err := c.Remove(name); err != nil {
					t.Errorf("Remove(%s): %v", name, err)
				}
				if _, err := os.Lstat(name); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("after Remove(%s): Lstat err = %v, want not exist", name, err)
				}
			}
		})
	}
}

// assertFile checks a file's contents and permission bits on this machine.
func assertFile(t *testing.T, file, contents string, perm fs.FileMode) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != contents {
		t.Errorf("%s holds %q, want %q", file, data, contents)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != perm {
		t.Errorf("%s has mode %v, want %v", file, fi.Mode().Perm(), perm)
	}
}

// TestRenameReplacesSymlinkAtomically swaps a symlink's target many times
// by renaming a new link over it while a reader watches: the reader must
// always find the link, with one of the two targets.
func TestRenameReplacesSymlinkAtomically(t *testing.T) {
	t.Parallel()
	targets, cluster := fsTargets(t)
	for _, ft := range targets {
		t.Run(ft.name, func(t *testing.T) {
			t.Parallel()
			c := ft.conn
			dir := ft.newDir(t, cluster)
			link, tmp := filepath.Join(dir, "lib"), filepath.Join(dir, ".lib.tmp")
			if err := c.Symlink("/usr/lib/app/1.0", link); err != nil {
				t.Fatal(err)
			}
			var stop atomic.Bool
			var bad atomic.Value
			readerDone := make(chan struct{})
			go func() {
				defer close(readerDone)
				for !stop.Load() {
					target, err := os.Readlink(link)
					if err != nil || (target != "/usr/lib/app/1.0" && target != "/usr/lib/app/1.1") {
						bad.Store(target + " " + errString(err))
						return
					}
				}
			}()
			for i := 0; i < 100; i++ {
				want := "/usr/lib/app/1.0"
				if i%2 == 0 {
					want = "/usr/lib/app/1.1"
				}
				if err := c.Symlink(want, tmp); err != nil {
					t.Fatal(err)
				}
				if err := c.Rename(tmp, link); err != nil {
					t.Fatal(err)
				}
				if got, err := c.Readlink(link); err != nil || got != want {
					t.Fatalf("after rename %d: Readlink = %q, %v; want %q", i, got, err, want)
				}
			}
			stop.Store(true)
			<-readerDone
			if b := bad.Load(); b != nil {
				t.Errorf("a reader saw the link missing or wrong: %v", b)
			}
			if _, err := os.Lstat(tmp); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the temporary link remains: %v", err)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestFileErrors(t *testing.T) {
	t.Parallel()
	targets, cluster := fsTargets(t)
	for _, ft := range targets {
		t.Run(ft.name, func(t *testing.T) {
			t.Parallel()
			c := ft.conn
			dir := ft.newDir(t, cluster)
			missing := filepath.Join(dir, "missing")
			ops := []struct {
				name string
				op   func(name string) error
			}{
				{"lstat", func(n string) error { _, err := c.Lstat(n); return err }},
				{"stat", func(n string) error { _, err := c.Stat(n); return err }},
				{"readlink", func(n string) error { _, err := c.Readlink(n); return err }},
				{"readfile", func(n string) error { _, err := c.ReadFile(n); return err }},
				{"readdir", func(n string) error { _, err := c.ReadDir(n); return err }},
				{"remove", func(n string) error { return c.Remove(n) }},
				{"chmod", func(n string) error { return c.Chmod(n, 0o644) }},
				{"rename", func(n string) error { return c.Rename(n, filepath.Join(dir, "x")) }},
				{"write into missing dir", func(n string) error { return c.WriteFileAtomic(filepath.Join(n, "f"), nil, 0o644) }},
			}
			for _, op := range ops {
				err := op.op(missing)
				if !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s of a missing path: err = %v, want errors.Is fs.ErrNotExist", op.name, err)
					continue
				}
				if msg := err.Error(); !strings.HasPrefix(msg, c.Node()+": ") || !strings.Contains(msg, missing) {
					t.Errorf("%s: err = %q, want the node and the path", op.name, msg)
				}
				// Relative paths are refused before anything is done.
				if err := op.op("relative/path"); err == nil || !strings.Contains(err.Error(), "path is not absolute") {
					t.Errorf("%s of a relative path: err = %v, want it refused", op.name, err)
				}
			}
			if err := c.Symlink("target", "relative"); err == nil {
				t.Error("Symlink to a relative name: err = nil, want an error")
			}
			if err := c.MkdirAll("relative", 0o755); err == nil {
				t.Error("MkdirAll of a relative name: err = nil, want an error")
			}
			if err := c.WriteFileAtomic(filepath.Join(dir, "f"), nil, fs.ModeSetuid|0o755); err == nil {
				t.Error("WriteFileAtomic with a setuid mode: err = nil, want an error")
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("failed operations left %d entries in %s", len(entries), dir)
			}
		})
	}
}

// TestFilePermissionDenied checks that an unprivileged login's refused
// writes satisfy errors.Is(err, fs.ErrPermission) and leave nothing behind.
func TestFilePermissionDenied(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1)
	if c.User == "root" {
		t.Skip("the SSH login is root, which no permission stops")
	}
	p := newPool(t, c, nil)
	node := conn(t, p, "node1")
	dir := t.TempDir() // owned by root
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	err := node.WriteFileAtomic(filepath.Join(dir, "f"), []byte("x"), 0o644)
	if !errors.Is(err, fs.ErrPermission) {
		t.Errorf("WriteFileAtomic into a root directory: err = %v, want fs.ErrPermission", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the refused write left %d entries", len(entries))
	}
}

// TestNoSyncOperations checks, on every transport, that SymlinkNoSync,
// RenameNoSync and RemoveNoSync change the directory as their syncing forms do
// but sync nothing, leaving one SyncDir to make all of it durable. It does not
// run in parallel: it changes how the whole package syncs.
func TestNoSyncOperations(t *testing.T) {
	targets, cluster := fsTargets(t)
	rec := recordSyncs(t, filepath.Join(cluster.UserDir(t), "synced"))
	for _, ft := range targets {
		how := map[string]string{"local": "local", "ssh": "sftp", "ssh-without-sftp": "command"}[ft.name]
		t.Run(ft.name, func(t *testing.T) {
			c := ft.conn
			dir := ft.newDir(t, cluster)
			if err := c.WriteFileAtomic(filepath.Join(dir, "old"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			rec.start(t, "")
			tmp, link := filepath.Join(dir, ".link.tmp"), filepath.Join(dir, "link")
			for _, err := range []error{
				c.SymlinkNoSync("target", tmp),
				c.RenameNoSync(tmp, link),
				c.RemoveNoSync(filepath.Join(dir, "old")),
			} {
				if err != nil {
					t.Fatal(err)
				}
			}
			if got := rec.got(t); len(got) != 0 {
				t.Errorf("the NoSync operations synced %q, want nothing", got)
			}
			if err := c.SyncDir(dir); err != nil {
				t.Fatal(err)
			}
			if got, want := rec.got(t), []string{how + " " + dir}; !reflect.DeepEqual(got, want) {
				t.Errorf("SyncDir synced %q, want %q", got, want)
			}
			if target, err := os.Readlink(link); err != nil || target != "target" {
				t.Errorf("link -> %q, %v; want target", target, err)
			}
			for _, gone := range []string{tmp, filepath.Join(dir, "old")} {
				if _, err := os.Lstat(gone); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s: %v, want it gone", gone, err)
				}
			}
			// A missing path is fs.ErrNotExist, as for the syncing forms, naming the node.
			err := c.RenameNoSync(filepath.Join(dir, "missing"), link)
			if !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), c.Node()+": rename ") {
				t.Errorf("RenameNoSync(missing) = %v, want fs.ErrNotExist naming the node and the operation", err)
			}
		})
	}
}

// perChangeFS is a node's file operations without the NoSync forms: every change syncs its
// directory itself, as a switch did before it synced once.
type perChangeFS struct{ layout.FS }

// BenchmarkSwitch measures a switch of both links over SFTP to an sshd node on this machine,
// batched (the links' directory synced once, after the last change) and per change (synced
// after each symlink and rename, four times), one of each in every round so that both see
// the same machine. It reports both times, a directory sync's time from their difference
// (four syncs became one), and the syncs' share of the per-change and the batched switch.
//
//	go test -run '^$' -bench BenchmarkSwitch -benchtime 200x -count 5 ./nodes/
func BenchmarkSwitch(b *testing.B) {
	c := sshdtest.Start(b, 1)
	node := conn(b, newPool(b, c, nil), "node1")
	root := c.UserDir(b)
	for _, d := range []string{"usr/lib/app/1.0", "usr/lib/app/1.1", "usr/share/app/1.0", "usr/share/app/1.1", "etc/app"} {
		if err := node.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	lay, err := layout.New("app", layout.Paths{LibDir: "/usr/lib", DataDir: "/usr/share", SysconfDir: "/etc", LocalstateDir: "/var"}, "minor", root)
	if err != nil {
		b.Fatal(err)
	}
	v10, err := layout.ParseVersion("1.0")
	if err != nil {
		b.Fatal(err)
	}
	v11, err := layout.ParseVersion("1.1")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := lay.Switch(ctx, node, v10); err != nil {
		b.Fatal(err)
	}
	var perChange, batched time.Duration
	for b.Loop() {
		start := time.Now()
		if err := lay.Switch(ctx, perChangeFS{node}, v11); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		if err := lay.Switch(ctx, node, v10); err != nil {
			b.Fatal(err)
		}
		perChange += mid.Sub(start)
		batched += time.Since(mid)
	}
	n := float64(b.N)
	sync := max(0, perChange-batched).Seconds() / 3 / n
	b.ReportMetric(perChange.Seconds()*1000/n, "ms/switch-per-change")
	b.ReportMetric(batched.Seconds()*1000/n, "ms/switch-batched")
	b.ReportMetric(sync*1000, "ms/sync")
	b.ReportMetric(4*sync/(perChange.Seconds()/n), "sync-share-per-change")
	b.ReportMetric(sync/(batched.Seconds()/n), "sync-share-batched")
}
