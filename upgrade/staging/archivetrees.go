package staging

import (
	"archive/tar"
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// UnpackTrees reads the trees names of the .tar.gz archive with the checks Unpack makes, but
// writes no file: each tree becomes the tar stream that Send gives a node (what Encode
// writes), in an unnamed file in dir (see unnamedFile) that nobody else can open, with its
// manifest, checksummed as it is written. Staging an archive then makes no file on the master
// besides those of its own copy, and reads neither the archive nor the trees a second time.
// The archive is read once: every entry is checked before it is written to its stream, and
// on any refusal the streams are dropped whole. The streams may take no more than leaves a
// twentieth of dir's file system available (roomFor), counted as they grow: past that,
// IsNoRoom, and the archive is to be unpacked (Unpack). Close releases the streams.
func UnpackTrees(archive, dir string, names []string, p Policy) ([]*Tree, *Archive, error) {
	f, err := os.OpenFile(archive, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	reading, err := newArchiveReading(f)
	if err != nil {
		return nil, nil, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil, nil, fmt.Errorf("free space in %s: %w", dir, err)
	}
	out, err := newTreeStreams(dir, names)
	if err != nil {
		return nil, nil, err
	}
	out.room = int64(st.Bavail)*st.Bsize - int64(st.Blocks)*st.Bsize/20
	x := newExtractor(names, p, -1)
	x.out = out
	trees, err := func() ([]*Tree, error) {
		if err := x.readAll(reading); err != nil {
			return nil, err
		}
		return out.trees(archive, x)
	}()
	if err != nil {
		out.close()
		return nil, nil, err
	}
	return trees, reading.archive(), nil
}

// errNoRoom is UnpackTrees' error where the streams do not fit.
var errNoRoom = errors.New("no room")

// IsNoRoom reports whether UnpackTrees refused for want of room: the archive may still be
// unpacked into a directory (Unpack).
func IsNoRoom(err error) bool { return errors.Is(err, errNoRoom) }

// Close releases the stream UnpackTrees wrote of t, if any.
func (t *Tree) Close() {
	if t.offsets != nil && t.enc != nil {
		t.enc.f.Close()
		t.enc = nil
	}
}

// treeStream is one tree's stream as UnpackTrees writes it.
type treeStream struct {
	f       *os.File
	cw      *countWriter
	bw      *bufio.Writer
	tw      *tar.Writer
	entries map[string]Entry
	dirs    map[string]bool  // the directories given a header
	offsets map[string]int64 // where each file's contents begin in the stream
	bytes   int64
}

// treeStreams are the streams of the trees UnpackTrees writes, by tree.
type treeStreams struct {
	now     time.Time
	streams map[string]*treeStream
	room    int64 // what the streams may take
	taken   int64 // what they take at most so far: contents, and entryOverhead an entry
}

func newTreeStreams(dir string, names []string) (*treeStreams, error) {
	out := &treeStreams{now: time.Now().Truncate(time.Second), streams: map[string]*treeStream{}}
	for _, name := range names {
		f, err := unnamedFile(dir)
		if err != nil {
			out.close()
			return nil, err
		}
		cw := &countWriter{w: f}
		bw := bufio.NewWriterSize(cw, tarBuffer)
		out.streams[name] = &treeStream{f: f, cw: cw, bw: bw, tw: tar.NewWriter(bw),
			entries: map[string]Entry{}, dirs: map[string]bool{}, offsets: map[string]int64{}}
	}
	return out, nil
}

func (o *treeStreams) close() {
	for _, s := range o.streams {
		s.f.Close()
	}
}

// take counts an entry of size bytes of contents, and its parents' headers, against the room
// the streams may take.
func (o *treeStreams) take(size int64) error {
	o.taken += size + entryOverhead
	if o.taken > o.room {
		return fmt.Errorf("%w: the trees' streams would leave less than a twentieth of their file system available", errNoRoom)
	}
	return nil
}

// offset is where the next byte written to the stream lands.
func (s *treeStream) offset() int64 { return s.cw.n + int64(s.bw.Buffered()) }

// header writes the header of e, its parent directories' first where the archive did not
// give them yet (dirModes holds their modes by archive name, tree the tree's).
func (o *treeStreams) header(s *treeStream, tree string, e Entry, dirModes map[string]fs.FileMode) error {
	for i := 0; i < len(e.Name); i++ {
		if e.Name[i] != '/' || s.dirs[e.Name[:i]] {
			continue
		}
		dir := e.Name[:i]
		s.dirs[dir] = true
		if err := o.take(0); err != nil {
			return err
		}
		if err := s.tw.WriteHeader(headerOf(Entry{Name: dir, Kind: 'd', Mode: dirModes[tree+"/"+dir]}, o.now)); err != nil {
			return err
		}
	}
	if e.Kind == 'd' {
		s.dirs[e.Name] = true
	}
	return s.tw.WriteHeader(headerOf(e, o.now))
}

// entry writes the checked entry name (rel in tree) of the archive, of kind and mode, to its
// tree's stream; data is its contents.
func (o *treeStreams) entry(x *extractor, name, tree, rel string, kind byte, mode fs.FileMode, h *tar.Header, data io.Reader) error {
	if rel == "." {
		return nil // the tree's root: Send makes it, Place gives it its mode
	}
	if err := o.take(h.Size); err != nil {
		return err
	}
	s := o.streams[tree]
	e := Entry{Name: rel, Kind: kind, Mode: mode}
	switch kind {
	case 'd':
		return o.header(s, tree, e, x.dirModes)
	case 'l':
		e.Target = h.Linkname
	case 'c', 'b':
		e.Dev = unix.Mkdev(uint32(h.Devmajor), uint32(h.Devminor))
	case 'f':
		e.Size, e.MTime = h.Size, h.ModTime.UnixNano()
	}
	if err := o.header(s, tree, e, x.dirModes); err != nil {
		return err
	}
	if kind == 'f' {
		s.offsets[rel] = s.offset()
		sum := sha256.New()
		if err := copyExactly(io.MultiWriter(s.tw, sum), data, h.Size); err != nil {
			return err
		}
		e.Sum = hex.EncodeToString(sum.Sum(nil))
		s.bytes += e.Size
	}
	s.entries[rel] = e
	return nil
}

// hardlink writes a hard link at rel in tree to the file to (an archive name of the same
// tree, written before) as a copy of that file, as Unpack makes it.
func (o *treeStreams) hardlink(x *extractor, tree, rel, to string) error {
	s := o.streams[tree]
	_, toRel, _ := x.where(to)
	target, ok := s.entries[toRel]
	if !ok || target.Kind != 'f' {
		return fmt.Errorf("a hard link to %q, which is not a file of this tree the archive gave before it", to)
	}
	e := target
	e.Name = rel
	if err := o.take(e.Size); err != nil {
		return err
	}
	if err := o.header(s, tree, e, x.dirModes); err != nil {
		return err
	}
	if err := s.bw.Flush(); err != nil {
		return err
	}
	s.offsets[rel] = s.offset()
	if err := copyExactly(s.tw, io.NewSectionReader(s.f, s.offsets[toRel], e.Size), e.Size); err != nil {
		return err
	}
	s.bytes += e.Size
	s.entries[rel] = e
	return nil
}

// trees ends the streams and returns the trees, with the directories' final modes.
func (o *treeStreams) trees(archive string, x *extractor) ([]*Tree, error) {
	var out []*Tree
	for _, name := range x.trees {
		s := o.streams[name]
		mode, ok := x.dirModes[name]
		if !ok {
			return nil, fmt.Errorf("%s: %w", name, unix.ENOENT)
		}
		for dir, m := range x.dirModes {
			if rel, ok := strings.CutPrefix(dir, name+"/"); ok {
				s.entries[rel] = Entry{Name: rel, Kind: 'd', Mode: m}
			}
		}
		if err := s.tw.Close(); err != nil {
			return nil, err
		}
		if err := s.bw.Flush(); err != nil {
			return nil, err
		}
		t := &Tree{Dir: filepath.Join(archive, filepath.FromSlash(name)), Mode: mode, Bytes: s.bytes, name: name,
			offsets: s.offsets, enc: &encoded{f: s.f, size: s.cw.n, bytes: s.bytes}}
		for _, e := range s.entries {
			t.Entries = append(t.Entries, e)
		}
		sort.Slice(t.Entries, func(i, j int) bool { return t.Entries[i].Name < t.Entries[j].Name })
		out = append(out, t)
	}
	return out, nil
}

// copyEncoded copies the file e of a tree UnpackTrees wrote to w from its stream, and refuses
// bytes that have not the manifest's checksum.
func (t *Tree) copyEncoded(w io.Writer, e Entry) error {
	off, ok := t.offsets[e.Name]
	if !ok || t.enc == nil {
		return fmt.Errorf("%s: not in the tree's stream", path.Join(t.name, e.Name))
	}
	h := sha256.New()
	if err := copyExactly(io.MultiWriter(w, h), io.NewSectionReader(t.enc.f, off, e.Size), e.Size); err != nil {
		return err
	}
	if hex.EncodeToString(h.Sum(nil)) != e.Sum {
		return errors.New("its stream does not hold what was checksummed: it is not staged")
	}
	return nil
}

// headerOf is the tar header of the entry e as Send gives it a node: now is the time of
// everything but a file.
func headerOf(e Entry, now time.Time) *tar.Header {
	h := &tar.Header{Name: "./" + e.Name, Mode: tarMode(e.Mode), Format: tar.FormatPAX, ModTime: now}
	switch e.Kind {
	case 'd':
		h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
	case 'l':
		h.Typeflag, h.Linkname = tar.TypeSymlink, e.Target
	case 'f':
		h.Typeflag, h.Size, h.ModTime = tar.TypeReg, e.Size, time.Unix(0, e.MTime)
	case 'p':
		h.Typeflag = tar.TypeFifo
	case 'c', 'b':
		h.Typeflag, h.Devmajor, h.Devminor = tar.TypeChar, int64(unix.Major(e.Dev)), int64(unix.Minor(e.Dev))
		if e.Kind == 'b' {
			h.Typeflag = tar.TypeBlock
		}
	}
	return h
}
