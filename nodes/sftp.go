package nodes

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/pkg/sftp"
)

// remoteFS implements a node's file operations over SFTP on the node's SSH
// connection. Errors are *fs.PathError or *os.LinkError values whose
// underlying error is fs.ErrNotExist or fs.ErrPermission where SFTP says so.
type remoteFS struct{ c *sshClient }

// do runs op with the connection's SFTP client, normalising its error. The
// operation, starting the client included, has the connection's file
// timeout: an SFTP server that stops answering fails it (and every later
// operation on the connection) instead of hanging cutover.
func (r remoteFS) do(op, name string, f func(cl *sftp.Client) error) error {
	type outcome struct {
		cl  *sftp.Client
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		cl, err := r.c.sftpClient()
		if err == nil {
			err = f(cl)
		}
		done <- outcome{cl, err}
	}()
	timer := time.NewTimer(r.c.fileTimeout)
	defer timer.Stop()
	var err error
	select {
	case o := <-done:
		err = o.err
	case <-timer.C:
		hung := fmt.Errorf("%w: the SFTP server on %s did not answer within %s", errSFTPHung, r.c.addr, r.c.fileTimeout)
		r.c.abandonSFTP(hung)
		return &fs.PathError{Op: op, Path: name, Err: hung}
	}
	if err == nil {
		return nil
	}
	return &fs.PathError{Op: op, Path: name, Err: r.cause(err)}
}

// errSFTPHung marks an SFTP operation that went unanswered.
var errSFTPHung = errors.New("sftp: no answer")

// cause explains a failed SFTP operation, preferring the reason the
// connection died when it did.
func (r remoteFS) cause(err error) error {
	err = sftpCause(err)
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) && !r.c.alive() {
		return r.c.deadErr
	}
	return err
}

// sftpCause strips path decorations from an SFTP error and maps status codes
// to the fs package's errors.
func sftpCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	var se *sftp.StatusError
	if errors.As(err, &se) {
		switch se.FxCode() {
		case sftp.ErrSSHFxNoSuchFile:
			return fs.ErrNotExist
		case sftp.ErrSSHFxPermissionDenied:
			return fs.ErrPermission
		}
	}
	return err
}

func (r remoteFS) Lstat(name string) (fi fs.FileInfo, err error) {
	err = r.do("lstat", name, func(cl *sftp.Client) error {
		fi, err = cl.Lstat(name)
		return err
	})
	return fi, err
}

func (r remoteFS) Stat(name string) (fi fs.FileInfo, err error) {
	err = r.do("stat", name, func(cl *sftp.Client) error {
		fi, err = cl.Stat(name)
		return err
	})
	return fi, err
}

func (r remoteFS) Readlink(name string) (target string, err error) {
	err = r.do("readlink", name, func(cl *sftp.Client) error {
		target, err = cl.ReadLink(name)
		return err
	})
	return target, err
}

func (r remoteFS) Symlink(oldname, newname string) error {
	return r.link("symlink", oldname, newname, func(cl *sftp.Client) error { return cl.Symlink(oldname, newname) })
}

func (r remoteFS) Rename(oldname, newname string) error {
	return r.link("rename", oldname, newname, func(cl *sftp.Client) error { return cl.PosixRename(oldname, newname) })
}

// link runs an operation on two paths, reporting an *os.LinkError.
func (r remoteFS) link(op, oldname, newname string, f func(cl *sftp.Client) error) error {
	err := r.do(op, newname, f)
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &os.LinkError{Op: op, Old: oldname, New: newname, Err: pe.Err}
	}
	return err
}

func (r remoteFS) Remove(name string) error {
	return r.do("remove", name, func(cl *sftp.Client) error { return cl.Remove(name) })
}

func (r remoteFS) Chmod(name string, perm fs.FileMode) error {
	return r.do("chmod", name, func(cl *sftp.Client) error { return cl.Chmod(name, perm) })
}

func (r remoteFS) ReadDir(name string) (infos []fs.FileInfo, err error) {
	err = r.do("readdir", name, func(cl *sftp.Client) error {
		infos, err = cl.ReadDir(name)
		return err
	})
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name() < infos[j].Name() })
	return infos, err
}

func (r remoteFS) ReadFile(name string) (data []byte, err error) {
	err = r.do("read", name, func(cl *sftp.Client) error {
		f, err := cl.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		var buf bytes.Buffer
		if _, err := f.WriteTo(&buf); err != nil {
			return err
		}
		data = buf.Bytes()
		return nil
	})
	return data, err
}

