package nodes

import (
	"slices"
	"testing"

	"github.com/pkg/sftp"
)

// Internal values the external tests check against.
const (
	RootRecordDir = rootRecordDir // where root's command records live
	KillWait      = killWait      // the longest a stopped command's kill is waited for
)

// WriterID names this process in the temporary names of its writes.
var WriterID = writerID

// The hooks below change how the file operations sync directories, for the
// whole package, until tb ends: a test that calls them must not run in
// parallel with others.

// SetLocalDirSync makes the local file operations sync a directory with f;
// f's sync argument fsyncs it for real.
func SetLocalDirSync(tb testing.TB, f func(dir string, sync func() error) error) {
	saved := fsyncLocalDir
	fsyncLocalDir = func(dir string) error { return f(dir, func() error { return saved(dir) }) }
	tb.Cleanup(func() { fsyncLocalDir = saved })
}

// SetSFTPDirSync makes the file operations over SFTP sync a directory with
// f; f's sync argument fsyncs it for real (fsync@openssh.com).
func SetSFTPDirSync(tb testing.TB, f func(dir string, sync func() error) error) {
	saved := fsyncSFTPDir
	fsyncSFTPDir = func(cl *sftp.Client, dir string) error { return f(dir, func() error { return saved(cl, dir) }) }
	tb.Cleanup(func() { fsyncSFTPDir = saved })
}

// SetSyncCommand makes the file operations that sync directories with a
// command run argv followed by the directories.
func SetSyncCommand(tb testing.TB, argv ...string) {
	saved := syncCommand
	syncCommand = slices.Clone(argv)
	tb.Cleanup(func() { syncCommand = saved })
}

// HideSFTPFsync makes cutover take every SFTP server for one without the
// fsync@openssh.com extension.
func HideSFTPFsync(tb testing.TB) {
	saved := fsyncExtension
	fsyncExtension = "no-such-extension@cutover.test"
	tb.Cleanup(func() { fsyncExtension = saved })
}
