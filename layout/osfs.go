package layout

import (
	"io/fs"
	"os"
)

// OSFS is the FS of the local machine, through the os package.
type OSFS struct{}

// Lstat calls os.Lstat.
func (OSFS) Lstat(name string) (fs.FileInfo, error) { return os.Lstat(name) }

// Stat calls os.Stat.
func (OSFS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

// Readlink calls os.Readlink.
func (OSFS) Readlink(name string) (string, error) { return os.Readlink(name) }

// Symlink calls os.Symlink.
func (OSFS) Symlink(oldname, newname string) error { return os.Symlink(oldname, newname) }

// Rename calls os.Rename, which is rename(2) on POSIX systems.
func (OSFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// Remove calls os.Remove.
func (OSFS) Remove(name string) error { return os.Remove(name) }

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
