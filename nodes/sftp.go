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

	"github.com/pkg/sftp"
)

// remoteFS implements a node's file operations over SFTP on the node's SSH
// connection. Errors are *fs.PathError or *os.LinkError values whose
// underlying error is fs.ErrNotExist or fs.ErrPermission where SFTP says so.
type remoteFS struct{ c *sshClient }

// do runs op with the connection's SFTP client, normalising its error.
func (r remoteFS) do(op, name string, f func(cl *sftp.Client) error) error {
	cl, err := r.c.sftpClient()
	if err == nil {
		err = f(cl)
	}
	if err == nil {
		return nil
	}
	return &fs.PathError{Op: op, Path: name, Err: r.cause(err)}
}

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

// WriteFileAtomic writes a temporary file next to name, syncs it
// (fsync@openssh.com), sets perm and renames it over name
// (posix-rename@openssh.com).
func (r remoteFS) WriteFileAtomic(name string, data []byte, perm fs.FileMode) error {
	var suffix [8]byte
	rand.Read(suffix[:])
	tmp := path.Join(path.Dir(name), "."+path.Base(name)+".tmp-"+hex.EncodeToString(suffix[:]))
	return r.do("write", name, func(cl *sftp.Client) (err error) {
		f, err := cl.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
		if err != nil {
			return err
		}
		defer func() {
			if err != nil {
				f.Close()
				cl.Remove(tmp)
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
