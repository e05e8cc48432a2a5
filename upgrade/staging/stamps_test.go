package staging_test

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/staging"
	"golang.org/x/sys/unix"
)

// noSums is a node connection that refuses to checksum: a Compare through it that succeeds
// judged the tree without reading its files.
type noSums struct{ staging.Conn }

var errChecksummed = errors.New("the files were checksummed")

func (c noSums) Run(ctx context.Context, argv ...string) (nodes.Result, error) {
	if slices.Contains(argv, staging.SumsScript) {
		return nodes.Result{}, errChecksummed
	}
	return c.Conn.Run(ctx, argv...)
}

func (c noSums) RunInput(ctx context.Context, in io.Reader, argv ...string) (nodes.Result, error) {
	if slices.Contains(argv, staging.SumsScript) {
		return nodes.Result{}, errChecksummed
	}
	return c.Conn.RunInput(ctx, in, argv...)
}

// sourceTree writes the test tree (writeTree) and reads it as a source.
func sourceTree(t *testing.T) *staging.Tree {
	t.Helper()
	src := t.TempDir()
	writeTree(t, src)
	tree, err := staging.ReadTree(src)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// stageOn sends and places tree on the target, and checks that Compare finds it Same without
// checksumming it.
func stageOn(t *testing.T, tg target, tree *staging.Tree) {
	t.Helper()
	ctx := context.Background()
	sent, err := staging.Send(ctx, tg.conn, tree, tg.final, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := staging.Place(ctx, tg.conn, tree, tg.final, sent); err != nil {
		t.Fatal(err)
	}
	if st, err := staging.Compare(ctx, noSums{tg.conn}, tree, tg.final); st != staging.Same || err != nil {
		t.Fatalf("Compare of the placed tree = %v, %v; want Same, without checksums", st, err)
	}
}

// TestCompareByStamps places a tree on each kind of node and compares it again: while every
// file keeps the stamp its manifest records, Compare finds the tree Same without checksumming
// it; a file rewritten with the same bytes, size and times, a manifest without stamps or with
// stamps that are not the files' make Compare checksum every file, and find the tree
// Unrecorded (its contents are the tree's) until Record writes the manifest anew; other bytes
// behind the same size and times differ.
func TestCompareByStamps(t *testing.T) {
	t.Parallel()
	tree := sourceTree(t)
	stamp := regexp.MustCompile(`"stamp":"[0-9:.]*"`)
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			stageOn(t, tg, tree)
			manifest := staging.ManifestPath(tg.final)
			editManifest := func(edit func(string) string) func() error {
				return func() error {
					data, err := os.ReadFile(manifest)
					if err != nil {
						return err
					}
					return os.WriteFile(manifest, []byte(edit(string(data))), 0o644)
				}
			}
			for _, tc := range []struct {
				name  string
				alter func() error
				want  staging.State
			}{
				{name: "same bytes rewritten", want: staging.Unrecorded,
					alter: func() error { return rewriteKeepTime(filepath.Join(tg.final, "share/doc/README"), "read me\n") }},
				{name: "manifest without stamps", want: staging.Unrecorded,
					alter: editManifest(func(s string) string { return stamp.ReplaceAllString(s, `"x":0`) })},
				{name: "stamps not the files'", want: staging.Unrecorded,
					alter: editManifest(func(s string) string { return stamp.ReplaceAllString(s, `"stamp":"1:2:3.4"`) })},
				{name: "other bytes, same size and times", want: staging.Differs,
					alter: func() error { return rewriteKeepTime(filepath.Join(tg.final, "share/doc/README"), "READ ME\n") }},
			} {
				if err := tc.alter(); err != nil {
					t.Fatal(err)
				}
				if tc.name == "manifest without stamps" {
					// Written by hand: drop the field, not only its value.
					if err := editManifest(func(s string) string { return strings.ReplaceAll(s, `,"x":0`, "") })(); err != nil {
						t.Fatal(err)
					}
				}
				if st, err := staging.Compare(ctx, noSums{tg.conn}, tree, tg.final); !errors.Is(err, errChecksummed) {
					t.Errorf("%s: Compare without checksums = %v, %v; want it to checksum", tc.name, st, err)
				}
				st, err := staging.Compare(ctx, tg.conn, tree, tg.final)
				if st != tc.want || (tc.want == staging.Differs) != (err != nil) {
					t.Errorf("%s: Compare = %v, %v; want %v", tc.name, st, err, tc.want)
				}
				if tc.want == staging.Differs {
					continue
				}
				if err := staging.Record(ctx, tg.conn, tree, tg.final, tg.final); err != nil {
					t.Fatal(err)
				}
				if st, err := staging.Compare(ctx, noSums{tg.conn}, tree, tg.final); st != staging.Same || err != nil {
					t.Errorf("%s: Compare after Record = %v, %v; want Same, without checksums", tc.name, st, err)
				}
			}
		})
	}
}

