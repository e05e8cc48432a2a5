package layout

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// faultFS is the local FS with injected failures, and a count of the writes it was asked for.
type faultFS struct {
	OSFS
	failRename  string // a Rename onto a path ending in this fails
	lateRename  string // a Rename onto a path ending in this happens, then reports failure (as a failed directory sync)
	failSymlink bool   // Symlink creates the link, then reports failure (as a lost SFTP reply)
	lie         string // Readlink of a path ending in this, once renamed onto, names a wrong target
	renamed     map[string]bool
	writes      int
}

var errInjected = errors.New("injected failure")

func (f *faultFS) Symlink(oldname, newname string) error {
	return f.symlink(oldname, newname, f.OSFS.Symlink)
}

func (f *faultFS) SymlinkNoSync(oldname, newname string) error {
	return f.symlink(oldname, newname, f.OSFS.SymlinkNoSync)
}

func (f *faultFS) symlink(oldname, newname string, do func(string, string) error) error {
	f.writes++
	if err := do(oldname, newname); err != nil {
		return err
	}
	if f.failSymlink {
		return errInjected
	}
	return nil
}

func (f *faultFS) Rename(oldname, newname string) error {
	return f.rename(oldname, newname, f.OSFS.Rename)
}

func (f *faultFS) RenameNoSync(oldname, newname string) error {
	return f.rename(oldname, newname, f.OSFS.RenameNoSync)
}

func (f *faultFS) rename(oldname, newname string, do func(string, string) error) error {
	f.writes++
	if f.failRename != "" && strings.HasSuffix(newname, f.failRename) {
		return errInjected
	}
	if f.renamed == nil {
		f.renamed = map[string]bool{}
	}
	f.renamed[newname] = true
	if err := do(oldname, newname); err != nil {
		return err
	}
	if f.lateRename != "" && strings.HasSuffix(newname, f.lateRename) {
		return errInjected
	}
	return nil
}

func (f *faultFS) Remove(name string) error {
	f.writes++
	return f.OSFS.Remove(name)
}

func (f *faultFS) RemoveNoSync(name string) error {
	f.writes++
	return f.OSFS.RemoveNoSync(name)
}

func (f *faultFS) Readlink(name string) (string, error) {
	if f.lie != "" && strings.HasSuffix(name, f.lie) && f.renamed[name] {
		return "/usr/lib/app/0.1", nil
	}
	return f.OSFS.Readlink(name)
}

