package journal

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// MkdirAllDurable creates the directory dir and its missing parents with
// perm (less the umask), as os.MkdirAll does, and makes them durable: it
// fsyncs every directory it created and the directory holding each, up to
// the existing one they were made in, so that what is later recorded in dir
// cannot lose its directory to a power cut. When dir already exists it
// fsyncs dir and its parent, which makes durable a directory that another
// process created a moment ago without syncing it. cutover's state
// directory is created with it, by the journal, the intent and the lock.
func MkdirAllDurable(dir string, perm fs.FileMode) error {
	dir = filepath.Clean(dir)
	var missing []string
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err == nil {
			if !fi.IsDir() {
				return &fs.PathError{Op: "mkdir", Path: p, Err: syscall.ENOTDIR}
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || filepath.Dir(p) == p {
			return err
		}
		missing = append(missing, p)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], perm); err != nil {
			if fi, serr := os.Stat(missing[i]); serr != nil || !fi.IsDir() {
				return err
			}
		}
	}
	// Sync from dir up to the directory that held the highest new one (or
	// dir's parent when none was new).
	top := dir
	if len(missing) > 0 {
		top = missing[len(missing)-1]
	}
	for p := dir; ; p = filepath.Dir(p) {
		if err := syncDir(p); err != nil {
			return err
		}
		if p == filepath.Dir(top) || p == filepath.Dir(p) {
			return nil
		}
	}
}

// syncDir fsyncs the directory dir, making a rename, removal or new entry in
// it durable. Its error is an *fs.PathError whose Op is "sync directory".
func syncDir(dir string) error {
	if err := fsyncDir(dir); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return &fs.PathError{Op: "sync directory", Path: dir, Err: err}
	}
	return nil
}

// fsyncDir opens the directory dir read-only and fsyncs it. It is a variable
// so that tests can see which directories are synced, and make a sync fail.
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

// SyncDir fsyncs the directory dir, making a rename, removal or new entry in it durable.
func SyncDir(dir string) error { return syncDir(dir) }
