package staging

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Archive is a .tar.gz source as Unpack read it: its stamp and its SHA-256, when both of
// Unpack's readings read the same bytes of a file that kept its stamp. Keep adds the trees
// read from what Unpack extracted, and SaveStamps keeps it all for the next stage
// (ArchiveTrees).
type Archive struct {
	rec  *archiveRec // nil when the archive changed while it was read
	made *Stamps     // the files Unpack wrote
}

// Written returns the stamps and checksums of the files Unpack wrote, for ReadTrees of what
// it unpacked: the files need not be read again. They are Unpack's own, made moments ago
// (O_EXCL) in a directory nobody else writes in, their checksums those of the bytes written,
// so they are trusted however recent (never kept: SaveStamps keeps the archive's). Send still
// reads every file again and refuses one whose checksum is not the manifest's.
func (a *Archive) Written() *Stamps {
	if a == nil {
		return nil
	}
	return a.made
}

// create creates the file name, an archive name, of size bytes read from r, as createFile
// does, and records its stamp and checksum in x.made.
func (x *extractor) create(dirfd int, name string, mode fs.FileMode, mtime int64, r io.Reader, size int64) error {
	h := sha256.New()
	var st unix.Stat_t
	fill := func(w io.Writer) error { return copyExactly(io.MultiWriter(w, h), r, size) }
	if err := createFile(dirfd, path.Base(name), mode, mtime, fill, &st); err != nil {
		return err
	}
	tree, rel, _ := x.where(name)
	x.made.files[stampKey{tree, rel}] = stampRec{Stamp: stampOf(idOf(&st)), SHA256: hex.EncodeToString(h.Sum(nil))}
	return nil
}

// Keep records trees, read (ReadTrees) with the policy p from what Unpack extracted of the
// archive's trees names, as the archive's.
func (a *Archive) Keep(trees []*Tree, names []string, p Policy) {
	if a == nil || a.rec == nil {
		return
	}
	a.rec.Key = archiveKey(names, p)
	a.rec.Trees = nil
	for _, t := range trees {
		a.rec.Trees = append(a.rec.Trees, treeRec{Name: t.name, Mode: uint32(tarMode(t.Mode)), Entries: t.Entries})
	}
}

// ArchiveTrees returns the trees names of the .tar.gz at path, read with the policy p, as
// the stamps hold them, when the archive is the one they were read from: an archive that
// keeps its stamp is not read at all; one whose stamp changed is read once for its SHA-256,
// which must be the one recorded. The trees are not read from anything (Tree.Unread): to send
// them, unpack the archive and read them. The Archive returned is what SaveStamps is to keep
// of it now (with the new stamp), nil when the archive was judged by its stamp.
func (s *Stamps) ArchiveTrees(path string, names []string, p Policy) ([]*Tree, *Archive, bool) {
	a := s.archive
	if a == nil || a.Key != archiveKey(names, p) || len(a.Trees) != len(names) {
		return nil, nil, false
	}
	taken := stampNow()
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, false
	}
	defer f.Close()
	id, err := regularID(f)
	if err != nil {
		return nil, nil, false
	}
	var again *Archive
	if a.Stamp == (fileStamp{}) || stampOf(id) != a.Stamp {
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil || hex.EncodeToString(h.Sum(nil)) != a.SHA256 {
			return nil, nil, false
		}
		rec := *a
		rec.Stamp = keptStamp(f, id, taken)
		again = &Archive{rec: &rec}
	}
	var trees []*Tree
	for i, name := range names {
		r := a.Trees[i]
		if r.Name != name {
			return nil, nil, false
		}
		t := &Tree{Dir: filepath.Join(path, filepath.FromSlash(name)), Mode: unixPerm(r.Mode), Entries: r.Entries, name: name}
		for _, e := range r.Entries {
			t.Bytes += e.Size
		}
		trees = append(trees, t)
	}
	return trees, again, true
}

// Unread reports whether the tree was not read from a directory but taken from the stamps
// of an unchanged archive (Stamps.ArchiveTrees): it cannot be sent.
func (t *Tree) Unread() bool { return t.base == "" && t.offsets == nil }

// regularID returns the identity of the open file f, which must be a regular file.
func regularID(f *os.File) (fileID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fileID{}, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fileID{}, fmt.Errorf("%s is not a regular file", f.Name())
	}
	return idOf(&st), nil
}

// keptStamp is the stamp to keep of the file f, identified as id when the reading that
// began at taken began: none (the zero stamp, which no file has) when the stamp is racy or
// the file changed since.
func keptStamp(f *os.File, id fileID, taken time.Time) fileStamp {
	now, err := regularID(f)
	if err != nil || now != id || stampOf(id).racy(taken) {
		return fileStamp{}
	}
	return stampOf(id)
}

// archiveReading follows Unpack's readings of an archive: the SHA-256 of each reading.
type archiveReading struct {
	f      *os.File
	id     fileID
	taken  time.Time
	hashes []hash.Hash
}

func newArchiveReading(f *os.File) (*archiveReading, error) {
	taken := stampNow()
	id, err := regularID(f)
	if err != nil {
		return nil, err
	}
	return &archiveReading{f: f, id: id, taken: taken}, nil
}

// reader returns the reader of a new reading of the archive from its start.
func (r *archiveReading) reader() (io.Reader, error) {
	if _, err := r.f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	h := sha256.New()
	r.hashes = append(r.hashes, h)
	// Buffered, and a ByteReader, so that gzip reads the file in large blocks rather than
	// through a buffer of its own of 4 KiB: a tenth of the system calls.
	return bufio.NewReaderSize(io.TeeReader(r.f, h), tarBuffer), nil
}

// finish reads the rest of the archive past what the reading took, into its checksum.
func (r *archiveReading) finish() error {
	_, err := io.Copy(r.hashes[len(r.hashes)-1], r.f)
	return err
}

// archive is what the readings found: an Archive to keep, when every reading read the same
// bytes and the file kept its identity.
func (r *archiveReading) archive() *Archive {
	var sum string
	for i, h := range r.hashes {
		s := hex.EncodeToString(h.Sum(nil))
		if i > 0 && s != sum {
			return &Archive{}
		}
		sum = s
	}
	if now, err := regularID(r.f); err != nil || now != r.id {
		return &Archive{}
	}
	return &Archive{rec: &archiveRec{Stamp: keptStamp(r.f, r.id, r.taken), SHA256: sum}}
}

// checkFree refuses to unpack bytes in files entries into dir when its file system has less
// room, with a tenth more and a block per entry for directories and metadata.
func checkFree(dir string, bytes int64, files int) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("free space of %s: %w", dir, err)
	}
	need := uint64(bytes) + uint64(bytes)/10 + uint64(files)*4096
	if free := st.Bavail * uint64(st.Bsize); free < need {
		return fmt.Errorf("the archive unpacks to %d bytes in %d entries, and the file system of %s has %d bytes free: free some space or stage from a directory", bytes, files, filepath.Dir(dir), free)
	}
	if st.Files > 0 && st.Ffree < uint64(files) {
		return fmt.Errorf("the archive holds %d entries, and the file system of %s has %d free inodes", files, filepath.Dir(dir), st.Ffree)
	}
	return nil
}
