package staging

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Stamps are the stamps of a source's files as a stage last read them, each with the SHA-256
// the file had then, kept in cutover's state directory between stages so that a restage of
// an unchanged source reads nothing but its metadata, as git's index does for a work tree. A
// file's stamp is its device, inode, size, modification time and status-change time (ctime):
// the kernel sets a file's ctime anew at every write, truncation or chmod, and no call sets it
// back (unlike the modification time), so a file that keeps its stamp keeps its contents. A
// file whose stamp changed is read and checksummed again; one whose stamp holds is not even
// opened (ReadTrees).
//
// A stamp taken less than racyWindow after the file last changed is racy, as git's index
// calls it: the file could change again within the same tick of the file system's clock
// without its stamp changing, so such a stamp is never kept and the file is read again at the
// next stage. The stamp of the last .tar.gz staged is kept too, with its SHA-256 and the
// trees it held (ArchiveTrees), so that an unchanged archive is not read at all.
//
// The file is state, root's only: written 0600 (in the 0700 state directory) to a temporary
// file beside it, synced, renamed into place and the rename synced. A file at its place that
// is not a regular file (a link is never followed), is not owned by this user, is readable
// or writable by others, cannot be decoded or is of another format is ignored, never trusted:
// every file is then read and checksummed. The stamps only ever save work: Send reads every
// file it sends again and refuses one whose checksum is not the manifest's.
type Stamps struct {
	files   map[stampKey]stampRec
	archive *archiveRec
}

// racyWindow is how long after its last change a file's stamp is racy (see Stamps): a whole
// second as git has it, and one more for file systems that keep times in steps of two seconds.
const racyWindow = 2 * time.Second

// stampNow is the clock stamps are taken by; tests move it.
var stampNow = time.Now

// stampsFormat is the format the file's "format" names.
const stampsFormat = 1

// maxStamps bounds the file read: far more than the stamps of the largest trees [stage]
// allows take.
const maxStamps = 512 << 20

// stampKey names a file of a source: its tree's name beneath the source and its own beneath
// the tree.
type stampKey struct{ tree, name string }

// fileStamp is a file's stamp as the file keeps it.
type fileStamp struct {
	Dev   uint64 `json:"dev"`
	Ino   uint64 `json:"ino"`
	Size  int64  `json:"size"`
	MTime int64  `json:"mtime"` // Unix nanoseconds
	CTime int64  `json:"ctime"`
}

func stampOf(id fileID) fileStamp {
	return fileStamp{Dev: id.dev, Ino: id.ino, Size: id.size, MTime: id.mtime.Nano(), CTime: id.ctime.Nano()}
}

// racy reports whether the stamp was taken less than racyWindow after the file last changed.
func (s fileStamp) racy(taken time.Time) bool {
	limit := taken.Add(-racyWindow).UnixNano()
	return s.MTime >= limit || s.CTime >= limit
}

// stampRec is one file's stamp and checksum.
type stampRec struct {
	Tree   string `json:"tree"`
	Name   string `json:"name"`
	Stamp  fileStamp
	SHA256 string `json:"sha256"`
}

// archiveRec is a .tar.gz source as it was last unpacked: its stamp and SHA-256, what its
// trees were read for (key), and the trees.
type archiveRec struct {
	Stamp  fileStamp `json:"stamp"`
	SHA256 string    `json:"sha256"`
	Key    string    `json:"key"`
	Trees  []treeRec `json:"trees"`
}

// treeRec is a tree of an archive as ReadTrees described it.
type treeRec struct {
	Name    string  `json:"name"`
	Mode    uint32  `json:"mode"`
	Entries []Entry `json:"entries"`
}

// stampsFile is the file's JSON.
type stampsFile struct {
	Format  int         `json:"format"`
	Files   []stampRec  `json:"files"`
	Archive *archiveRec `json:"archive,omitempty"`
}

// LoadStamps reads the stamps kept at path. It always returns usable Stamps: empty ones when
// there is no file, or with an error saying why the file was ignored.
func LoadStamps(path string) (*Stamps, error) {
	s := &Stamps{files: map[stampKey]stampRec{}}
	data, err := readPrivate(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("the stamps of the last source staged, %s, are ignored: %w", path, err)
	}
	var f stampsFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err = dec.Decode(&f)
	if err == nil && dec.More() {
		err = errors.New("data after the stamps")
	}
	if err == nil {
		err = f.check()
	}
	if err != nil {
		return s, fmt.Errorf("the stamps of the last source staged, %s, are ignored: %w", path, err)
	}
	for _, r := range f.Files {
		s.files[stampKey{r.Tree, r.Name}] = r
	}
	s.archive = f.Archive
	return s, nil
}

