package demoapp

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestRelease checks that a release tarball holds exactly the trees Stage installs for the
// version, under their real paths, and that bad versions are refused.
func TestRelease(t *testing.T) {
	var buf bytes.Buffer
	if err := Release(&buf, testBins, "1.2.0"); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	zr, err := gzip.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		got[h.Name] = os.FileMode(h.Mode).String() + " " + string(data[:min(len(data), 8)])
	}

	root := t.TempDir()
	if err := Stage(root, testBins, NodeSpec{Name: "node1", Master: "node1", Nodes: demoNodes, Versions: []string{"1.2.0"}, Live: "1.2.0"}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, top := range []string{"usr/lib/demoapp/1.2.0", "usr/share/demoapp/1.2.0"} {
		err := filepath.Walk(filepath.Join(root, top), func(p string, info os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			name, _ := filepath.Rel(root, p)
			data := []byte{}
			if info.IsDir() {
				name += "/"
			} else if data, err = os.ReadFile(p); err != nil {
				return err
			}
			want[filepath.ToSlash(name)] = info.Mode().Perm().String() + " " + string(data[:min(len(data), 8)])
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != len(want) {
		t.Errorf("the release has %d entries, want %d: %v", len(got), len(want), got)
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %q, want %q", name, got[name], w)
		}
	}

	for _, v := range []string{"1.3.0", "../1.0.0", ""} {
		if err := Release(io.Discard, testBins, v); err == nil {
			t.Errorf("Release(%q): err = nil", v)
		}
	}
}