// WriteFileAtomic writes name through a temporary file that nobody else can
// read, not even for a moment: an SFTP server creates files with its own
// umask (usually 0644) whatever cutover asks, so the file is created inside
// a temporary directory beside name that is made 0700 while still empty.
// The file is synced (fsync@openssh.com), given perm and renamed over name
// (posix-rename@openssh.com); then the directory goes. Temporary
// directories that a writer which died left beside name are removed first:
// those of another process at once, the process's own once they are older
// than staleTempAge.
func (r remoteFS) WriteFileAtomic(name string, data []byte, perm fs.FileMode) error {
	dir, base := path.Dir(name), path.Base(name)
	tmpDir := path.Join(dir, tempName(base))
	tmp := path.Join(tmpDir, base)
	return r.do("write", name, func(cl *sftp.Client) (err error) {
		removeStaleTemps(cl, dir, base)
		if err := cl.Mkdir(tmpDir); err != nil {
			return fmt.Errorf("mkdir %s: %w", tmpDir, err)
		}
		defer func() {
			if err != nil {
				cl.Remove(tmp)
			}
			cl.RemoveDirectory(tmpDir)
		}()
		if err := cl.Chmod(tmpDir, 0o700); err != nil {
			return fmt.Errorf("chmod %s: %w", tmpDir, err)
		}
		if fi, err := cl.Lstat(tmpDir); err != nil {
			return err
		} else if !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			return fmt.Errorf("%s changed under cutover (now %s): refusing to write into it", tmpDir, fi.Mode())
		}
		f, err := cl.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
		if err != nil {
			return err
		}
		defer func() {
			if err != nil {
				f.Close()
			}
		}()
		if _, err = f.ReadFrom(bytes.NewReader(data)); err != nil {
			return err
		}
		if err = f.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", tmp, err)
		}
		if err = f.Chmod(perm); err != nil {
			return fmt.Errorf("chmod %s: %w", tmp, err)
		}
		if err = f.Close(); err != nil {
			return err
		}
		if err = cl.PosixRename(tmp, name); err != nil {
			return fmt.Errorf("rename %s: %w", tmp, err)
		}
		return nil
	})
}

// staleTempAge is how old a temporary directory of WriteFileAtomic of this
// process must be before another write of the same file removes it: far
// longer than a write may take (the file timeout), so a concurrent write's
// is never touched.
const staleTempAge = 10 * time.Minute

// tempPrefix is how the temporary directories of writes to base begin.
func tempPrefix(base string) string { return "." + base + ".tmp-" }

// writerID names this process in the temporary names of its writes (their
// first 8 hex digits): a temporary directory with another writer's name was
// left by a process that died, since cutover writes a node's files under its
// run's exclusive lock, and the next write removes it at once.
var writerID = func() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}()

// tempName is a new temporary name for a write to base: the prefix, this
// process's writer id and 8 random hex digits.
func tempName(base string) string {
	var b [4]byte
	rand.Read(b[:])
	return tempPrefix(base) + writerID + hex.EncodeToString(b[:])
}

// staleTemp reports whether the entry n of the directory of base, modified
// at mtime, is a temporary directory or file that a write of base left and
// the next may remove: another process's, or this one's long ago.
func staleTemp(n, base string, mtime time.Time) bool {
	prefix := tempPrefix(base)
	if !strings.HasPrefix(n, prefix) || len(n) != len(prefix)+16 {
		return false
	}
	if _, err := hex.DecodeString(n[len(prefix):]); err != nil {
		return false
	}
	return n[len(prefix):len(prefix)+8] != writerID || time.Since(mtime) >= staleTempAge
}

// removeStaleTemps removes what writers of dir/base that died left (see
// staleTemp): a temporary directory (and the one file in it) or, from older
// versions, a temporary file. Failures are ignored: a leftover
// is clutter, readable by root only.
func removeStaleTemps(cl *sftp.Client, dir, base string) {
	entries, err := cl.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		n := e.Name()
		if !staleTemp(n, base, e.ModTime()) {
			continue
		}
		p := path.Join(dir, n)
		if e.IsDir() {
			cl.Remove(path.Join(p, base))
			cl.RemoveDirectory(p)
			continue
		}
		cl.Remove(p)
	}
}

// MkdirAll creates name and its missing parents, each with mode perm.
func (r remoteFS) MkdirAll(name string, perm fs.FileMode) error {
	return r.do("mkdir", name, func(cl *sftp.Client) error { return mkdirAll(cl, path.Clean(name), perm) })
}

func mkdirAll(cl *sftp.Client, dir string, perm fs.FileMode) error {
	fi, err := cl.Stat(dir)
	err = sftpCause(err)
	if err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if parent := path.Dir(dir); parent != dir {
		if err := mkdirAll(cl, parent, perm); err != nil {
			return err
		}
	}
	if err := cl.Mkdir(dir); err != nil {
		// Someone else may have created it meanwhile.
		if fi, serr := cl.Stat(dir); serr == nil && fi.IsDir() {
			return nil
		}
		return fmt.Errorf("%s: %w", dir, err)
	}
	return cl.Chmod(dir, perm)
}
