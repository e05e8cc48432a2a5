package layout

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// OSFS is the FS of the local machine, through the os package.
type OSFS struct{}

// Lstat calls os.Lstat.
func (OSFS) Lstat(name string) (fs.FileInfo, error) { return os.Lstat(name) }

// Stat calls os.Stat.
func (OSFS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

// Readlink calls os.Readlink.
func (OSFS) Readlink(name string) (string, error) { return os.Readlink(name) }

// Symlink calls os.Symlink, then syncs newname's directory.
func (OSFS) Symlink(oldname, newname string) error {
	if err := os.Symlink(oldname, newname); err != nil {
		return err
	}
	if err := syncDir(parent(newname)); err != nil {
		return &os.LinkError{Op: "symlink", Old: oldname, New: newname, Err: err}
	}
	return nil
}

// Rename calls os.Rename, which is rename(2) on POSIX systems, then syncs newname's
// directory and, when it is another one, oldname's.
func (OSFS) Rename(oldname, newname string) error {
	if err := os.Rename(oldname, newname); err != nil {
		return err
	}
	for _, dir := range renamedDirs(oldname, newname) {
		if err := syncDir(dir); err != nil {
			return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
		}
	}
	return nil
}

// Remove calls os.Remove, then syncs name's directory.
func (OSFS) Remove(name string) error {
	if err := os.Remove(name); err != nil {
		return err
	}
	if err := syncDir(parent(name)); err != nil {
		return &fs.PathError{Op: "remove", Path: name, Err: err}
	}
	return nil
}

// SymlinkNoSync calls os.Symlink; newname's directory is left to the caller to sync.
func (OSFS) SymlinkNoSync(oldname, newname string) error { return os.Symlink(oldname, newname) }

// RenameNoSync calls os.Rename; the directories it changed are left to the caller to sync.
func (OSFS) RenameNoSync(oldname, newname string) error { return os.Rename(oldname, newname) }

// RemoveNoSync calls os.Remove; name's directory is left to the caller to sync.
func (OSFS) RemoveNoSync(name string) error { return os.Remove(name) }

// ReadDir returns the entries of the directory name as lstat would describe them, in
// directory order.
func (OSFS) ReadDir(name string) ([]fs.FileInfo, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdir(-1)
}

// SyncDir fsyncs the directory name.
func (OSFS) SyncDir(name string) error { return syncDir(name) }

// syncDir fsyncs the directory dir; its error is an *fs.PathError whose Op is
// "sync directory".
func syncDir(dir string) error {
	if err := fsyncDir(dir); err != nil {
		return &fs.PathError{Op: "sync directory", Path: dir, Err: unwrapPath(err)}
	}
	return nil
}

// fsyncDir opens the directory dir read-only and fsyncs it. It is a variable so that tests
// can see which directories the operations sync, and make a sync fail.
var fsyncDir = func(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// unwrapPath returns the cause of an *fs.PathError, so that the path is not named twice.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// parent returns the directory that holds name.
func parent(name string) string { return filepath.Dir(filepath.Clean(name)) }

// renamedDirs returns the directories a rename of oldname to newname changes: newname's,
// then oldname's when it is another one.
func renamedDirs(oldname, newname string) []string {
	dirs := []string{parent(newname)}
	if d := parent(oldname); d != dirs[0] {
		dirs = append(dirs, d)
	}
	return dirs
}
