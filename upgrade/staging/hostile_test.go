package staging_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cutover/cutover/upgrade/staging"

	"github.com/cutover/cutover/upgrade/upgradetest"
)

// The trees of the hostile archives, as StageVersion names them.
var hostileTrees = []string{"usr/lib/app/1.2.0", "usr/share/app/1.2.0"}

// defaultPolicy bounds a source as cutover.toml does by default.
var defaultPolicy = staging.Policy{MaxBytes: 4 << 30, MaxFiles: 200_000, MaxDepth: 64}

// member is one entry of a crafted archive.
type member struct {
	name string
	typ  byte
	mode int64
	body string
	link string
}

// archive writes members as a .tar.gz into dir and returns its path.
func archive(t *testing.T, dir string, members []member) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, m := range members {
		mode := m.mode
		if mode == 0 {
			mode = 0o644
		}
		h := &tar.Header{Name: m.name, Typeflag: m.typ, Mode: mode, Linkname: m.link, Size: int64(len(m.body)),
			ModTime: time.Unix(1700000000, 0), Format: tar.FormatPAX}
		if m.typ == tar.TypeChar {
			h.Devmajor, h.Devminor = 1, 3
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
		if _, err := io.WriteString(tw, m.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return writeArchive(t, dir, buf.Bytes())
}

func writeArchive(t *testing.T, dir string, tarData []byte) string {
	t.Helper()
	p := filepath.Join(dir, "app-1.2.0.tar.gz")
	var buf bytes.Buffer
	if bytes.HasPrefix(tarData, []byte{0x1f, 0x8b}) {
		buf.Write(tarData)
	} else {
		gz := gzip.NewWriter(&buf)
		gz.Write(tarData)
		gz.Close()
	}
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// rawHeader is a ustar header block, for what archive/tar does not write (sparse members).
func rawHeader(name string, typ byte, size int) []byte {
	b := make([]byte, 512)
	copy(b[0:], name)
	copy(b[100:], "0000644\x00")
	copy(b[108:], "0000000\x00")
	copy(b[116:], "0000000\x00")
	copy(b[124:], fmt.Sprintf("%011o\x00", size))
	copy(b[136:], "14540000000\x00")
	b[156] = typ
	copy(b[257:], "ustar\x0000")
	copy(b[148:], "        ")
	sum := 0
	for _, c := range b {
		sum += int(c)
	}
	copy(b[148:], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

func padded(data string) []byte {
	b := []byte(data)
	return append(b, make([]byte, (512-len(b)%512)%512)...)
}

// sparseBomb is a .tar.gz of a few hundred bytes holding one sparse member (PAX format 1.0)
// of realSize bytes, all of them a hole.
func sparseBomb(t *testing.T, dir string, realSize int64) string {
	t.Helper()
	rec := func(k, v string) string {
		body := " " + k + "=" + v + "\n"
		n := len(body) + 1
		for len(fmt.Sprint(n))+len(body) != n {
			n++
		}
		return fmt.Sprint(n) + body
	}
	pax := rec("GNU.sparse.major", "1") + rec("GNU.sparse.minor", "0") +
		rec("GNU.sparse.name", "usr/lib/app/1.2.0/big") + rec("GNU.sparse.realsize", fmt.Sprint(realSize))
	var b bytes.Buffer
	b.Write(rawHeader("PaxHeaders/big", 'x', len(pax)))
	b.Write(padded(pax))
	b.Write(rawHeader("GNUSparseFile.0/big", '0', 512))
	b.Write(padded("1\n0\n0\n"))
	b.Write(make([]byte, 1024))
	p := writeArchive(t, dir, b.Bytes())
	if fi, err := os.Stat(p); err != nil || fi.Size() > 1024 {
		t.Fatalf("the sparse bomb is %v bytes (err %v)", fi.Size(), err)
	}
	return p
}

// sandbox is a test's world: files outside the staging tree that an archive aims at, and the
// private directory the archive is unpacked into.
type sandbox struct {
	root, outside, into string
}

func newSandbox(t *testing.T) sandbox {
	t.Helper()
	root := t.TempDir()
	s := sandbox{root: root, outside: filepath.Join(root, "outside"), into: filepath.Join(root, "state", "stage-source-1")}
	for _, d := range []string{filepath.Join(s.outside, "d"), s.into} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(s.outside, "secret"), []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestUnpackHostile unpacks crafted archives: each is refused before anything is written,
// with an error naming the entry, and nothing outside the staging directory changes.
func TestUnpackHostile(t *testing.T) {
	t.Parallel()
	const lib = "./usr/lib/app/1.2.0/"
	dirs := []member{{name: "./usr/", typ: tar.TypeDir, mode: 0o755}, {name: lib, typ: tar.TypeDir, mode: 0o755}}
	with := func(ms ...member) []member { return append(append([]member{}, dirs...), ms...) }
	deep := lib + strings.Repeat("d/", 64) + "f"
	many := with()
	for i := range 100_000 {
		many = append(many, member{name: fmt.Sprintf("%sf%06d", lib, i), typ: tar.TypeReg})
	}
	small := defaultPolicy
	small.MaxBytes = 1 << 20
	few := defaultPolicy
	few.MaxFiles = 50_000
	huge := defaultPolicy
	huge.MaxBytes = 1 << 62
	allowLinks := defaultPolicy
	allowLinks.AllowHardlinks = []string{"*"}

	tests := []struct {
		name    string
		members func(s sandbox) []member
		archive func(t *testing.T, dir string) string // instead of members
		policy  staging.Policy
		entry   string // the entry the error names
		want    string
	}{
		{name: "link then directory", members: func(s sandbox) []member {
			return with(member{name: lib + "x", typ: tar.TypeSymlink, link: filepath.Join(s.outside, "secret")},
				member{name: lib + "x/", typ: tar.TypeDir, mode: 0o4777})
		}, entry: lib + "x/", want: "named twice in the archive (first as a symbolic link)"},
		{name: "link then file", members: func(s sandbox) []member {
			return with(member{name: lib + "x", typ: tar.TypeSymlink, link: filepath.Join(s.outside, "secret")},
				member{name: lib + "x", typ: tar.TypeReg, body: "pwned\n"})
		}, entry: lib + "x", want: "named twice"},
		{name: "file beneath a link", members: func(s sandbox) []member {
			return with(member{name: lib + "x", typ: tar.TypeSymlink, link: filepath.Join(s.outside, "d")},
				member{name: lib + "x/planted", typ: tar.TypeReg, body: "pwned\n"})
		}, entry: lib + "x/planted", want: "lies beneath usr/lib/app/1.2.0/x, which the archive made a symbolic link"},
		{name: "directory beneath a relative link", members: func(s sandbox) []member {
			return with(member{name: lib + "x", typ: tar.TypeSymlink, link: "../../../../../outside/d"},
				member{name: lib + "x/sub/", typ: tar.TypeDir, mode: 0o777})
		}, entry: lib + "x/sub/", want: "lies beneath"},
		{name: "file beneath a file", members: func(s sandbox) []member {
			return with(member{name: lib + "f", typ: tar.TypeReg, body: "a"}, member{name: lib + "f/g", typ: tar.TypeReg})
		}, entry: lib + "f/g", want: "which the archive made a file"},
		{name: "file given twice", members: func(s sandbox) []member {
			return with(member{name: lib + "f", typ: tar.TypeReg, body: "a"}, member{name: "usr/lib/app/1.2.0/f", typ: tar.TypeReg, body: "b"})
		}, entry: "usr/lib/app/1.2.0/f", want: "named twice"},
		{name: "dot dot", members: func(s sandbox) []member {
			return with(member{name: lib + "../../../../../outside/secret", typ: tar.TypeReg, body: "pwned\n"})
		}, entry: lib + "../../../../../outside/secret", want: `a name with ".."`},
		{name: "absolute name", members: func(s sandbox) []member {
			return with(member{name: filepath.Join(s.outside, "secret"), typ: tar.TypeReg, body: "pwned\n"})
		}, want: "an absolute name"},
		{name: "hard link out, not allowed", members: func(s sandbox) []member {
			return with(member{name: lib + "h", typ: tar.TypeLink, link: filepath.Join(s.outside, "secret")})
		}, entry: lib + "h", want: "allow_hardlinks"},
		{name: "hard link out, allowed", members: func(s sandbox) []member {
			return with(member{name: lib + "h", typ: tar.TypeLink, link: filepath.Join(s.outside, "secret")})
		}, policy: allowLinks, entry: lib + "h", want: "an absolute name"},
		{name: "hard link out by dot dot", members: func(s sandbox) []member {
			return with(member{name: lib + "h", typ: tar.TypeLink, link: "../outside/secret"})
		}, policy: allowLinks, entry: lib + "h", want: `".."`},
		{name: "hard link to the other tree", members: func(s sandbox) []member {
			return with(member{name: "usr/share/app/1.2.0/f", typ: tar.TypeReg, body: "a"},
				member{name: lib + "h", typ: tar.TypeLink, link: "usr/share/app/1.2.0/f"})
		}, policy: allowLinks, entry: lib + "h", want: "not a file of this tree"},
		{name: "hard link to a file outside the trees", members: func(s sandbox) []member {
			return with(member{name: "etc/shadow", typ: tar.TypeReg, body: "a"}, member{name: lib + "h", typ: tar.TypeLink, link: "etc/shadow"})
		}, policy: allowLinks, entry: lib + "h", want: "not a file of this tree"},
		{name: "link above the trees", members: func(s sandbox) []member {
			return []member{{name: "usr/lib/app", typ: tar.TypeSymlink, link: s.outside}, {name: lib + "f", typ: tar.TypeReg}}
		}, entry: "usr/lib/app", want: "a symbolic link where the directory above"},
		{name: "link as the tree's root", members: func(s sandbox) []member {
			return []member{{name: "usr/lib/app/1.2.0", typ: tar.TypeSymlink, link: s.outside}}
		}, entry: "usr/lib/app/1.2.0", want: "where the root directory of a tree must be"},
		{name: "sparse bomb", archive: func(t *testing.T, dir string) string { return sparseBomb(t, dir, 1<<40) },
			entry: "usr/lib/app/1.2.0/big", want: "max_bytes"},
		{name: "sparse bomb within bounds but not the disk", archive: func(t *testing.T, dir string) string { return sparseBomb(t, dir, 1<<58) },
			policy: huge, want: "bytes free"},
		{name: "highly compressed", members: func(s sandbox) []member {
			return with(member{name: lib + "zeros", typ: tar.TypeReg, body: strings.Repeat("\x00", 2<<20)})
		}, policy: small, entry: lib + "zeros", want: "max_bytes"},
		{name: "100,000 entries", members: func(sandbox) []member { return many }, policy: few,
			entry: fmt.Sprintf("%sf%06d", lib, few.MaxFiles-2), want: "max_files"},
		{name: "deep path", members: func(s sandbox) []member { return with(member{name: deep, typ: tar.TypeReg}) },
			entry: deep, want: "max_depth"},
		{name: "setuid", members: func(s sandbox) []member {
			return with(member{name: lib + "usr/sbin/helper", typ: tar.TypeReg, mode: 0o4755, body: "#!/bin/sh\n"})
		}, entry: lib + "usr/sbin/helper", want: "setuid (mode 4755)"},
		{name: "setgid directory", members: func(s sandbox) []member { return with(member{name: lib + "var/", typ: tar.TypeDir, mode: 0o2755}) },
			entry: lib + "var/", want: "allow_setgid"},
		{name: "world-writable file", members: func(s sandbox) []member {
			return with(member{name: lib + "etc/conf", typ: tar.TypeReg, mode: 0o666})
		}, entry: lib + "etc/conf", want: "world-writable"},
		{name: "world-writable directory", members: func(s sandbox) []member { return with(member{name: lib + "tmp/", typ: tar.TypeDir, mode: 0o1777}) },
			entry: lib + "tmp/", want: "allow_world_writable"},
		{name: "world-writable root", members: func(s sandbox) []member {
			return []member{{name: "usr/share/app/1.2.0/", typ: tar.TypeDir, mode: 0o777}}
		}, entry: "usr/share/app/1.2.0/", want: "world-writable"},
		{name: "device", members: func(s sandbox) []member { return with(member{name: lib + "dev/null", typ: tar.TypeChar, mode: 0o666}) },
			entry: lib + "dev/null", want: "allow_devices"},
		{name: "fifo", members: func(s sandbox) []member { return with(member{name: lib + "run/fifo", typ: tar.TypeFifo, mode: 0o600}) },
			entry: lib + "run/fifo", want: "allow_fifos"},
		{name: "control character", members: func(s sandbox) []member { return with(member{name: lib + "a\nb", typ: tar.TypeReg}) },
			entry: lib + "a\nb", want: "control character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t)
			var src string
			if tt.archive != nil {
				src = tt.archive(t, s.root)
			} else {
				src = archive(t, s.root, tt.members(s))
			}
			policy := tt.policy
			if policy.MaxFiles == 0 {
				policy = defaultPolicy
			}
			before := upgradetest.TreeSum(t, s.into, s.root)
			_, err := staging.Unpack(src, s.into, hostileTrees, policy)
			if err == nil || !strings.Contains(err.Error(), tt.want) || (tt.entry != "" && !strings.Contains(err.Error(), fmt.Sprintf("entry %q", tt.entry))) {
				t.Fatalf("Unpack() = %v; want an error naming entry %q with %q", err, tt.entry, tt.want)
			}
			if after := upgradetest.TreeSum(t, s.into, s.root); after != before {
				t.Error("the sandbox outside the staging directory changed")
			}
			if left, _ := os.ReadDir(s.into); len(left) > 0 {
				t.Errorf("a refused archive left %d entries in the staging directory: nothing is written before every entry is checked", len(left))
			}
			// Read into streams rather than files, it is refused all the same.
			// (Where the streams do not fit, a stage unpacks the archive instead.)
			if _, _, err := staging.UnpackTrees(src, s.into, hostileTrees, policy); err == nil || !strings.Contains(err.Error(), tt.want) && !staging.IsNoRoom(err) {
				t.Errorf("UnpackTrees() = %v; want an error with %q", err, tt.want)
			}
			if after := upgradetest.TreeSum(t, s.into, s.root); after != before {
				t.Error("UnpackTrees changed the sandbox")
			}
		})
	}
}

// TestUnpackAllowed unpacks an archive whose special entries the policy allows, beside
// entries outside the trees: the trees hold exactly what the archive gives, with the modes
// it gives (setuid included) and cutover's owner; what lies outside the trees is not written.
func TestUnpackAllowed(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	const lib = "usr/lib/app/1.2.0/"
	src := archive(t, s.root, []member{
		{name: "etc/passwd", typ: tar.TypeReg, body: "not part of a tree\n"},
		{name: lib + "usr/sbin/helper", typ: tar.TypeReg, mode: 0o4755, body: "#!/bin/sh\n"},
		{name: lib + "usr/sbin/helper2", typ: tar.TypeLink, link: lib + "usr/sbin/helper"},
		{name: lib + "var/", typ: tar.TypeDir, mode: 0o2775},
		{name: lib + "tmp/", typ: tar.TypeDir, mode: 0o1777},
		{name: lib + "run/fifo", typ: tar.TypeFifo, mode: 0o600},
		{name: lib + "dev/null", typ: tar.TypeChar, mode: 0o666},
		{name: lib + "lib/link", typ: tar.TypeSymlink, link: "/etc/passwd"},
		{name: "usr/share/app/1.2.0/VERSION", typ: tar.TypeReg, body: "1.2.0\n"},
	})
	p := defaultPolicy
	p.AllowSetuid = []string{"usr/sbin/helper*"}
	p.AllowSetgid = []string{"var"}
	p.AllowWorldWritable = []string{"tmp"}
	p.AllowHardlinks = []string{"usr/sbin/helper2"}
	p.AllowFifos = []string{"run/*"}
	p.AllowDevices = []string{"dev/null"}
	before := upgradetest.TreeSum(t, s.into, s.root)
	if _, err := staging.Unpack(src, s.into, hostileTrees, p); err != nil {
		t.Fatal(err)
	}
	if after := upgradetest.TreeSum(t, s.into, s.root); after != before {
		t.Error("the sandbox outside the staging directory changed")
	}
	trees, err := staging.ReadTrees(s.into, hostileTrees, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tr := range trees {
		got[tr.Dir[len(s.into)+1:]+"/."] = fmt.Sprintf("d %v", tr.Mode)
		for _, e := range tr.Entries {
			got[e.Name] = fmt.Sprintf("%c %v", e.Kind, e.Mode)
		}
	}
	want := map[string]string{
		"usr/lib/app/1.2.0/.": "d -rwxr-xr-x", "usr/share/app/1.2.0/.": "d -rwxr-xr-x",
		"usr": "d -rwxr-xr-x", "usr/sbin": "d -rwxr-xr-x", "lib": "d -rwxr-xr-x", "run": "d -rwxr-xr-x", "dev": "d -rwxr-xr-x",
		"usr/sbin/helper": "f urwxr-xr-x", "usr/sbin/helper2": "f urwxr-xr-x", "var": "d grwxrwxr-x", "tmp": "d trwxrwxrwx",
		"run/fifo": "p -rw-------", "dev/null": "c -rw-rw-rw-", "lib/link": "l -rwxrwxrwx", "VERSION": "f -rw-r--r--",
	}
	for name, w := range want {
		if g := got[name]; g != w {
			t.Errorf("%s: %q, want %q", name, g, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("the trees hold %v, want %v", got, want)
	}
	if _, err := os.Lstat(filepath.Join(s.into, "etc")); err == nil {
		t.Error("an entry outside the trees was written")
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(s.into, lib, "usr/sbin/helper"), &st); err != nil || int(st.Uid) != os.Geteuid() || st.Mtim.Sec != 1700000000 {
		t.Errorf("helper: uid %d mtime %d (err %v); want cutover's uid %d and the archive's time", st.Uid, st.Mtim.Sec, err, os.Geteuid())
	}
	if data, _ := os.ReadFile(filepath.Join(s.into, lib, "usr/sbin/helper2")); string(data) != "#!/bin/sh\n" {
		t.Errorf("the hard link was extracted as %q, want a copy of the file it names", data)
	}

	// Read into streams rather than files, the archive gives the same trees, and each
	// stream, extracted, the same files.
	streamed, _, err := staging.UnpackTrees(src, t.TempDir(), hostileTrees, p)
	if err != nil {
		t.Fatal(err)
	}
	for i, tr := range streamed {
		defer tr.Close()
		if !tr.Equal(trees[i]) || tr.Bytes != trees[i].Bytes || tr.Unread() {
			t.Errorf("UnpackTrees: %s = %+v, want %+v as unpacked", hostileTrees[i], tr.Entries, trees[i].Entries)
		}
		into := t.TempDir()
		var stream bytes.Buffer
		if _, err := staging.WriteTar(&stream, tr); err != nil {
			t.Fatal(err)
		}
		if out, err := runWithInput(&stream, "tar", "-x", "-p", "-f", "-", "-C", into); err != nil {
			t.Fatalf("tar: %v: %s", err, out)
		}
		if err := os.Chmod(into, 0o755); err != nil {
			t.Fatal(err)
		}
		got, err := staging.ReadTreeAt(into, ".", p)
		if err != nil || !got.Equal(trees[i]) {
			t.Errorf("the stream of %s extracted: %v, %+v; want the unpacked tree", hostileTrees[i], err, got)
		}
	}
}

// runWithInput runs argv with in as its standard input and returns its combined output.
func runWithInput(in io.Reader, argv ...string) ([]byte, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = in
	return cmd.CombinedOutput()
}

// TestReadTreeHostile reads directory sources that are not what they seem: each is refused
// with an error naming the entry, and reading changes nothing.
func TestReadTreeHostile(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		setup  func(t *testing.T, tree string)
		policy staging.Policy
		want   string
	}{
		{"tree root is a link", func(t *testing.T, tree string) {
			os.RemoveAll(tree)
			os.Symlink(outside, tree)
		}, defaultPolicy, "usr/lib/app/1.2.0: a symbolic link where a directory"},
		{"setuid", func(t *testing.T, tree string) { os.Chmod(filepath.Join(tree, "bin/app"), 0o755|os.ModeSetuid) }, defaultPolicy,
			"usr/lib/app/1.2.0/bin/app: setuid"},
		{"world-writable directory", func(t *testing.T, tree string) { os.Chmod(filepath.Join(tree, "bin"), 0o777) }, defaultPolicy,
			"usr/lib/app/1.2.0/bin: world-writable"},
		{"hard link", func(t *testing.T, tree string) {
			os.Link(filepath.Join(tree, "bin/app"), filepath.Join(tree, "bin/again"))
		}, defaultPolicy,
			"a hard link"},
		{"hard link to a file outside", func(t *testing.T, tree string) { os.Link(secret, filepath.Join(tree, "bin/secret")) }, defaultPolicy,
			"usr/lib/app/1.2.0/bin/secret: a hard link"},
		{"fifo", func(t *testing.T, tree string) { syscall.Mkfifo(filepath.Join(tree, "fifo"), 0o600) }, defaultPolicy,
			"usr/lib/app/1.2.0/fifo: a fifo"},
		{"too many files", func(t *testing.T, tree string) {
			for i := range 20 {
				os.WriteFile(filepath.Join(tree, fmt.Sprint(i)), nil, 0o644)
			}
		}, staging.Policy{MaxFiles: 10}, "max_files"},
		{"too large", func(t *testing.T, tree string) { os.WriteFile(filepath.Join(tree, "big"), make([]byte, 4096), 0o644) },
			staging.Policy{MaxBytes: 1000}, "usr/lib/app/1.2.0/big: its 4096 bytes"},
		{"too deep", func(t *testing.T, tree string) { os.MkdirAll(filepath.Join(tree, "a/b/c/d"), 0o755) },
			staging.Policy{MaxDepth: 3}, "usr/lib/app/1.2.0/a/b/c/d: 4 names deep"},
		{"file swapped for a link once listed", func(t *testing.T, tree string) {
			staging.SetTestHooks(t, func(name string) {
				if name == "usr/lib/app/1.2.0/bin/app" {
					p := filepath.Join(tree, "bin/app")
					os.Rename(p, p+".old")
					os.Symlink(secret, p)
				}
			}, nil)
		}, defaultPolicy, "usr/lib/app/1.2.0/bin/app: a symbolic link where a directory or a file is expected"},
		{"directory swapped for a link once listed", func(t *testing.T, tree string) {
			staging.SetTestHooks(t, func(name string) {
				if name == "usr/lib/app/1.2.0/bin" {
					p := filepath.Join(tree, "bin")
					os.Rename(p, p+".old")
					os.Symlink(outside, p)
				}
			}, nil)
		}, defaultPolicy, "usr/lib/app/1.2.0/bin: a symbolic link"},
		{"file mutated while read", func(t *testing.T, tree string) {
			staging.SetTestHooks(t, nil, func(name string) {
				if name == "usr/lib/app/1.2.0/bin/app" {
					f, _ := os.OpenFile(filepath.Join(tree, "bin/app"), os.O_WRONLY, 0)
					f.WriteAt([]byte("X"), 0)
					f.Close()
				}
			})
		}, defaultPolicy, "usr/lib/app/1.2.0/bin/app: changed while it was read"},
		{"file grown while read", func(t *testing.T, tree string) {
			staging.SetTestHooks(t, nil, func(name string) {
				if name == "usr/lib/app/1.2.0/bin/app" {
					f, _ := os.OpenFile(filepath.Join(tree, "bin/app"), os.O_WRONLY|os.O_APPEND, 0)
					f.WriteString("more")
					f.Close()
				}
			})
		}, defaultPolicy, "usr/lib/app/1.2.0/bin/app: changed while it was read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := t.TempDir()
			tree := filepath.Join(src, "usr/lib/app/1.2.0")
			if err := os.MkdirAll(filepath.Join(tree, "bin"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(tree, "bin/app"), []byte(strings.Repeat("app\n", 1000)), 0o755); err != nil {
				t.Fatal(err)
			}
			tt.setup(t, tree)
			before := upgradetest.TreeSum(t, "", outside)
			_, err := staging.ReadTreeAt(src, "usr/lib/app/1.2.0", tt.policy)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ReadTreeAt() = %v, want an error with %q", err, tt.want)
			}
			if upgradetest.TreeSum(t, "", outside) != before {
				t.Error("reading the tree changed what lies outside it")
			}
		})
	}
}

// TestSendRereadsFromDescriptors changes a directory source after it was read: a file
// swapped for a link, a file rewritten with its size and time kept, the tree's root swapped.
// The stream that would carry them fails naming the entry.
func TestSendRereadsFromDescriptors(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		change func(t *testing.T, tree string)
		want   string
	}{
		{"file swapped for a link", func(t *testing.T, tree string) {
			p := filepath.Join(tree, "usr/lib/libapp.so")
			os.Remove(p)
			os.Symlink(secret, p)
		}, "usr/lib/libapp.so: a symbolic link"},
		{"directory swapped for a link", func(t *testing.T, tree string) {
			p := filepath.Join(tree, "share/doc")
			os.Rename(p, p+".old")
			os.Symlink(outside, p)
		}, "share/doc/README: a symbolic link"},
		{"file rewritten, size and time kept", func(t *testing.T, tree string) {
			p := filepath.Join(tree, "etc/secret")
			fi, _ := os.Stat(p)
			os.WriteFile(p, []byte("KEY\n"), 0o600)
			os.Chtimes(p, fi.ModTime(), fi.ModTime())
		}, "etc/secret: changed since it was read and checksummed"},
		{"root swapped", func(t *testing.T, tree string) {
			os.Rename(tree, tree+".old")
			os.Mkdir(tree, 0o755)
		}, "replaced since it was read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tree := filepath.Join(t.TempDir(), "1.2.0")
			writeTree(t, tree)
			tr, err := staging.ReadTree(tree)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := staging.WriteTar(io.Discard, tr); err != nil {
				t.Fatalf("the unchanged tree: %v", err)
			}
			tt.change(t, tree)
			if _, err := staging.WriteTar(io.Discard, tr); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("WriteTar() of a changed source = %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// TestReadTreeSorted checks that a tree's entries come sorted by name whatever the order of
// the directory listing.
func TestReadTreeSorted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir)
	tr, err := staging.ReadTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !sort.SliceIsSorted(tr.Entries, func(i, j int) bool { return tr.Entries[i].Name < tr.Entries[j].Name }) {
		t.Error("the entries are not sorted")
	}
}
