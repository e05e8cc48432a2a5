// Package atomicfile writes a file the way cutover writes the files others read (the metrics
// textfile, a timeline page): a temporary file beside it, written, synced, renamed over it, and
// the directory synced, all relative to the directory opened once without following a link, so
// that a reader sees the old file or the new one, never a part, and nothing is written through
// a link (docs/design.md §9).
package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Write replaces the file at path with data, mode mode. What names the file in errors ("metrics
// file"). The directory is opened without following its last component, and trustDir, when not
// nil, judges it from its status (its owner and mode) before anything is written; what is at path
// must be a regular file, or nothing: a link is refused, never written through nor replaced. The
// temporary file (hidden, carrying the writer's pid, ending in .tmp) is removed when anything
// fails, and so are those of writers that were killed between creating theirs and the rename.
func Write(what, path string, data []byte, mode fs.FileMode, trustDir func(*unix.Stat_t) error) (err error) {
	dir, base := filepath.Split(path)
	if !filepath.IsAbs(path) || base == "" || base == "." || base == ".." {
		return fmt.Errorf("%s %q: not an absolute file path", what, path)
	}
	dir = filepath.Clean(dir)
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return fmt.Errorf("%s %s: its directory %s is not a directory (a link is not followed)", what, path, dir)
		}
		return fmt.Errorf("%s %s: its directory: %w", what, path, err)
	}
	defer unix.Close(dfd)
	if trustDir != nil {
		var st unix.Stat_t
		if err := unix.Fstat(dfd, &st); err != nil {
			return fmt.Errorf("%s %s: its directory: %w", what, path, err)
		}
		if err := trustDir(&st); err != nil {
			return fmt.Errorf("%s %s: its directory %s: %w", what, path, dir, err)
		}
	}
	if err := checkTarget(dfd, what, path, base); err != nil {
		return err
	}
	removeDeadTemps(dfd, base)
	tmp := tempName(base)
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(mode.Perm()))
	if err != nil {
		return fmt.Errorf("%s %s: create a temporary file: %w", what, path, err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir, tmp))
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = unix.Unlinkat(dfd, tmp, 0)
		}
	}()
	// The mode is set on the descriptor: the umask narrowed the one given to the create.
	if err := f.Chmod(mode.Perm()); err != nil {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("%s %s: write: %w", what, path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%s %s: sync: %w", what, path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%s %s: close: %w", what, path, err)
	}
	if err := unix.Renameat(dfd, tmp, dfd, base); err != nil {
		return fmt.Errorf("%s %s: rename into place: %w", what, path, err)
	}
	if err := unix.Fsync(dfd); err != nil {
		return fmt.Errorf("%s %s: sync directory: %w", what, path, err)
	}
	return nil
}

// checkTarget refuses anything at base in the directory but a regular file: a link is never
// written through, nor replaced (it says someone else arranged the path).
func checkTarget(dfd int, what, path, base string) error {
	var st unix.Stat_t
	err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return nil
	case unix.S_IFLNK:
		return fmt.Errorf("%s %s is a symbolic link: refused, a link is never written through; remove it", what, path)
	default:
		return fmt.Errorf("%s %s is not a regular file: refused", what, path)
	}
}

// tempName is the name of a writer's temporary file beside base: hidden, carrying the
// writer's pid (for removeDeadTemps) and a random part, and ending in .tmp, so that a reader
// of a name pattern (node_exporter reads only *.prom) never reads it.
func tempName(base string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf(".%s.%d.%s.tmp", base, os.Getpid(), hex.EncodeToString(b[:]))
}

// removeDeadTemps removes the temporary files beside base that writers left when they were
// killed between creating theirs and the rename; a live writer's file is left alone, and so
// is anything that is not a regular file. Failures are ignored: a leftover only takes room.
func removeDeadTemps(dfd int, base string) {
	d, err := unix.Openat(dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(d), ".")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return
	}
	prefix := "." + base + "."
	for _, name := range names {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok || !strings.HasSuffix(rest, ".tmp") {
			continue
		}
		id, _, _ := strings.Cut(rest, ".")
		pid, err := strconv.Atoi(id)
		if err != nil || pid <= 0 || pid == os.Getpid() || unix.Kill(pid, 0) != unix.ESRCH {
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
			_ = unix.Unlinkat(dfd, name, 0)
		}
	}
}