// readPrivate reads path, which must be a regular file, not a link, owned by this user and
// neither readable nor writable by others, of at most maxStamps bytes.
func readPrivate(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, errors.New("a symbolic link, which cutover never writes there")
	case err != nil:
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, errors.New("not a regular file")
	case int(st.Uid) != os.Geteuid() || st.Mode&0o077 != 0:
		return nil, fmt.Errorf("owned by uid %d with mode %04o: only cutover's own 0600 file is trusted", st.Uid, st.Mode&0o7777)
	case st.Size > maxStamps:
		return nil, fmt.Errorf("larger than %d bytes", maxStamps)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxStamps+1))
	if err == nil && len(data) > maxStamps {
		err = fmt.Errorf("larger than %d bytes", maxStamps)
	}
	return data, err
}

// check refuses a file cutover did not write.
func (f *stampsFile) check() error {
	if f.Format != stampsFormat {
		return fmt.Errorf("format %d, want %d", f.Format, stampsFormat)
	}
	for _, r := range f.Files {
		if !validName(r.Tree) || !validName(r.Name) || !validSum(r.SHA256) || r.Stamp.Size < 0 {
			return fmt.Errorf("a bad record of %q", r.Name)
		}
	}
	if a := f.Archive; a != nil {
		if !validSum(a.SHA256) || !validSum(a.Key) {
			return errors.New("a bad record of the archive")
		}
		for _, t := range a.Trees {
			if err := t.check(); err != nil {
				return fmt.Errorf("the archive's tree %q: %w", t.Name, err)
			}
		}
	}
	return nil
}

// check refuses a tree no stage read.
func (t treeRec) check() error {
	if !validName(t.Name) || t.Mode&^0o7777 != 0 {
		return errors.New("a bad name or mode")
	}
	for i, e := range t.Entries {
		ok := validName(e.Name) && e.Name != "." && strings.IndexByte("dflpcb", e.Kind) >= 0 && e.Mode&^modeBits == 0 && e.Size >= 0
		if e.Kind == 'f' {
			ok = ok && validSum(e.Sum)
		}
		if i > 0 && t.Entries[i-1].Name >= e.Name {
			ok = false // sorted, each name once
		}
		if !ok {
			return fmt.Errorf("a bad entry %q", e.Name)
		}
	}
	return nil
}

// validName reports whether name is a clean relative slash-separated path without control
// characters.
func validName(name string) bool {
	return fs.ValidPath(name) && !strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// validSum reports whether s is a SHA-256 in lower-case hex.
func validSum(s string) bool {
	return len(s) == 64 && strings.Trim(s, "0123456789abcdef") == ""
}

// sum returns the checksum s holds for the file name of the tree, listed as st, when the file
// keeps the stamp recorded with it. s may be nil.
func (s *Stamps) sum(tree, name string, st *unix.Stat_t) (string, bool) {
	if s == nil {
		return "", false
	}
	r, ok := s.files[stampKey{tree, name}]
	if !ok || r.Stamp != stampOf(idOf(st)) {
		return "", false
	}
	return r.SHA256, true
}

// SaveStamps writes, to path, the stamps of the files of trees that are not racy, with their
// checksums, and the archive they were unpacked from, if any (nil for a directory source):
// Stamps as they are to be found at the next stage. It writes atomically and durably
// (Stamps), replacing what was there, a link included, never writing through it; where path
// holds those very stamps already, as at a restage of an unchanged source, it writes nothing.
func SaveStamps(path string, trees []*Tree, archive *Archive) error {
	f := stampsFile{Format: stampsFormat}
	if archive != nil {
		f.Archive = archive.rec
	} else {
		for _, t := range trees {
			for _, e := range t.Entries {
				id, ok := t.ids[e.Name]
				if e.Kind != 'f' || !ok || stampOf(id).racy(t.readAt) {
					continue
				}
				f.Files = append(f.Files, stampRec{Tree: t.name, Name: e.Name, Stamp: stampOf(id), SHA256: e.Sum})
			}
		}
	}
	data, err := json.Marshal(f)
	if err != nil {
		return err
	}
	// A restage of an unchanged source keeps the stamps it found: nothing is written.
	if old, err := readPrivate(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	return writePrivate(path, data)
}

// writePrivate replaces path with data, mode 0600: a new temporary file beside it (never
// through a link: O_EXCL, O_NOFOLLOW), synced, renamed into place, the directory synced.
// What an earlier writer that was killed left beside it is removed first.
func writePrivate(path string, data []byte) (err error) {
	dir, base := filepath.Dir(path), filepath.Base(path)
	prefix := "." + base + ".new-"
	if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), prefix) {
				os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	tmp := filepath.Join(dir, prefix+hex.EncodeToString(b[:]))
	fd, err := unix.Open(tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
			err = fmt.Errorf("write %s: %w", path, err)
		}
	}()
	if err = unix.Fchmod(fd, 0o600); err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// archiveKey is what an archive's trees were read for: their names and the policy.
func archiveKey(names []string, p Policy) string {
	data, _ := json.Marshal(struct {
		Names  []string
		Policy Policy
	}{names, p})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
