package nodes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// localFS implements a node's file operations with the os package. The
// operations that change a directory fsync it before they return.
type localFS struct{}

func (localFS) Lstat(name string) (fs.FileInfo, error)    { return os.Lstat(name) }
func (localFS) Stat(name string) (fs.FileInfo, error)     { return os.Stat(name) }
func (localFS) Readlink(name string) (string, error)      { return os.Readlink(name) }
func (localFS) ReadFile(name string) ([]byte, error)      { return os.ReadFile(name) }
func (localFS) Chmod(name string, perm fs.FileMode) error { return os.Chmod(name, perm) }

// Symlink creates newname and syncs its directory.
func (l localFS) Symlink(oldname, newname string) error {
	if err := l.SymlinkNoSync(oldname, newname); err != nil {
		return err
	}
	return linkError("symlink", oldname, newname, l.syncDirs(parentDir(newname)))
}

// Rename renames oldname to newname and syncs the directories it changed.
func (l localFS) Rename(oldname, newname string) error {
	if err := l.RenameNoSync(oldname, newname); err != nil {
		return err
	}
	return linkError("rename", oldname, newname, l.syncDirs(renamedDirs(oldname, newname)...))
}

// Remove removes name and syncs its directory.
func (l localFS) Remove(name string) error {
	if err := l.RemoveNoSync(name); err != nil {
		return err
	}
	return pathError("remove", name, l.syncDirs(parentDir(name)))
}

// SymlinkNoSync creates newname, leaving its directory to the caller to sync.
func (localFS) SymlinkNoSync(oldname, newname string) error { return os.Symlink(oldname, newname) }

// RenameNoSync renames oldname to newname, leaving the directories to the
// caller to sync.
func (localFS) RenameNoSync(oldname, newname string) error { return os.Rename(oldname, newname) }

// RemoveNoSync removes name, leaving its directory to the caller to sync.
func (localFS) RemoveNoSync(name string) error { return os.Remove(name) }

// MkdirAll creates name and its missing parents with perm (less the umask),
// then syncs every directory it created and the directory holding each.
func (l localFS) MkdirAll(name string, perm fs.FileMode) error {
	created, err := mkdirAllLocal(filepath.Clean(name), perm)
	if err != nil {
		return err
	}
	return pathError("mkdir", name, l.syncDirs(mkdirSyncs(created)...))
}

// mkdirAllLocal creates dir and its missing parents with perm and returns
// the directories it created, parents first. A directory another process
// creates meanwhile is taken as it is.
func mkdirAllLocal(dir string, perm fs.FileMode) ([]string, error) {
	var missing []string
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err == nil {
			if !fi.IsDir() {
				return nil, &fs.PathError{Op: "mkdir", Path: p, Err: syscall.ENOTDIR}
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || filepath.Dir(p) == p {
			return nil, err
		}
		missing = append(missing, p)
	}
	var created []string
	for i := len(missing) - 1; i >= 0; i-- {
		p := missing[i]
		if err := os.Mkdir(p, perm); err != nil {
			if fi, serr := os.Stat(p); serr == nil && fi.IsDir() {
				continue
			}
			return nil, err
		}
		created = append(created, p)
	}
	return created, nil
}

// SyncDir fsyncs the directory name.
func (l localFS) SyncDir(name string) error { return l.syncDirs(name) }

// syncDirs fsyncs each of dirs; the error is an *fs.PathError whose Op is
// "sync directory".
func (localFS) syncDirs(dirs ...string) error {
	if skipSync {
		return nil
	}
	for _, dir := range dirs {
		if err := fsyncLocalDir(dir); err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return &fs.PathError{Op: "sync directory", Path: dir, Err: err}
		}
	}
	return nil
}

// fsyncLocalDir opens the local directory dir read-only and fsyncs it. It is
// a variable so that tests can see which directories the operations sync,
// and make a sync fail.
var fsyncLocalDir = func(dir string) error {
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

func (localFS) ReadDir(name string) ([]fs.FileInfo, error) {
	entries, err := os.ReadDir(name)
	if err != nil {
		return nil, err
	}
	infos := make([]fs.FileInfo, 0, len(entries))
	for _, e := range entries {
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the directory was read
		}
		if err != nil {
			return nil, err
		}
		infos = append(infos, info)
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name() < infos[j].Name() })
	return infos, nil
}

// WriteFileAtomic writes a temporary file next to name, syncs it, sets perm,
// renames it over name and syncs the directory. The temporary file's name
// carries this process's id; those a killed writer left are removed first.
func (l localFS) WriteFileAtomic(name string, data []byte, perm fs.FileMode) (err error) {
	dir, base := filepath.Split(name)
	removeDeadLocalTemps(dir, base)
	f, err := os.CreateTemp(dir, fmt.Sprintf("%s%d-*", tempPrefix(base), os.Getpid()))
	if err != nil {
		return err
	}
	tmp := f.Name()
	placed := false
	defer func() {
		if err != nil && !placed {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if !skipSync {
		if err = f.Sync(); err != nil {
			return err
		}
	}
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, name); err != nil {
		return err
	}
	placed = true
	return pathError("write", name, l.syncDirs(parentDir(name)))
}

// removeDeadLocalTemps removes the temporary files a local WriteFileAtomic of
// base left in dir when its process was killed before the rename: their
// names carry the writer's process id, and a process that no longer runs
// will never rename its file. A live writer's file is left alone.
func removeDeadLocalTemps(dir, base string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), tempPrefix(base))
		if !ok || !e.Type().IsRegular() {
			continue
		}
		id, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(id)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
