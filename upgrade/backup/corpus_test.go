package backup

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/hostile from the corpus table")

// corpusEntry is one tar entry of a crafted archive, its content included.
type corpusEntry struct {
	hdr  tar.Header
	data []byte
}

// craft is a crafted archive: a manifest (nil: none) and the entries after it.
type craft struct {
	m       *Manifest
	raw     []byte // a manifest's bytes, instead of m
	entries []corpusEntry
}

// goodCraft is a valid archive of testScope: the state's config file and the switch links.
func goodCraft() craft {
	config := []byte(`{"version": "1.0.0"}` + "\n")
	sum := sha256.Sum256(config)
	mtime := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m := Manifest{
		Format: Format, Kind: KindSwitch, App: "app", Run: 1, From: "1.0.0", To: "1.1.0", Created: mtime,
		Roots: []string{"/var/lib/app", "/etc/app"},
		Links: map[string]string{"/etc/app/lib": "/usr/lib/app/1.0.0", "/etc/app/share": "/usr/share/app/1.0.0"},
		Entries: []Entry{
			{Path: "/var/lib/app", Type: TypeDir, Mode: 0o755, ModTime: mtime.Unix()},
			{Path: "/var/lib/app/config.json", Type: TypeFile, Mode: 0o600, ModTime: mtime.Unix(), Size: int64(len(config)), SHA256: hex.EncodeToString(sum[:])},
			{Path: "/etc/app", Type: TypeDir, Mode: 0o755, ModTime: mtime.Unix()},
			{Path: "/etc/app/lib", Type: TypeSymlink, Mode: 0o777, ModTime: mtime.Unix(), Link: "/usr/lib/app/1.0.0"},
			{Path: "/etc/app/share", Type: TypeSymlink, Mode: 0o777, ModTime: mtime.Unix(), Link: "/usr/share/app/1.0.0"},
		},
		Skipped: []Skipped{},
	}
	c := craft{m: &m}
	for _, e := range m.Entries {
		var data []byte
		if e.Type == TypeFile {
			data = config
		}
		c.entries = append(c.entries, corpusEntry{*header(e), data})
	}
	return c
}

// add appends an entry to both the manifest and the archive.
func (c *craft) add(e Entry, data []byte) {
	if e.Type == TypeFile {
		sum := sha256.Sum256(data)
		e.Size, e.SHA256 = int64(len(data)), hex.EncodeToString(sum[:])
	}
	c.m.Entries = append(c.m.Entries, e)
	c.entries = append(c.entries, corpusEntry{*header(e), data})
}

// entry returns the archive entry (not the manifest's) named p.
func (c *craft) entry(p string) *corpusEntry {
	for i := range c.entries {
		if strings.TrimSuffix(c.entries[i].hdr.Name, "/") == strings.TrimPrefix(p, "/") {
			return &c.entries[i]
		}
	}
	panic("no entry " + p)
}

// manifestEntry returns the manifest's entry named p.
func (c *craft) manifestEntry(p string) *Entry {
	i := slices.IndexFunc(c.m.Entries, func(e Entry) bool { return e.Path == p })
	return &c.m.Entries[i]
}

