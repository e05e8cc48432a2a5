package backup

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// FuzzVerify feeds the archive reader arbitrary bytes, seeded with the hostile corpus and a
// real backup: it must never panic, and whatever it accepts must hold only what a restore
// may write (clean paths in the roots, each after its directory, links the scope allows).
// `go test` runs the seeds; `go test -fuzz FuzzVerify` searches further.
func FuzzVerify(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "hostile", "*.tar.gz"))
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	// A backup as Write makes it: two gzip members.
	fx := newFixture(f)
	if p, _, err := fx.tryBackup(); err == nil {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	sc := testScope("")
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := Verify(context.Background(), bytes.NewReader(data), sc)
		if err != nil {
			return
		}
		dirs := map[string]bool{}
		for _, e := range a.Manifest().Entries {
			if !cleanAbs(e.Path) || sc.rootOf(e.Path) == "" {
				t.Fatalf("accepted %q, outside the roots", e.Path)
			}
			if !sc.isRoot(e.Path) && !dirs[dirOf(e.Path)] {
				t.Fatalf("accepted %s before its directory", e.Path)
			}
			switch e.Type {
			case TypeDir:
				dirs[e.Path] = true
			case TypeSymlink:
				if err := sc.CheckLink(e.Path, e.Link); err != nil {
					t.Fatalf("accepted a link the scope refuses: %v", err)
				}
			case TypeFile:
			default:
				t.Fatalf("accepted %s of type %q", e.Path, e.Type)
			}
		}
	})
}