func TestSwitch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		tree       []string
		version    string
		wantWrites int // Symlink, Rename and Remove calls; -1 means any
		wantLib    string
		wantShare  string
	}{
		{name: "upgrade", tree: installed, version: "1.1", wantWrites: 4, wantLib: "/usr/lib/app/1.1", wantShare: "/usr/share/app/1.1"},
		{name: "full version in minor mode", tree: installed, version: "1.1.4", wantWrites: 4, wantLib: "/usr/lib/app/1.1", wantShare: "/usr/share/app/1.1"},
		{name: "already there changes nothing", tree: installed, version: "1.0.2", wantWrites: 0, wantLib: "/usr/lib/app/1.0", wantShare: "/usr/share/app/1.0"},
		{name: "repairs disagreeing links", tree: with(installed[:6], "l etc/app/lib /usr/lib/app/1.0", "l etc/app/share /usr/share/app/1.1"),
			version: "1.1", wantWrites: 2, wantLib: "/usr/lib/app/1.1", wantShare: "/usr/share/app/1.1"},
		{name: "creates missing links", tree: with(installed[:6], "d etc/app"), version: "1.0", wantWrites: 4, wantLib: "/usr/lib/app/1.0", wantShare: "/usr/share/app/1.0"},
		{name: "creates one missing link", tree: with(installed[:6], "l etc/app/lib /usr/lib/app/1.0"), version: "1.0", wantWrites: 2, wantLib: "/usr/lib/app/1.0", wantShare: "/usr/share/app/1.0"},
		{name: "rewrites a relative link", tree: with(installed[:6], "l etc/app/lib ../../usr/lib/app/1.0", "l etc/app/share /usr/share/app/1.0"),
			version: "1.0", wantWrites: 2, wantLib: "/usr/lib/app/1.0", wantShare: "/usr/share/app/1.0"},
		{name: "removes stale temporary links", tree: with(installed, "l etc/app/.lib.cutover-STALE /usr/lib/app/1.1", "l etc/app/.share.cutover-STALE /usr/share/app/1.1"),
			version: "1.1", wantWrites: 6, wantLib: "/usr/lib/app/1.1", wantShare: "/usr/share/app/1.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := build(t, tt.tree...)
			l := newTestLayout(t, "minor", root)
			fsys := &faultFS{}
			if err := switchTo(context.Background(), l, fsys, tt.version); err != nil {
				t.Fatalf("Switch(%q) = %v", tt.version, err)
			}
			if fsys.writes != tt.wantWrites {
				t.Errorf("Switch(%q) made %d writes, want %d", tt.version, fsys.writes, tt.wantWrites)
			}
			if got := readlink(t, root, "etc/app/lib"); got != tt.wantLib {
				t.Errorf("lib -> %q, want %q", got, tt.wantLib)
			}
			if got := readlink(t, root, "etc/app/share"); got != tt.wantShare {
				t.Errorf("share -> %q, want %q", got, tt.wantShare)
			}
			assertNoTemps(t, root, "etc/app")
			live, err := l.Live(context.Background(), OSFS{})
			if want := l.DirOf(mustParse(t, tt.version)); err != nil || live != want {
				t.Errorf("Live after Switch = %q, %v, want %q", live, err, want)
			}
			// Switching again is a no-op.
			fsys.writes = 0
			if err := switchTo(context.Background(), l, fsys, tt.version); err != nil || fsys.writes != 0 {
				t.Errorf("second Switch(%q) = %v with %d writes, want nil with none", tt.version, err, fsys.writes)
			}
		})
	}
}

func TestSwitchUpAndBackLeavesDefaultLinks(t *testing.T) {
	t.Parallel()
	root := build(t, installed...)
	l := newTestLayout(t, "minor", root)
	for _, v := range []string{"1.1", "1.0", "1.1"} {
		if err := switchTo(context.Background(), l, OSFS{}, v); err != nil {
			t.Fatalf("Switch(%q) = %v", v, err)
		}
		if got, want := readlink(t, root, "etc/app/lib"), "/usr/lib/app/"+v; got != want {
			t.Errorf("after Switch(%q): lib -> %q, want %q", v, got, want)
		}
	}
	if got := readlink(t, root, "usr/lib/app/default"); got != "/etc/app/lib" {
		t.Errorf("usr/lib/app/default -> %q, want /etc/app/lib", got)
	}
	if got := readlink(t, root, "usr/share/app/default"); got != "/etc/app/share" {
		t.Errorf("usr/share/app/default -> %q, want /etc/app/share", got)
	}
}

func TestSwitchRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		tree    []string
		version string
		check   func(error) bool
		wantMsg string
	}{
		{name: "not installed", tree: installed, version: "1.2", check: IsNotInstalled,
			wantMsg: "switch app to 1.2: app 1.2 is not installed: missing /usr/lib/app/1.2 and /usr/share/app/1.2"},
		{name: "only lib installed", tree: with(installed, "d usr/lib/app/1.2"), version: "1.2", check: IsNotInstalled,
			wantMsg: "missing /usr/share/app/1.2"},
		{name: "lib is a plain directory", tree: with(installed[:6], "d etc/app/lib/usr", "l etc/app/share /usr/share/app/1.0"), version: "1.1",
			check: IsNotSideBySide, wantMsg: "/etc/app/lib is a directory, not a symlink"},
		{name: "share is a plain file", tree: with(installed[:6], "l etc/app/lib /usr/lib/app/1.0", "f etc/app/share"), version: "1.1",
			check: IsNotSideBySide, wantMsg: "/etc/app/share is a regular file, not a symlink"},
		{name: "hostile version", tree: installed, version: "1.1; rm -rf /",
			check: func(err error) bool { return !IsNotInstalled(err) && !IsNotSideBySide(err) }, wantMsg: `invalid version "1.1; rm -rf /"`},
		{name: "escaping version", tree: installed, version: "../1.1",
			check: func(err error) bool { return !IsNotInstalled(err) }, wantMsg: `invalid version "../1.1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := build(t, tt.tree...)
			before := snapshot(t, root)
			fsys := &faultFS{}
			err := switchTo(context.Background(), newTestLayout(t, "minor", root), fsys, tt.version)
			if err == nil || !tt.check(err) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("Switch(%q) = %v, want an error of the expected kind containing %q", tt.version, err, tt.wantMsg)
			}
			if fsys.writes != 0 {
				t.Errorf("Switch(%q) made %d writes before refusing", tt.version, fsys.writes)
			}
			assertUnchanged(t, root, before)
		})
	}
}

func TestSwitchFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		tree      []string
		fsys      *faultFS
		wantMsg   []string
		wantLib   string
		wantShare string
	}{
		{name: "lib rename fails", tree: installed, fsys: &faultFS{failRename: "/etc/app/lib"},
			wantMsg: []string{"rename /etc/app/.lib.cutover-", "to /etc/app/lib: injected failure"},
			wantLib: "/usr/lib/app/1.0", wantShare: "/usr/share/app/1.0"},
		{name: "share rename fails, lib put back", tree: installed, fsys: &faultFS{failRename: "/etc/app/share"},
			wantMsg: []string{"to /etc/app/share: injected failure"},
			wantLib: "/usr/lib/app/1.0", wantShare: "/usr/share/app/1.0"},
		{name: "share rename fails, new lib removed", tree: with(installed[:6], "d etc/app"), fsys: &faultFS{failRename: "/etc/app/share"},
			wantMsg: []string{"to /etc/app/share: injected failure"}},
		{name: "lib renamed but not synced, put back", tree: installed, fsys: &faultFS{lateRename: "/etc/app/lib"},
			wantMsg: []string{"to /etc/app/lib: injected failure", "put /etc/app/lib back"},
			wantLib: "/usr/lib/app/1.0", wantShare: "/usr/share/app/1.0"},
		{name: "share renamed but not synced, both put back", tree: installed, fsys: &faultFS{lateRename: "/etc/app/share"},
			wantMsg: []string{"to /etc/app/share: injected failure", "put /etc/app/share back"},
			wantLib: "/usr/lib/app/1.0", wantShare: "/usr/share/app/1.0"},
		{name: "symlink reply lost", tree: installed, fsys: &faultFS{failSymlink: true},
			wantMsg: []string{"create /etc/app/.lib.cutover-", "injected failure"},
			wantLib: "/usr/lib/app/1.0", wantShare: "/usr/share/app/1.0"},
		{name: "lib read back differs", tree: installed, fsys: &faultFS{lie: "/etc/app/lib"},
			wantMsg: []string{`read back /etc/app/lib: points to "/usr/lib/app/0.1", want "/usr/lib/app/1.1"`},
			wantLib: "/usr/lib/app/1.0", wantShare: "/usr/share/app/1.0"},
		{name: "share read back differs, both put back", tree: installed, fsys: &faultFS{lie: "/etc/app/share"},
			wantMsg: []string{`read back /etc/app/share: points to "/usr/lib/app/0.1", want "/usr/share/app/1.1"`},
			wantLib: "/usr/lib/app/1.0", wantShare: "/usr/share/app/1.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := build(t, tt.tree...)
			err := switchTo(context.Background(), newTestLayout(t, "minor", root), tt.fsys, "1.1")
			if err == nil {
				t.Fatal("Switch succeeded, want an error")
			}
			if !errors.Is(err, errInjected) && tt.fsys.lie == "" {
				t.Errorf("Switch error %v does not wrap the injected failure", err)
			}
			for _, m := range tt.wantMsg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("Switch error %q does not contain %q", err, m)
				}
			}
			assertNoTemps(t, root, "etc/app")
			if got := readlink(t, root, "etc/app/lib"); got != tt.wantLib {
				t.Errorf("lib -> %q, want %q", got, tt.wantLib)
			}
			if got := readlink(t, root, "etc/app/share"); got != tt.wantShare {
				t.Errorf("share -> %q, want %q", got, tt.wantShare)
			}
		})
	}
}

func TestSwitchMissingConfigDir(t *testing.T) {
	t.Parallel()
	root := build(t, installed[:6]...)
	err := switchTo(context.Background(), newTestLayout(t, "minor", root), OSFS{}, "1.0")
	if err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "create /etc/app/.lib.cutover-") {
		t.Fatalf("Switch without /etc/app = %v, want a create error wrapping ErrNotExist", err)
	}
	if _, err := os.Lstat(filepath.Join(root, "etc")); !os.IsNotExist(err) {
		t.Errorf("Switch created %s/etc: %v", root, err)
	}
}

func TestWithoutRoot(t *testing.T) {
	t.Parallel()
	// With no root, the configured paths are used as they are, and link targets are real.
	dir := build(t, "d usr/lib/app/1.0", "d usr/share/app/1.0", "d usr/lib/app/1.1", "d usr/share/app/1.1", "d etc/app")
	paths := Paths{LibDir: dir + "/usr/lib", DataDir: dir + "/usr/share", SysconfDir: dir + "/etc", LocalstateDir: dir + "/var"}
	for _, root := range []string{"", "/"} {
		l, err := New("app", paths, "minor", root)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{"1.0", "1.1"} {
			if err := switchTo(context.Background(), l, OSFS{}, v); err != nil {
				t.Fatalf("root %q: Switch(%s) = %v", root, v, err)
			}
			if got, want := readlink(t, "/", l.LibLink()), dir+"/usr/lib/app/"+v; got != want {
				t.Errorf("root %q: %s -> %q, want %q", root, l.LibLink(), got, want)
			}
			// The link resolves on this machine: the tree is reachable through it.
			if fi, err := os.Stat(l.ShareLink()); err != nil || !fi.IsDir() {
				t.Errorf("root %q: %s does not lead to a directory: %v", root, l.ShareLink(), err)
			}
			if live, err := l.Live(context.Background(), OSFS{}); err != nil || live != v {
				t.Errorf("root %q: Live = %q, %v, want %s", root, live, err, v)
			}
		}
	}
}

// recFS is the local FS that records, in order, every change Switch makes through it and
// every sync of a directory.
type recFS struct {
	OSFS
	root     string
	failSync bool
	ops      []string
}

func (r *recFS) rel(name string) string { return strings.TrimPrefix(name, r.root) }

// templess names a temporary link by its link: /etc/app/.lib.cutover-X is /etc/app/.lib.
func templess(name string) string {
	if i := strings.Index(name, tempMarker); i >= 0 {
		return name[:i]
	}
	return name
}

func (r *recFS) SymlinkNoSync(oldname, newname string) error {
	r.ops = append(r.ops, "symlink "+templess(r.rel(newname)))
	return r.OSFS.SymlinkNoSync(oldname, newname)
}

func (r *recFS) RenameNoSync(oldname, newname string) error {
	r.ops = append(r.ops, "rename "+templess(r.rel(oldname))+" "+r.rel(newname))
	return r.OSFS.RenameNoSync(oldname, newname)
}

func (r *recFS) RemoveNoSync(name string) error {
	r.ops = append(r.ops, "remove "+templess(r.rel(name)))
	return r.OSFS.RemoveNoSync(name)
}

func (r *recFS) SyncDir(name string) error {
	r.ops = append(r.ops, "sync "+r.rel(name))
	if r.failSync {
		return errSyncRefused
	}
	return r.OSFS.SyncDir(name)
}

// Switch on an FS with NoSync operations renames both links, syncs their directory once after
// the last change, and returns only after that sync: nothing it changed is left unsynced.
func TestSwitchSyncsOnceAfterItsChanges(t *testing.T) {
	t.Parallel()
	switched := []string{
		"symlink /etc/app/.lib", "rename /etc/app/.lib /etc/app/lib",
		"symlink /etc/app/.share", "rename /etc/app/.share /etc/app/share",
	}
	tests := []struct {
		name     string
		tree     []string
		version  string
		failSync bool
		want     []string
		wantLib  string
	}{
		{name: "upgrade", tree: installed, version: "1.1", want: append(slices.Clone(switched), "sync /etc/app"), wantLib: "/usr/lib/app/1.1"},
		{name: "already there", tree: installed, version: "1.0", want: []string{"sync /etc/app"}, wantLib: "/usr/lib/app/1.0"},
		{name: "a leftover temporary link", tree: with(installed, "l etc/app/.lib.cutover-OLD /usr/lib/app/1.1"), version: "1.1",
			want: append([]string{"remove /etc/app/.lib"}, append(slices.Clone(switched), "sync /etc/app")...), wantLib: "/usr/lib/app/1.1"},
		{name: "the sync fails: both put back", tree: installed, version: "1.1", failSync: true,
			want: append(slices.Clone(switched), "sync /etc/app",
				"symlink /etc/app/.lib", "rename /etc/app/.lib /etc/app/lib",
				"symlink /etc/app/.share", "rename /etc/app/.share /etc/app/share", "sync /etc/app"),
			wantLib: "/usr/lib/app/1.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := build(t, tt.tree...)
			r := &recFS{root: root, failSync: tt.failSync}
			err := switchTo(context.Background(), newTestLayout(t, "minor", root), r, tt.version)
			if tt.failSync != errors.Is(err, errSyncRefused) {
				t.Errorf("Switch(%s) = %v, want the sync's failure: %v", tt.version, err, tt.failSync)
			}
			if !slices.Equal(r.ops, tt.want) {
				t.Errorf("Switch(%s) did\n  %s\nwant\n  %s", tt.version, strings.Join(r.ops, "\n  "), strings.Join(tt.want, "\n  "))
			}
			if n := len(r.ops); n == 0 || r.ops[n-1] != "sync /etc/app" {
				t.Errorf("Switch(%s) returned before syncing /etc/app after its last change: %q", tt.version, r.ops)
			}
			if got := readlink(t, root, "etc/app/lib"); got != tt.wantLib {
				t.Errorf("lib -> %q, want %q", got, tt.wantLib)
			}
		})
	}
}

// plainFS is an FS without NoSync operations: every change syncs its directory itself.
type plainFS struct{ FS }

// Switch on an FS without NoSync operations changes the links with the operations that sync
// each change, and adds no sync of its own after them.
func TestSwitchWithoutNoSync(t *testing.T) {
	root := build(t, installed...)
	synced := recordSyncs(t, "")
	if err := switchTo(context.Background(), newTestLayout(t, "minor", root), plainFS{OSFS{}}, "1.1"); err != nil {
		t.Fatalf("Switch(1.1) = %v", err)
	}
	if len(*synced) != 4 {
		t.Errorf("synced %q, want /etc/app once per symlink and rename: 4 times", *synced)
	}
	if got := readlink(t, root, "etc/app/lib"); got != "/usr/lib/app/1.1" {
		t.Errorf("lib -> %q, want /usr/lib/app/1.1", got)
	}
}
