package metrics

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

// TextfileMode is the mode of the metrics file: node_exporter runs as its own user (Debian's
// as prometheus) and must read it, and the metrics hold nothing secret (versions, node names,
// times).
const TextfileMode = 0o644

// WriteFile replaces the file at path with data, atomically: a temporary file created in the
// same directory (never a name node_exporter reads: it does not end in .prom), written,
// fsynced, renamed over path, and the directory fsynced. A reader sees the old file or the new
// one, never a part.
//
// Nothing goes through a link: the directory is opened without following its last component
// and every later step works relative to that descriptor. The directory must belong to root
// (or to the user cutover runs as) and must not be writable by group or others unless it is
// sticky and root's, so that nobody else can swap the file between the write and the rename;
// what is at path must be a regular file, or nothing. Each is refused, naming the path. The
// temporary file is removed when anything fails, and so are those of writers that were killed
// between creating theirs and the rename.
func WriteFile(path string, data []byte, mode fs.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if !filepath.IsAbs(path) || base == "" || base == "." || base == ".." {
		return fmt.Errorf("metrics file %q: not an absolute file path", path)
	}
	dfd, err := openDir(filepath.Clean(dir))
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	if err := checkTarget(dfd, path, base); err != nil {
		return err
	}
	removeDeadTemps(dfd, base)
	tmp := tempName(base)
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(mode.Perm()))
	if err != nil {
		return fmt.Errorf("metrics file %s: create a temporary file: %w", path, err)
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
		return fmt.Errorf("metrics file %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("metrics file %s: write: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("metrics file %s: sync: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("metrics file %s: close: %w", path, err)
	}
	if err := unix.Renameat(dfd, tmp, dfd, base); err != nil {
		return fmt.Errorf("metrics file %s: rename into place: %w", path, err)
	}
	if err := unix.Fsync(dfd); err != nil {
		return fmt.Errorf("metrics file %s: sync directory: %w", path, err)
	}
	return nil
}

// openDir opens dir as a directory without following a link at its last component, and checks
// that nobody but root (or this process's user) can change what is in it.
func openDir(dir string) (int, error) {
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return -1, fmt.Errorf("metrics directory %s: not a directory (a link is not followed)", dir)
		}
		return -1, fmt.Errorf("metrics directory %s: %w", dir, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		unix.Close(dfd)
		return -1, fmt.Errorf("metrics directory %s: %w", dir, err)
	}
	if err := trustedDir(st); err != nil {
		unix.Close(dfd)
		return -1, fmt.Errorf("metrics directory %s: %w", dir, err)
	}
	return dfd, nil
}

// trustedDir says why a directory with status st is not one to write the metrics in: another
// user owns it, or group or others may write it (a sticky directory of root's, such as /tmp,
// is fine: nobody may rename or remove another's entry in it).
func trustedDir(st unix.Stat_t) error {
	uid := uint32(os.Geteuid())
	if st.Uid != 0 && st.Uid != uid {
		return fmt.Errorf("owned by uid %d, not root: whoever owns it could swap the file; give it to root", st.Uid)
	}
	if st.Mode&0o022 != 0 && !(st.Mode&unix.S_ISVTX != 0 && st.Uid == 0) {
		return fmt.Errorf("writable by group or others (mode %04o): others could swap the file; make it 0755", st.Mode&0o7777)
	}
	return nil
}

// checkTarget refuses anything at base in the directory but a regular file: a link is never
// written through, nor replaced (it says someone else arranged the path).
func checkTarget(dfd int, path, base string) error {
	var st unix.Stat_t
	err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("metrics file %s: %w", path, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return nil
	case unix.S_IFLNK:
		return fmt.Errorf("metrics file %s is a symbolic link: refused, a link is never written through; remove it", path)
	default:
		return fmt.Errorf("metrics file %s is not a regular file: refused", path)
	}
}

// tempName is the name of a writer's temporary file beside base: hidden, carrying the
// writer's pid (for removeDeadTemps) and a random part, and ending in .tmp, so that
// node_exporter, which reads only *.prom, never reads it.
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
