package staging

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	"golang.org/x/sys/unix"
)

// writeTar writes entries of the tree t as a tar stream and returns the bytes of file
// contents it wrote. Files are read beneath the tree's root without following links, and each
// must be the file that was listed, with the checksum it had then: a file replaced, changed
// or swapped for a link since ReadTree ends the stream with an error.
func writeTar(w io.Writer, t *Tree, entries []Entry, progress Progress) (int64, error) {
	var sent int64
	var files *treeFiles
	tw := tar.NewWriter(w)
	now := time.Now().Truncate(time.Second)
	for _, e := range entries {
		if err := tw.WriteHeader(headerOf(e, now)); err != nil {
			return sent, err
		}
		if e.Kind != 'f' {
			continue
		}
		var err error
		switch {
		case t.offsets != nil:
			// A tree UnpackTrees wrote: its files are in its stream.
			err = t.copyEncoded(tw, e)
		case files == nil:
			if files, err = t.openFiles(); err != nil {
				return sent, err
			}
			defer files.close()
			fallthrough
		default:
			err = files.copy(tw, e)
		}
		if err != nil {
			return sent, fmt.Errorf("%s: %w", path.Join(t.name, e.Name), err)
		}
		sent += e.Size
		if progress != nil {
			progress(e.Size)
		}
	}
	return sent, tw.Close()
}

// treeFiles reads the files of a tree again, beneath its root.
type treeFiles struct {
	t    *Tree
	root int
	dirs dirCache
}

// openFiles opens the tree's root again and refuses a root that is no longer the directory
// that was read.
func (t *Tree) openFiles() (*treeFiles, error) {
	basefd, err := unix.Open(t.base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.base, err)
	}
	root, err := openDirBeneath(basefd, t.name)
	unix.Close(basefd)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(root, &st); err != nil || st.Dev != t.rootID.dev || st.Ino != t.rootID.ino {
		unix.Close(root)
		return nil, fmt.Errorf("%s: replaced since it was read", t.name)
	}
	return &treeFiles{t: t, root: root, dirs: dirCache{root: root}}, nil
}

func (f *treeFiles) close() {
	f.dirs.close()
	unix.Close(f.root)
}

// copy copies the file e to w from one descriptor, checksumming what it copies: the file must
// be the one ReadTree listed, unchanged, and its bytes must have the manifest's checksum.
func (f *treeFiles) copy(w io.Writer, e Entry) error {
	dfd, err := f.dirs.open(path.Dir(e.Name))
	if err != nil {
		return err
	}
	fd, err := openAt(dfd, path.Base(e.Name), unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	file := os.NewFile(uintptr(fd), e.Name)
	defer file.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if id, ok := f.t.ids[e.Name]; !ok || idOf(&st) != id || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return errors.New("changed since it was read and checksummed: it is not staged")
	}
	h := sha256.New()
	if err := copyExactly(io.MultiWriter(w, h), file, e.Size); err != nil {
		return err
	}
	if hex.EncodeToString(h.Sum(nil)) != e.Sum {
		return errors.New("changed since it was read and checksummed: it is not staged")
	}
	return nil
}