// bytes is the archive, gzip-compressed.
func (c craft) bytes(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	if c.m != nil || c.raw != nil {
		data := c.raw
		if data == nil {
			var err error
			if data, err = json.MarshalIndent(c.m, "", "  "); err != nil {
				t.Fatal(err)
			}
		}
		if err := tw.WriteHeader(&tar.Header{Name: ManifestName, Mode: 0o600, Size: int64(len(data)), Typeflag: tar.TypeReg, ModTime: time.Unix(1767323045, 0)}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range c.entries {
		hdr := e.hdr
		if hdr.Typeflag == tar.TypeReg {
			hdr.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(&hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// corpus are the crafted archives of testdata/hostile: each refused with the error it names,
// but good, which restores.
var corpus = []struct {
	name  string
	craft func(t *testing.T) []byte
	want  string
}{
	{"good", func(t *testing.T) []byte { return goodCraft().bytes(t) }, ""},
	{"dot-dot", func(t *testing.T) []byte {
		c := goodCraft()
		c.entry("/var/lib/app/config.json").hdr.Name = "var/lib/app/../../../etc/passwd"
		return c.bytes(t)
	}, `entry "var/lib/app/../../../etc/passwd" is not a clean relative path`},
	{"absolute", func(t *testing.T) []byte {
		c := goodCraft()
		c.entry("/var/lib/app/config.json").hdr.Name = "/etc/cron.d/evil"
		return c.bytes(t)
	}, `entry "/etc/cron.d/evil" is not a clean relative path`},
	{"duplicate-entry", func(t *testing.T) []byte {
		c := goodCraft()
		c.entries = append(c.entries, *c.entry("/var/lib/app/config.json"))
		return c.bytes(t)
	}, "the archive holds /var/lib/app/config.json twice"},
	{"duplicate-in-manifest", func(t *testing.T) []byte {
		c := goodCraft()
		c.m.Entries = append(c.m.Entries, *c.manifestEntry("/var/lib/app/config.json"))
		return c.bytes(t)
	}, "the manifest names /var/lib/app/config.json twice"},
	{"hard-link", func(t *testing.T) []byte {
		c := goodCraft()
		c.entries = append(c.entries, corpusEntry{tar.Header{Name: "var/lib/app/passwd", Typeflag: tar.TypeLink, Linkname: "etc/passwd", Mode: 0o644}, nil})
		return c.bytes(t)
	}, `/var/lib/app/passwd is a hard link to "etc/passwd"`},
	{"device", func(t *testing.T) []byte {
		c := goodCraft()
		c.entries = append(c.entries, corpusEntry{tar.Header{Name: "var/lib/app/mem", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 1, Mode: 0o666}, nil})
		return c.bytes(t)
	}, "/var/lib/app/mem is a device"},
	{"fifo", func(t *testing.T) []byte {
		c := goodCraft()
		c.entries = append(c.entries, corpusEntry{tar.Header{Name: "var/lib/app/pipe", Typeflag: tar.TypeFifo, Mode: 0o666}, nil})
		return c.bytes(t)
	}, "/var/lib/app/pipe is a fifo"},
	{"setuid-not-in-manifest", func(t *testing.T) []byte {
		c := goodCraft()
		c.entries = append(c.entries, corpusEntry{tar.Header{Name: "var/lib/app/sh", Typeflag: tar.TypeReg, Mode: 0o4755}, []byte("#!/bin/sh\n")})
		return c.bytes(t)
	}, "/var/lib/app/sh is in the archive but not in its manifest"},
	{"setuid-mode-lies", func(t *testing.T) []byte {
		c := goodCraft()
		c.entry("/var/lib/app/config.json").hdr.Mode = 0o4755
		return c.bytes(t)
	}, "/var/lib/app/config.json: mode 4755 in the archive, 0600 in the manifest"},
	{"owner-lies", func(t *testing.T) []byte {
		c := goodCraft()
		c.entry("/var/lib/app/config.json").hdr.Uid = 4242
		return c.bytes(t)
	}, "/var/lib/app/config.json: owner 4242:0 in the archive, 0:0 in the manifest"},
	{"type-lies", func(t *testing.T) []byte {
		c := goodCraft()
		e := c.entry("/etc/app/lib")
		e.hdr.Typeflag, e.hdr.Linkname, e.data = tar.TypeReg, "", []byte("x")
		return c.bytes(t)
	}, "/etc/app/lib: a file in the archive, a symlink in the manifest"},
	{"root-not-a-directory", func(t *testing.T) []byte {
		c := goodCraft()
		c.manifestEntry("/etc/app").Type = TypeFile
		return c.bytes(t)
	}, "/etc/app is a file in the manifest, but it is a directory backed up"},
	{"switch-link-to-root", func(t *testing.T) []byte {
		c := goodCraft()
		c.entry("/etc/app/lib").hdr.Linkname = "/"
		c.manifestEntry("/etc/app/lib").Link = "/"
		c.m.Links["/etc/app/lib"] = "/"
		return c.bytes(t)
	}, "/etc/app/lib -> /: a switch link must point at a version tree of this application"},
	{"switch-link-elsewhere", func(t *testing.T) []byte {
		c := goodCraft()
		c.entry("/etc/app/share").hdr.Linkname = "/usr/share/other/1.0.0"
		c.manifestEntry("/etc/app/share").Link = "/usr/share/other/1.0.0"
		c.m.Links["/etc/app/share"] = "/usr/share/other/1.0.0"
		return c.bytes(t)
	}, "/etc/app/share -> /usr/share/other/1.0.0: a switch link must point at a version tree"},
	{"link-to-root", func(t *testing.T) []byte {
		c := goodCraft()
		c.add(Entry{Path: "/var/lib/app/root", Type: TypeSymlink, Mode: 0o777, Link: "/"}, nil)
		return c.bytes(t)
	}, "/var/lib/app/root -> /: leads out of the directories backed up"},
	{"link-climbs-out", func(t *testing.T) []byte {
		c := goodCraft()
		c.add(Entry{Path: "/var/lib/app/up", Type: TypeSymlink, Mode: 0o777, Link: "../../../etc/shadow"}, nil)
		return c.bytes(t)
	}, "/var/lib/app/up -> ../../../etc/shadow: leads out of /var/lib/app"},
	{"link-through-name", func(t *testing.T) []byte {
		c := goodCraft()
		c.add(Entry{Path: "/var/lib/app/via", Type: TypeSymlink, Mode: 0o777, Link: "x/../../../../etc"}, nil)
		return c.bytes(t)
	}, "a '..' after a name"},
	{"link-target-lies", func(t *testing.T) []byte {
		c := goodCraft()
		c.entry("/etc/app/lib").hdr.Linkname = "/etc"
		return c.bytes(t)
	}, `/etc/app/lib: link target "/etc" in the archive, "/usr/lib/app/1.0.0" in the manifest`},
	{"manifest-links-lie", func(t *testing.T) []byte {
		c := goodCraft()
		c.m.Links["/etc/app/lib"] = "/usr/lib/app/1.1.0"
		return c.bytes(t)
	}, "link /etc/app/lib -> /usr/lib/app/1.1.0 of the manifest is not in the archive as such"},
	{"size-lies", func(t *testing.T) []byte {
		c := goodCraft()
		c.manifestEntry("/var/lib/app/config.json").Size = 5
		return c.bytes(t)
	}, "/var/lib/app/config.json: 21 bytes in the archive, 5 in the manifest"},
	{"sum-lies", func(t *testing.T) []byte {
		c := goodCraft()
		c.entry("/var/lib/app/config.json").data = []byte(`{"version": "6.6.6"}` + "\n")
		return c.bytes(t)
	}, "/var/lib/app/config.json: sha256 "},
	{"missing-entry", func(t *testing.T) []byte {
		c := goodCraft()
		c.entries = slices.DeleteFunc(c.entries, func(e corpusEntry) bool { return e.hdr.Name == "var/lib/app/config.json" })
		return c.bytes(t)
	}, "/var/lib/app/config.json: in the manifest but not in the archive"},
	{"outside-the-roots", func(t *testing.T) []byte {
		c := goodCraft()
		c.add(Entry{Path: "/usr/lib/app/1.0.0/evil", Type: TypeFile, Mode: 0o755}, []byte("evil"))
		return c.bytes(t)
	}, "/usr/lib/app/1.0.0/evil is outside /var/lib/app and /etc/app"},
	{"through-a-symlink", func(t *testing.T) []byte {
		c := goodCraft()
		c.add(Entry{Path: "/etc/app/lib/evil", Type: TypeFile, Mode: 0o755}, []byte("evil"))
		return c.bytes(t)
	}, "/etc/app/lib/evil: its directory is not a directory of the archive before it"},
	{"no-manifest", func(t *testing.T) []byte {
		c := goodCraft()
		c.m = nil
		return c.bytes(t)
	}, "not a backup archive: the first entry is"},
	{"manifest-not-json", func(t *testing.T) []byte {
		c := goodCraft()
		c.raw = []byte("{")
		return c.bytes(t)
	}, ManifestName + ": unexpected end of JSON input"},
	{"manifest-unknown-field", func(t *testing.T) []byte {
		c := goodCraft()
		c.raw = []byte(`{"format": 2, "kind": "switch", "app": "app", "owner_override": 0}`)
		return c.bytes(t)
	}, `unknown field "owner_override"`},
	{"manifest-format-1", func(t *testing.T) []byte {
		c := goodCraft()
		c.raw = []byte(`{"app": "app", "files": [{"path": "/var/lib/app/config.json", "size": 21, "mode": 384, "sha256": "00"}]}`)
		return c.bytes(t)
	}, "manifest format 1"},
	{"truncated-gzip", func(t *testing.T) []byte {
		data := goodCraft().bytes(t)
		return data[:len(data)*2/3]
	}, "unexpected EOF"},
	{"truncated-end", func(t *testing.T) []byte {
		data := goodCraft().bytes(t)
		return data[:len(data)-6]
	}, "unexpected EOF"},
	{"not-gzip", func(t *testing.T) []byte { return []byte("#!/bin/sh\nrm -rf /\n") }, "not a backup archive"},
}

// TestHostileCorpus restores every archive of testdata/hostile into a fixture: each is refused
// with its error, before anything is written, but good, which restores. -update rewrites
// the corpus from the table.
func TestHostileCorpus(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("testdata", "hostile")
	if *update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, c := range corpus {
			if err := os.WriteFile(filepath.Join(dir, c.name+".tar.gz"), c.craft(t), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.tar.gz"))
	if err != nil || len(files) != len(corpus) {
		t.Fatalf("testdata/hostile holds %d archives (%v), the table %d: run go test -run TestHostileCorpus -update", len(files), err, len(corpus))
	}
	for _, c := range corpus {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			p := filepath.Join(dir, c.name+".tar.gz")
			before := f.tree()
			written, err := f.restore(p)
			if c.want == "" {
				if err != nil || !written {
					t.Fatalf("restore %s = %v, %v; want it restored", c.name, written, err)
				}
				return
			}
			if err == nil || written || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("restore %s = %v, %v\nwant refused with %q, nothing written", c.name, written, err, c.want)
			}
			t.Logf("refused: %v", err)
			if after := f.tree(); after != before {
				t.Errorf("a refused restore changed files:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			// List --verify says the same.
			if err := os.MkdirAll(f.dir(), 0o700); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			name := "app-1.0.0-to-1.1.0-20260102T030405Z"
			if err := os.WriteFile(filepath.Join(f.dir(), name+".tar.gz"), data, 0o600); err != nil {
				t.Fatal(err)
			}
			list, err := List(context.Background(), f.dir(), "app", f.sc, true)
			if err != nil || len(list) != 1 || list[0].Verified || list[0].Problem == "" {
				t.Errorf("List --verify = %+v, %v; want the archive listed with its problem", list, err)
			}
		})
	}
}
