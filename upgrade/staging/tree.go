// Package staging puts a version's trees on the nodes ahead of a switch (cutover stage): it
// reads a tree from a directory or a .tar.gz, describes it by a manifest of every entry with
// the SHA-256 of every file, and copies it to a node into a hidden temporary directory beside
// its final place, sending only the files the node does not already hold, checking every
// entry on the node against the manifest and only then renaming the directory into place.
//
// The copy is a tar stream over one plain command per node (tar on the node extracts it), so
// it works whether or not the node's sshd has an SFTP subsystem, and costs one session per
// node whatever the number of files. The package does not import upgrade.
package staging

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Entry is one entry of a tree: a directory, a regular file or a symbolic link.
type Entry struct {
	Name   string      // slash-separated path relative to the tree's root, never "." or with ".."
	Kind   byte        // 'd' directory, 'f' regular file, 'l' symbolic link
	Mode   fs.FileMode // permission bits, setuid, setgid and sticky included (not for links)
	Size   int64       // a file's size
	MTime  int64       // a file's modification time, Unix nanoseconds; the copy on a node keeps it
	Sum    string      // a file's SHA-256, hex
	Target string      // a link's target, as stored
}

// Tree is a local directory tree to stage and its manifest, sorted by name, so that a
// directory comes before what it holds.
type Tree struct {
	Dir     string
	Mode    fs.FileMode // the root directory's mode
	Entries []Entry
	Bytes   int64 // the sum of the files' sizes
}

// modeBits are the mode bits a tree's entries keep.
const modeBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// ReadTree describes the tree at dir, which must be a directory (a link to one is followed
// once). Entries other than directories, regular files and symbolic links are refused,
// naming them, as are names that a shell line or the manifest cannot carry (control
// characters).
func ReadTree(dir string) (*Tree, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	t := &Tree{Dir: dir, Mode: fi.Mode() & modeBits}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		if strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return fmt.Errorf("%s: a control character in the name", p)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := Entry{Name: name, Mode: info.Mode() & modeBits}
		switch {
		case info.IsDir():
			e.Kind = 'd'
		case info.Mode().IsRegular():
			e.Kind, e.Size, e.MTime = 'f', info.Size(), info.ModTime().UnixNano()
			if e.Sum, err = fileSum(p); err != nil {
				return err
			}
			t.Bytes += e.Size
		case info.Mode()&fs.ModeSymlink != 0:
			e.Kind, e.Mode = 'l', 0o777
			if e.Target, err = os.Readlink(p); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s is %s: a version tree holds directories, files and links only", p, info.Mode().Type())
		}
		t.Entries = append(t.Entries, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	sort.Slice(t.Entries, func(i, j int) bool { return t.Entries[i].Name < t.Entries[j].Name })
	return t, nil
}

// fileSum returns the SHA-256 of a file, hex.
func fileSum(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Equal reports whether two trees have the same entries.
func (t *Tree) Equal(o *Tree) bool {
	if len(t.Entries) != len(o.Entries) {
		return false
	}
	if t.Mode != o.Mode {
		return false
	}
	for i := range t.Entries {
		if t.Entries[i] != o.Entries[i] {
			return false
		}
	}
	return true
}
