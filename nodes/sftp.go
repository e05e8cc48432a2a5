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
			if err != nil && roomOps[op] {
				err = withRoom(cl, name, err)
			}
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

// roomOps are the operations that need room on the node's file system.
var roomOps = map[string]bool{"write": true, "symlink": true, "rename": true, "mkdir": true}

// withRoom adds to SFTP's generic failure of an operation on name what room the file system
// holding name's directory has left, as df and df -i would show it: SFTP, as OpenSSH speaks
// it, says "Failure" for a full disk, which alone does not say why. Any other error, or a
// server without the statvfs@openssh.com extension, leaves err as it is.
func withRoom(cl *sftp.Client, name string, err error) error {
	var se *sftp.StatusError
	if !errors.As(err, &se) || se.FxCode() != sftp.ErrSSHFxFailure {
		return err
	}
	dir := path.Dir(name)
	st, serr := cl.StatVFS(dir)
	if serr != nil {
		return err
	}
	return fmt.Errorf("%w; the file system of %s has %d bytes available and %d inodes free", err, dir, st.Bavail*st.Frsize, st.Ffree)
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

// Symlink creates newname and syncs its directory.
func (r remoteFS) Symlink(oldname, newname string) error {
	if err := r.SymlinkNoSync(oldname, newname); err != nil {
		return err
	}
	return linkError("symlink", oldname, newname, r.syncDirs(parentDir(newname)))
}

// SymlinkNoSync creates newname, leaving its directory to the caller to sync.
func (r remoteFS) SymlinkNoSync(oldname, newname string) error {
	return r.link("symlink", oldname, newname, func(cl *sftp.Client) error { return cl.Symlink(oldname, newname) })
}

// Rename renames oldname to newname and syncs the directories it changed.
func (r remoteFS) Rename(oldname, newname string) error {
	if err := r.RenameNoSync(oldname, newname); err != nil {
		return err
	}
	return linkError("rename", oldname, newname, r.syncDirs(renamedDirs(oldname, newname)...))
}

// RenameNoSync renames oldname to newname (posix-rename@openssh.com), leaving
// the directories to the caller to sync.
func (r remoteFS) RenameNoSync(oldname, newname string) error {
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

// Remove removes name and syncs its directory.
func (r remoteFS) Remove(name string) error {
	if err := r.RemoveNoSync(name); err != nil {
		return err
	}
	return pathError("remove", name, r.syncDirs(parentDir(name)))
}

// RemoveNoSync removes name, leaving its directory to the caller to sync.
func (r remoteFS) RemoveNoSync(name string) error {
	return r.do("remove", name, func(cl *sftp.Client) error { return cl.Remove(name) })
}

// SyncDir fsyncs the directory name.
func (r remoteFS) SyncDir(name string) error { return r.syncDirs(name) }

// fsyncExtension is the SFTP extension that fsyncs an open file. It is a
// variable so that tests can make cutover take a server for one without it.
var fsyncExtension = "fsync@openssh.com"

// syncDirs fsyncs each of dirs, each with the file timeout: over SFTP when
// the server has fsyncExtension (OpenSSH's sftp-server opens a directory
// read-only like a file), otherwise with the sync command over the node's
// SSH connection. The error is an *fs.PathError whose Op is "sync
// directory".
func (r remoteFS) syncDirs(dirs ...string) error {
	if skipSync {
		return nil
	}
	for _, dir := range dirs {
		can := true
		err := r.do("sync directory", dir, func(cl *sftp.Client) error {
			if v, ok := cl.HasExtension(fsyncExtension); !ok || v != "1" {
				can = false
				return nil
			}
			return fsyncSFTPDir(cl, dir)
		})
		if err != nil {
			return err
		}
		if !can {
			return cmdFS{r.c}.syncDirs(dirs...)
		}
	}
	return nil
}

// fsyncSFTPDir opens the directory dir read-only over SFTP and fsyncs it
// (fsync@openssh.com). It is a variable so that tests can see which
// directories the operations sync, and make a sync fail.
var fsyncSFTPDir = func(cl *sftp.Client, dir string) error {
	d, err := cl.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
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
// (posix-rename@openssh.com); then the temporary directory goes, and name's
// directory is synced. Temporary
// directories that a writer which died left beside name are removed first:
// those of another process at once, the process's own once they are older
// than staleTempAge.
func (r remoteFS) WriteFileAtomic(name string, data []byte, perm fs.FileMode) error {
	dir, base := path.Dir(name), path.Base(name)
	tmpDir := path.Join(dir, tempName(base))
	tmp := path.Join(tmpDir, base)
	err := r.do("write", name, func(cl *sftp.Client) (err error) {
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
		if !skipSync {
			if err = f.Sync(); err != nil {
				return fmt.Errorf("sync %s: %w", tmp, err)
			}
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
	if err != nil {
		return err
	}
	return pathError("write", name, r.syncDirs(dir))
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

// MkdirAll creates name and its missing parents, each with mode perm, then
// syncs every directory it created and the directory holding each.
func (r remoteFS) MkdirAll(name string, perm fs.FileMode) error {
	var created []string
	err := r.do("mkdir", name, func(cl *sftp.Client) (err error) {
		created, err = mkdirAll(cl, path.Clean(name), perm, nil)
		return err
	})
	if err != nil {
		return err
	}
	return pathError("mkdir", name, r.syncDirs(mkdirSyncs(created)...))
}

// mkdirAll creates dir and its missing parents with mode perm, and returns
// created with the directories it created appended, parents first.
func mkdirAll(cl *sftp.Client, dir string, perm fs.FileMode, created []string) ([]string, error) {
	fi, err := cl.Stat(dir)
	err = sftpCause(err)
	if err == nil {
		if !fi.IsDir() {
			return created, fmt.Errorf("%s is not a directory", dir)
		}
		return created, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return created, err
	}
	if parent := path.Dir(dir); parent != dir {
		if created, err = mkdirAll(cl, parent, perm, created); err != nil {
			return created, err
		}
	}
	if err := cl.Mkdir(dir); err != nil {
		// Someone else may have created it meanwhile.
		if fi, serr := cl.Stat(dir); serr == nil && fi.IsDir() {
			return created, nil
		}
		return created, fmt.Errorf("%s: %w", dir, err)
	}
	return append(created, dir), cl.Chmod(dir, perm)
}
