package staging

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"golang.org/x/sys/unix"
)

// The functions of this file reach what lies beneath a directory descriptor one name at a
// time, never following a symbolic link: a link where a directory or a file is expected is an
// error, not a way out of the tree.

// errLink is returned for a symbolic link found where a directory or a file is expected.
var errLink = errors.New("a symbolic link where a directory or a file is expected: it is never followed")

// fileID identifies a file between the moment it is listed and the moment it is read: a file
// whose identity, size or times changed in between is refused.
type fileID struct {
	dev, ino     uint64
	size         int64
	mtime, ctime unix.Timespec
}

func idOf(st *unix.Stat_t) fileID {
	return fileID{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim, ctime: st.Ctim}
}

// openAt opens name, a single name, in the directory dirfd with O_NOFOLLOW and O_CLOEXEC
// added to flags; a link there gives errLink.
func openAt(dirfd int, name string, flags int, perm uint32) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.ELOOP || (err == unix.ENOTDIR && flags&unix.O_DIRECTORY != 0 && isLink(dirfd, name)):
			return -1, errLink
		}
		return fd, err
	}
}

// isLink reports whether name in dirfd is a symbolic link.
func isLink(dirfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

// openDirBeneath opens the directory name, a clean slash-separated path ("." for dirfd
// itself), beneath dirfd, one name at a time.
func openDirBeneath(dirfd int, name string) (int, error) {
	fd, err := unix.Dup(dirfd)
	if err != nil || name == "." {
		return fd, err
	}
	for _, el := range strings.Split(name, "/") {
		next, err := openAt(fd, el, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// dirCache keeps open the directories along the path last asked for beneath a root, so that
// the files of one directory, read one after another, cost one open each.
type dirCache struct {
	root  int
	names []string // the path of the deepest open directory, by name
	fds   []int    // fds[i] is the directory names[:i+1]
}

// open returns a descriptor of the directory dir (a clean slash-separated path, "." for the
// root) beneath the root; it stays the cache's.
func (c *dirCache) open(dir string) (int, error) {
	var want []string
	if dir != "." {
		want = strings.Split(dir, "/")
	}
	keep := 0
	for keep < len(c.names) && keep < len(want) && c.names[keep] == want[keep] {
		keep++
	}
	for i := len(c.fds) - 1; i >= keep; i-- {
		unix.Close(c.fds[i])
	}
	c.names, c.fds = c.names[:keep], c.fds[:keep]
	for _, el := range want[keep:] {
		parent := c.root
		if len(c.fds) > 0 {
			parent = c.fds[len(c.fds)-1]
		}
		fd, err := openAt(parent, el, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return -1, err
		}
		c.names, c.fds = append(c.names, el), append(c.fds, fd)
	}
	if len(c.fds) == 0 {
		return c.root, nil
	}
	return c.fds[len(c.fds)-1], nil
}

// close closes the directories the cache holds open, not the root.
func (c *dirCache) close() {
	for _, fd := range c.fds {
		unix.Close(fd)
	}
	c.names, c.fds = nil, nil
}

// fileMode converts the mode of a stat to the bits a tree's entries keep.
func fileMode(m uint32) fs.FileMode {
	return unixPerm(m & 0o7777)
}

// readlinkAt reads the target of the link name in dirfd.
func readlinkAt(dirfd int, name string) (string, error) {
	for size := 256; size <= 1<<16; size *= 4 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
	return "", fmt.Errorf("a link target longer than 64 KiB")
}
