package staging

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// encoded is a tree's whole tar stream, as Send gives a node without the tree, kept in an
// unnamed file of the master.
type encoded struct {
	f     *os.File
	size  int64 // the stream's bytes
	bytes int64 // the bytes of file contents in it
}

// Encode writes the whole of t, once, as the tar stream that Send gives a node without the
// tree, to an unnamed file in dir (see unnamedFile; dir must be a directory only this user
// can write, such as cutover's state directory), checksumming every file as it reads it.
// Until release is called, every Send of t to such a node streams that file instead of
// reading and checksumming the tree's files again for each node. The file holds only checked
// bytes: a source file changed after Encode is not what the nodes get. Encode must not run
// concurrently with Send of t. An error (a stream that would leave less than a twentieth of
// dir's file system available, a file of the tree changed since ReadTree) leaves t as it
// was: Send then encodes for each node, and reports a changed file itself.
func (t *Tree) Encode(dir string) (release func(), err error) {
	if t.offsets != nil {
		return func() {}, nil // UnpackTrees wrote the stream, and Close releases it
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil, fmt.Errorf("free space in %s: %w", dir, err)
	}
	need := t.Bytes + int64(len(t.Entries))*entryOverhead
	if !roomFor(int64(st.Bavail)*st.Bsize, int64(st.Blocks)*st.Bsize, need) {
		return nil, fmt.Errorf("%s: the tree's stream (%d bytes) would leave less than a twentieth of its file system available", dir, need)
	}
	f, err := unnamedFile(dir)
	if err != nil {
		return nil, err
	}
	w := &countWriter{w: f}
	bw := bufio.NewWriterSize(w, tarBuffer)
	n, err := writeTar(bw, t, t.Entries, nil)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("encode %s: %w", t.Dir, err)
	}
	t.enc = &encoded{f: f, size: w.n, bytes: n}
	return func() {
		if t.enc != nil {
			t.enc.f.Close()
			t.enc = nil
		}
	}, nil
}

// entryOverhead bounds what an entry adds to a tar stream besides its contents: its header,
// a PAX header for a long name or exact times, and the padding to a whole block.
const entryOverhead = 3 << 10

// roomFor reports whether a stream of need bytes fits in a file system with free of total
// bytes available and leaves at least a twentieth of it available, on top of the blocks
// reserved for root that free does not count: the state directory is usually on the file
// system of the application's own state, which must never run out of room because a
// version is being staged.
func roomFor(free, total, need int64) bool {
	return free-need >= total/20
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// streamEncoded sends the encoded stream e to the standard input of argv on the node and
// returns the bytes of file contents sent: all of them when the command succeeds, otherwise
// the share of the stream it read. progress is told of the contents in proportion to the
// stream read.
func streamEncoded(ctx context.Context, c Conn, e *encoded, progress Progress, argv ...string) (int64, error) {
	r := &encodedReader{r: io.NewSectionReader(e.f, 0, e.size), e: e, progress: progress}
	_, err := c.RunInput(ctx, r, argv...)
	if err != nil {
		return r.told.Load(), err
	}
	if progress != nil {
		progress(e.bytes - r.told.Load())
	}
	return e.bytes, nil
}

// encodedReader reads an encoded stream and tells progress of the contents read so far.
type encodedReader struct {
	r        io.Reader
	e        *encoded
	progress Progress
	read     int64
	told     atomic.Int64
}

func (r *encodedReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.read += int64(n)
	if r.e.size > 0 {
		// The contents' share of what was read, never past the whole.
		share := min(r.e.bytes, int64(float64(r.e.bytes)*float64(r.read)/float64(r.e.size)))
		if d := share - r.told.Load(); d > 0 {
			r.told.Store(share)
			if r.progress != nil {
				r.progress(d)
			}
		}
	}
	return n, err
}

// unnamedFile opens a new file of mode 0600 in dir that has no name: made with O_TMPFILE,
// or, on a file system without it (FUSE, some overlays), created under a random name that
// must not exist (O_EXCL, no link followed) and removed at once. It is gone when closed.
func unnamedFile(dir string) (*os.File, error) {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err == nil {
		return os.NewFile(uintptr(fd), dir+"/(unnamed)"), nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EINVAL) {
		return nil, fmt.Errorf("an unnamed file in %s: %w", dir, err)
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	name := filepath.Join(dir, ".cutover-stream-"+hex.EncodeToString(b[:]))
	fd, err = unix.Open(name, unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("an unnamed file in %s: %w", dir, err)
	}
	if err := unix.Unlink(name); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("an unnamed file in %s: remove %s: %w", dir, name, err)
	}
	return os.NewFile(uintptr(fd), dir+"/(unnamed)"), nil
}