// TestManifestCutShort gives the scripts that write a manifest less than its announced
// length, as when cutover is killed while the manifest is on its way: nothing is put in
// place, neither the manifest nor the tree.
func TestManifestCutShort(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			tmp := staging.TempDir(tg.final)
			if err := os.MkdirAll(tmp, 0o700); err != nil {
				t.Fatal(err)
			}
			manifest := staging.ManifestPath(tg.final)
			for _, tc := range []struct {
				name string
				argv []string
			}{
				{"write the manifest", []string{"sh", "-c", staging.WriteManifestScript, "cutover-stage", manifest, "100"}},
				{"send the manifest to place", []string{"sh", "-c", staging.PlaceScript, "cutover-stage", tmp, tg.final, "0755", manifest, strings.Repeat("0", 64), "100"}},
			} {
				_, err := tg.conn.RunInput(ctx, strings.NewReader(`{"format": 1`), tc.argv...)
				if err == nil || !strings.Contains(err.Error(), "cut short") {
					t.Errorf("%s: err = %v, want the manifest refused as cut short", tc.name, err)
				}
				mt := filepath.Join(filepath.Dir(manifest), "."+filepath.Base(manifest)+".tmp")
				for _, p := range []string{manifest, mt, tg.final} {
					if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("%s: %s is there: %v", tc.name, p, err)
					}
				}
				if fi, err := os.Lstat(tmp); err != nil || !fi.IsDir() {
					t.Errorf("%s: the temporary directory: %v", tc.name, err)
				}
			}
		})
	}
}

// TestPlaceRefusesChanged changes the node's temporary directory between Send and Place: a
// file rewritten with the same bytes, size and times, an extra file. Place refuses it, naming
// the directory, and puts nothing in place; a new Send checks it again and Place then puts it
// in place.
func TestPlaceRefusesChanged(t *testing.T) {
	t.Parallel()
	tree := sourceTree(t)
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			tmp := staging.TempDir(tg.final)
			for _, change := range []func() error{
				func() error { return rewriteKeepTime(filepath.Join(tmp, "share/doc/README"), "read me\n") },
				func() error { return os.WriteFile(filepath.Join(tmp, "usr/extra"), nil, 0o644) },
			} {
				sent, err := staging.Send(ctx, tg.conn, tree, tg.final, nil)
				if err != nil {
					t.Fatal(err)
				}
				if err := change(); err != nil {
					t.Fatal(err)
				}
				err = staging.Place(ctx, tg.conn, tree, tg.final, sent)
				if err == nil || !strings.Contains(err.Error(), tmp+" changed since it was checked") {
					t.Errorf("Place of a changed directory: err = %v, want a refusal naming %s", err, tmp)
				}
				for _, p := range []string{tg.final, staging.ManifestPath(tg.final)} {
					if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("%s is there after a refused Place: %v", p, err)
					}
				}
			}
			stageOn(t, tg, tree)
		})
	}
}

