package nodes

import (
	"context"
	"slices"
	"testing"

	"github.com/pkg/sftp"
)

// Internal values the external tests check against.
const (
	RootRecordDir = rootRecordDir // where root's command records live
	KillWait      = killWait      // the longest a stopped command's kill is waited for
)

// NoCommandShell gives every command of p over SSH a session of its own, as on a node without
// bash: the tests of that path use it.
func NoCommandShell(p *Pool) { p.noShell = true }

// SetShellBash makes p's command shells start the program bash instead of bash: a name that is
// not installed stands for a node without bash.
func SetShellBash(p *Pool, bash string) { p.shellBash = bash }

// StartShell starts a command shell for c's node, untagged, as its first command would, closes
// it again, and returns why it could not be used (nil when it could).
func StartShell(ctx context.Context, c *Conn) error {
	s, err := sshOf(c).startShell(ctx, "bash", "", c.name, false)
	if s != nil {
		s.close()
	}
	return err
}

// SetShellGoHook makes c's connection call f between its command shell's ask to run a command
// and cutover's go, from now on.
func SetShellGoHook(c *Conn, f func()) { sshOf(c).beforeGo = f }

// sshOf is c's SSH connection; c must not be the local one.
func sshOf(c *Conn) *sshClient { return c.tr.(*sshTransport).c }

// Alive reports whether c's connection is still usable.
func Alive(c *Conn) bool { return c.alive() }

// CommandShellOff reports whether c's pool gives every command a session of its own.
func CommandShellOff(c *Conn) bool { return c.pool != nil && c.pool.noShell }

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
