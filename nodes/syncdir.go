package nodes

import (
	"io/fs"
	"os"
	"path"
	"slices"
)

// Durability: every file operation that changes a directory (Symlink,
// Rename, Remove, MkdirAll, WriteFileAtomic) fsyncs the directories it
// changed before it returns, on every transport: locally with fsync(2),
// over SFTP with the fsync@openssh.com extension on the directory opened
// read-only (or, when the server lacks it, with the sync command over the
// node's SSH connection), and over plain commands with sync. So a change an
// operation reported is on stable storage, and a power cut of the node
// cannot undo it. A sync that fails fails the operation, naming the
// directory; the change itself may have happened. SymlinkNoSync, RenameNoSync
// and RemoveNoSync are the exceptions, named so: they leave the sync to their
// caller, who changes one directory several times and then syncs it once with
// SyncDir before anything relies on the changes (layout.Switch does).

// parentDir returns the directory holding name.
func parentDir(name string) string { return path.Dir(path.Clean(name)) }

// renamedDirs returns the directories a rename of oldname to newname
// changes: newname's, then oldname's when it is another one.
func renamedDirs(oldname, newname string) []string {
	dirs := []string{parentDir(newname)}
	if d := parentDir(oldname); d != dirs[0] {
		dirs = append(dirs, d)
	}
	return dirs
}

// mkdirSyncs returns the directories to sync after MkdirAll created the
// directories created (parents first): each of them and the directory that
// holds it, deepest first, each once.
func mkdirSyncs(created []string) []string {
	var dirs []string
	for i := len(created) - 1; i >= 0; i-- {
		for _, d := range []string{created[i], parentDir(created[i])} {
			if !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
			}
		}
	}
	return dirs
}

// pathError reports err, a failure of op on name after name was changed,
// as an *fs.PathError; nil stays nil.
func pathError(op, name string, err error) error {
	if err == nil {
		return nil
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// linkError reports err, a failure of op on two paths after they were
// changed, as an *os.LinkError; nil stays nil.
func linkError(op, oldname, newname string, err error) error {
	if err == nil {
		return nil
	}
	return &os.LinkError{Op: op, Old: oldname, New: newname, Err: err}
}