// TestSendTempDirNotADirectory puts a link to another directory, and a file, where the node's
// temporary directory belongs: Send refuses it, naming it, and writes nothing through the link.
func TestSendTempDirNotADirectory(t *testing.T) {
	t.Parallel()
	tree := sourceTree(t)
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			tmp := staging.TempDir(tg.final)
			outside := filepath.Join(filepath.Dir(tmp), "outside")
			if err := os.MkdirAll(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				name string
				make func() error
			}{
				{"a link to a directory", func() error { return os.Symlink(outside, tmp) }},
				{"a file", func() error { return os.WriteFile(tmp, nil, 0o644) }},
			} {
				if err := tc.make(); err != nil {
					t.Fatal(err)
				}
				_, err := staging.Send(ctx, tg.conn, tree, tg.final, nil)
				if err == nil || !strings.Contains(err.Error(), tmp+" is not a directory") {
					t.Errorf("%s: Send = %v, want a refusal naming %s", tc.name, err, tmp)
				}
				if entries, err := os.ReadDir(outside); err != nil || len(entries) > 0 {
					t.Errorf("%s: the directory the link points to holds %d entries (%v), want none", tc.name, len(entries), err)
				}
				if err := os.Remove(tmp); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestCompareAll reads several trees of a node in one command: each is judged as Compare
// judges it alone, whatever the others hold (a placed tree, nothing, a manifest that is a
// link, a manifest that is not JSON).
func TestCompareAll(t *testing.T) {
	t.Parallel()
	tree := sourceTree(t)
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			stageOn(t, tg, tree)
			other := tg.final + "-other"
			if err := os.MkdirAll(other, 0o755); err != nil {
				t.Fatal(err)
			}
			trees, finals := []*staging.Tree{tree, tree, tree}, []string{tg.final, other + "/missing", tg.final}
			states, errs, err := staging.CompareAll(ctx, noSums{tg.conn}, trees, finals)
			if err != nil || !slices.Equal(states, []staging.State{staging.Same, staging.Missing, staging.Same}) || errors.Join(errs...) != nil {
				t.Errorf("CompareAll = %v, %v, %v; want Same, Missing, Same", states, errs, err)
			}
			// The second tree: a copy of the first whose manifest is a link, then one that is
			// not JSON.
			copied := other + "/copy"
			if out, err := exec.Command("cp", "-a", tg.final, copied).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v: %s", err, out)
			}
			if err := os.Symlink(staging.ManifestPath(tg.final), staging.ManifestPath(copied)); err != nil {
				t.Fatal(err)
			}
			finals = []string{copied, tg.final}
			for _, bad := range []string{"a link", "not JSON"} {
				states, errs, err = staging.CompareAll(ctx, tg.conn, trees[:2], finals)
				if err != nil || !slices.Equal(states, []staging.State{staging.Unrecorded, staging.Same}) || errors.Join(errs...) != nil {
					t.Errorf("a manifest %s: CompareAll = %v, %v, %v; want Unrecorded, Same", bad, states, errs, err)
				}
				os.Remove(staging.ManifestPath(copied))
				if err := os.WriteFile(staging.ManifestPath(copied), []byte("=manifest\x00{"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// ownSessions is a node connection that counts the commands run in sessions of their own.
type ownSessions struct {
	staging.Conn
	n *int
}

func (c ownSessions) RunOutputOwnSession(ctx context.Context, out io.Writer, argv ...string) (nodes.Result, error) {
	*c.n++
	return c.Conn.RunOutput(ctx, out, argv...)
}

// TestReadFinalsLinks reads, in the command that reads the trees, what is at each link asked
// for: a link's target exactly as stored (relative, with a newline, dangling), never followed;
// something that is no link; nothing. A relative path is refused, and the command runs in a
// session of its own where the connection can.
func TestReadFinalsLinks(t *testing.T) {
	t.Parallel()
	tree := sourceTree(t)
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			stageOn(t, tg, tree)
			dir := filepath.Dir(tg.final)
			links := map[string]string{"rel": "1.2.0", "newline": "a\nb", "dangling": "/nonexistent/x"}
			var paths []string
			want := []staging.Link{}
			for _, name := range []string{"rel", "newline", "dangling"} {
				p := filepath.Join(dir, "link-"+name)
				if err := os.Symlink(links[name], p); err != nil {
					t.Fatal(err)
				}
				paths = append(paths, p)
				want = append(want, staging.Link{Exists: true, IsLink: true, Target: links[name]})
			}
			paths = append(paths, tg.final, filepath.Join(dir, "missing"))
			want = append(want, staging.Link{Exists: true}, staging.Link{})
			n := 0
			f, err := staging.ReadFinals(ctx, ownSessions{tg.conn, &n}, []string{tg.final}, paths)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(f.Links, want) || n != 1 {
				t.Errorf("ReadFinals read links %+v in %d sessions of their own, want %+v in 1", f.Links, n, want)
			}
			if states, errs := f.Compare(ctx, noSums{tg.conn}, []*staging.Tree{tree}); !slices.Equal(states, []staging.State{staging.Same}) || errors.Join(errs...) != nil {
				t.Errorf("Compare after the links = %v, %v; want Same", states, errs)
			}
			if _, err := staging.ReadFinals(ctx, tg.conn, []string{tg.final}, []string{"relative/link"}); err == nil {
				t.Error("ReadFinals read a relative link")
			}
			// Where nothing is at a tree's place, the reading says the room of the file
			// system of its nearest existing parent, and creates nothing.
			if _, ok := f.Free(0); ok {
				t.Error("ReadFinals read the free space where a tree is")
			}
			missing := filepath.Join(dir, "new/usr/lib/app/1.2.0")
			f, err = staging.ReadFinals(ctx, tg.conn, []string{tg.final, missing}, nil)
			if err != nil {
				t.Fatal(err)
			}
			var st unix.Statfs_t
			if err := unix.Statfs(dir, &st); err != nil {
				t.Fatal(err)
			}
			kb, ok := f.Free(1)
			if total := int64(st.Blocks) * st.Bsize / 1024; !ok || kb <= 0 || kb > total {
				t.Errorf("the free space where nothing is: %d kB (%v), want some of the file system's %d kB", kb, ok, total)
			}
			if _, err := os.Stat(filepath.Join(dir, "new")); !os.IsNotExist(err) {
				t.Errorf("ReadFinals created %s: %v", filepath.Join(dir, "new"), err)
			}
		})
	}
}
