package backup

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// fileID identifies a file on disk: the device and inode fstat gives.
type fileID struct{ dev, ino uint64 }

func idOf(st *unix.Stat_t) fileID { return fileID{uint64(st.Dev), st.Ino} }

// fd is f's descriptor, for the *at system calls.
func fd(f *os.File) int { return int(f.Fd()) }

// openFollow opens the directory p by its path, following links: only ever a top-level
// directory of a scope.
func openFollow(p string) (*os.File, fileID, error) {
	n, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fileID{}, err
	}
	return statOpened(n, p)
}

// openDirAt opens the directory name in dir, never through a link: a link there fails with
// ELOOP, a file with ENOTDIR.
func openDirAt(dir *os.File, name, p string) (*os.File, fileID, error) {
	n, err := unix.Openat(fd(dir), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fileID{}, err
	}
	return statOpened(n, p)
}

func statOpened(n int, p string) (*os.File, fileID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(n, &st); err != nil {
		unix.Close(n)
		return nil, fileID{}, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		unix.Close(n)
		return nil, fileID{}, unix.ENOTDIR
	}
	return os.NewFile(uintptr(n), p), idOf(&st), nil
}

// swapped says whether err from an open that refuses links means that something else than
// the directory or file expected is there now.
func swapped(err error) bool {
	return errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENXIO)
}

// typeName names the type of a file mode, for messages.
func typeName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFREG:
		return "regular file"
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	}
	return "special file"
}

// readlinkAt reads the target of the link name in dir.
func readlinkAt(dir *os.File, name string) (string, error) {
	buf := make([]byte, maxPath+1)
	n, err := unix.Readlinkat(fd(dir), name, buf)
	if err != nil {
		return "", err
	}
	if n > maxPath {
		return "", fmt.Errorf("link target longer than %d bytes", maxPath)
	}
	return string(buf[:n]), nil
}

// openDir is one directory of a walk, open.
type openDir struct {
	path string
	f    *os.File
	id   fileID
}

// opener opens the directories of a scope by path, one name at a time from the root's
// descriptor, never through a link, and checks that each is the directory it saw before:
// what a restore uses for every write. It keeps the directories from the root to the last
// one opened, so that walking a tree in order opens each once.
type opener struct {
	sc Scope
	// ids are the directories seen, by path: one opened again must be the same.
	ids map[string]fileID
	// learn records a directory not seen yet (the check); otherwise it is refused (the
	// restore, which only opens what the check saw or what it created itself).
	learn bool
	stack []openDir
}

// open returns the directory p, open; it stays open until the next call for a path that is
// not below it, or close.
func (o *opener) open(p string) (*os.File, error) {
	for len(o.stack) > 0 {
		top := o.stack[len(o.stack)-1]
		if top.path == p {
			return top.f, nil
		}
		if within(p, top.path) {
			break
		}
		top.f.Close()
		o.stack = o.stack[:len(o.stack)-1]
	}
	if len(o.stack) == 0 {
		root := o.sc.rootOf(p)
		if root == "" {
			return nil, fmt.Errorf("%s is outside %s", p, strings.Join(o.sc.Roots, " and "))
		}
		f, id, err := openFollow(o.sc.abs(root))
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", root, err)
		}
		if err := o.push(root, f, id); err != nil {
			return nil, err
		}
	}
	for {
		top := o.stack[len(o.stack)-1]
		if top.path == p {
			return top.f, nil
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(p, top.path+"/"), "/")
		next := top.path + "/" + name
		f, id, err := openDirAt(top.f, name, next)
		if swapped(err) {
			return nil, fmt.Errorf("%s is no longer the directory the check saw (a link, a file or nothing is there now): refused, cutover never writes through a link", next)
		}
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", next, err)
		}
		if err := o.push(next, f, id); err != nil {
			return nil, err
		}
	}
}

func (o *opener) push(p string, f *os.File, id fileID) error {
	want, seen := o.ids[p]
	switch {
	case seen && want != id:
		f.Close()
		return fmt.Errorf("%s was replaced by another directory since the check: refused", p)
	case !seen && !o.learn:
		f.Close()
		return fmt.Errorf("%s is a directory the check did not see: refused", p)
	case !seen:
		o.ids[p] = id
	}
	o.stack = append(o.stack, openDir{p, f, id})
	return nil
}

// close closes every directory still open.
func (o *opener) close() {
	for _, d := range o.stack {
		d.f.Close()
	}
	o.stack = nil
}
