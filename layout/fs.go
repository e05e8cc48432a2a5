package layout

import "io/fs"

// FS is the small set of file operations layout needs on one node. The caller's node
// connection (the local os package, or SFTP) satisfies it. Paths are absolute and use "/".
// A missing path must give an error that satisfies errors.Is(err, fs.ErrNotExist).
//
// The operations that change a directory (Symlink, Rename, Remove) make the change durable
// before they return: they fsync the directories they changed, so that a power cut after
// they return cannot undo them. An operation whose change could not be made durable fails,
// and its error names the directory.
type FS interface {
	// Lstat describes name without following a final symlink.
	Lstat(name string) (fs.FileInfo, error)
	// Stat describes name, following symlinks.
	Stat(name string) (fs.FileInfo, error)
	// Readlink returns the target of the symlink name, exactly as stored.
	Readlink(name string) (string, error)
	// Symlink creates newname as a symlink to oldname, then syncs newname's directory; it
	// fails if newname exists.
	Symlink(oldname, newname string) error
	// Rename is a POSIX rename: it atomically replaces newname if it exists. (Over SFTP this
	// is the posix-rename@openssh.com extension, not the plain SFTP rename.) It then syncs
	// newname's directory, and oldname's when that is another one.
	Rename(oldname, newname string) error
	// Remove removes the file or symlink name, then syncs its directory.
	Remove(name string) error
	// ReadDir describes the entries of the directory name, without following symlinks.
	ReadDir(name string) ([]fs.FileInfo, error)
	// SyncDir fsyncs the directory name, making the entries it holds durable.
	SyncDir(name string) error
}

// NoSyncFS is an FS that can also change a directory without syncing it, so that a caller
// that changes one directory several times syncs it once, with SyncDir, after the last
// change and before it returns (a caller records nothing durable before that sync). A change
// made through one of these methods may be undone by a power cut until that SyncDir
// returns: each says so in its name, so that no caller can forget the sync by accident.
// Switch uses them when the FS has them, and otherwise the operations of FS, which sync
// each change.
type NoSyncFS interface {
	FS
	// SymlinkNoSync is Symlink without the sync of newname's directory.
	SymlinkNoSync(oldname, newname string) error
	// RenameNoSync is Rename without the sync of the directories it changed.
	RenameNoSync(oldname, newname string) error
	// RemoveNoSync is Remove without the sync of name's directory.
	RemoveNoSync(name string) error
}
