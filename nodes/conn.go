package nodes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sync"
	"time"
)

// Conn is one node's connection: local for the master, SSH for the others.
// It is safe for concurrent use. Its file operations take absolute paths and
// work through the os package locally and through SFTP over the same SSH
// connection remotely; a missing path gives an error that satisfies
// errors.Is(err, fs.ErrNotExist). The file operations that change a
// directory (Symlink, Rename, Remove, MkdirAll, WriteFileAtomic) sync it
// before they return, so what they report survives a power cut of the node;
// when the sync fails, so does the operation, naming the directory.
type Conn struct {
	name    string
	timeout time.Duration // per command
	tr      transport     // local or SSH
	pool    *Pool         // holds the command tag

	reapMu sync.Mutex
	reaped map[string]bool // command tags whose earlier commands were killed through this connection
}

// fileSystem is what a node's file operations are built on.
type fileSystem interface {
	Lstat(name string) (fs.FileInfo, error)
	Stat(name string) (fs.FileInfo, error)
	Readlink(name string) (string, error)
	Symlink(oldname, newname string) error
	Rename(oldname, newname string) error
	Remove(name string) error
	SymlinkNoSync(oldname, newname string) error
	RenameNoSync(oldname, newname string) error
	RemoveNoSync(name string) error
	ReadDir(name string) ([]fs.FileInfo, error)
	ReadFile(name string) ([]byte, error)
	WriteFileAtomic(name string, data []byte, perm fs.FileMode) error
	MkdirAll(name string, perm fs.FileMode) error
	Chmod(name string, perm fs.FileMode) error
	SyncDir(name string) error
}

// files returns the file operations of the node: the os package locally,
// SFTP over SSH, or plain commands where the node's sshd has no SFTP
// subsystem (found out on first use, not configured).
func (c *Conn) files() fileSystem { return c.tr.files() }

// Node returns the name of the node the connection reaches.
func (c *Conn) Node() string { return c.name }

// Local reports whether the connection is the master's own, local one.
func (c *Conn) Local() bool {
	_, ok := c.tr.(localTransport)
	return ok
}

// alive reports whether the connection can still be used.
func (c *Conn) alive() bool { return c.tr.alive() }

// close ends an SSH connection; the local one has nothing to close.
func (c *Conn) close() error { return c.tr.close() }

// Run runs argv on the node: the arguments are quoted with QuoteArgs and the
// line is run by sh under cutover's watchdog (over SSH the login shell, which
// must be a POSIX shell, execs that sh). The command reads an empty standard
// input. Run returns a non-nil error when the command does not exit 0,
// naming the node, the command, the exit code and the tail of its standard
// error, and when the connection fails or the command timeout or ctx ends
// it; the Result is filled as far as known in every case. A command that
// runs out of time or whose ctx ends is killed with its process group before
// Run returns (see the package documentation), and its error satisfies
// IsTimeout or wraps ctx's error.
func (c *Conn) Run(ctx context.Context, argv ...string) (Result, error) {
	return c.runArgv(ctx, nil, argv)
}

// RunOutput runs argv as Run does, but writes the command's standard output to out as it
// comes instead of keeping it, for output that may pass Run's read limit (the listing of a
// tree of 100,000 files). The Result's Stdout is empty. out should not fail: what it does
// with output it cannot use, it remembers, and its caller asks it after RunOutput returns.
func (c *Conn) RunOutput(ctx context.Context, out io.Writer, argv ...string) (Result, error) {
	if out == nil {
		out = io.Discard
	}
	return c.runArgv(ctx, out, argv)
}

// RunOutputOwnSession runs argv as RunOutput does, but over SSH in a session of its own under
// the watchdog, never in the connection's command shell, which it does not start: for the one
// command a connection runs (a check that reads each node once), which a session of its own
// runs for about half of what starting the shell costs. Locally it is RunOutput.
func (c *Conn) RunOutputOwnSession(ctx context.Context, out io.Writer, argv ...string) (Result, error) {
	if out == nil {
		out = io.Discard
	}
	return c.runArgvIn(ctx, out, argv, true)
}

// runArgv runs argv for Run (out nil) and RunOutput.
func (c *Conn) runArgv(ctx context.Context, out io.Writer, argv []string) (Result, error) {
	return c.runArgvIn(ctx, out, argv, false)
}

// runArgvIn runs argv, in a session of its own over SSH when ownSession is set.
func (c *Conn) runArgvIn(ctx context.Context, out io.Writer, argv []string, ownSession bool) (Result, error) {
	if len(argv) == 0 {
		return Result{Node: c.name, ExitCode: -1}, fmt.Errorf("%s: run: no command given", c.name)
	}
	line := QuoteArgs(argv)
	return c.run(ctx, &command{line: line, shown: line, script: line, exec: true, out: out, ownSession: ownSession})
}

// RunShell runs script with `sh -c` on the node, with the same results and
// errors as Run: the command line is `sh -c SCRIPT` (the Result's Command).
// The script reaches sh unchanged, so it may use any shell syntax; it must
// not contain unvalidated input. It is the line the watchdog's sh runs
// itself, rather than an sh started by that line: a process less per
// command.
func (c *Conn) RunShell(ctx context.Context, script string) (Result, error) {
	return c.run(ctx, &command{line: "sh -c " + Quote(script), shown: script, script: script})
}

// run runs cmd under the watchdog, tagged with the pool's command tag. When
// the pool has a command tag, what commands of that tag left running on the
// node is killed first (once per connection and tag): over SSH by the same
// session, ahead of the command.
func (c *Conn) run(ctx context.Context, cmd *command) (Result, error) {
	tag := c.pool.commandTag()
	cmd.tag = tag
	if tag == "" || !c.tr.reapsAhead() {
		if err := c.reap(ctx, tag); err != nil {
			return Result{Node: c.name, Command: cmd.line, ExitCode: -1}, err
		}
		return c.exec(ctx, cmd)
	}
	c.reapMu.Lock()
	if c.reaped[tag] {
		c.reapMu.Unlock()
		return c.exec(ctx, cmd)
	}
	// The first command of the tag on this connection reaps ahead of itself;
	// the lock holds back the connection's other commands of the tag until
	// it has.
	cmd.reapFirst = true
	res, err := c.exec(ctx, cmd)
	if res.ExitCode >= 0 {
		c.markReaped(tag)
	}
	c.reapMu.Unlock()
	return res, err
}

// reap kills, once per connection and tag, the commands of tag that an
// earlier execution (or an earlier, lost connection) left running on the
// node, and removes their records: in a session of its own. Concurrent
// callers wait for the first. An empty tag has nothing to reap.
func (c *Conn) reap(ctx context.Context, tag string) error {
	if tag == "" {
		return nil
	}
	c.reapMu.Lock()
	defer c.reapMu.Unlock()
	if c.reaped[tag] {
		return nil
	}
	reapOnly := reapLine(tag, c.name, c.tr.fence(), c.pool.connectionOwner()) + "exit 0\n"
	cmd := &command{line: reapOnly, shown: "kill the commands of " + tag + " left running", script: reapOnly, ownSession: true}
	if _, err := c.exec(ctx, cmd); err != nil {
		return err
	}
	c.markReaped(tag)
	return nil
}

// markReaped notes that tag's leftovers on the node are gone; the caller
// holds reapMu.
func (c *Conn) markReaped(tag string) {
	if c.reaped == nil {
		c.reaped = make(map[string]bool)
	}
	c.reaped[tag] = true
}

// beforeWrite reaps the command tag's leftovers, if that has not happened on
// this connection yet, before a file operation that changes the node.
func (c *Conn) beforeWrite(op, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if err := c.reap(ctx, c.pool.commandTag()); err != nil {
		return fmt.Errorf("%s %s: %w", op, name, err)
	}
	return nil
}

// fsError wraps a file operation's error with the node's name.
func (c *Conn) fsError(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", c.name, err)
}

// checkAbs refuses a path that is not absolute: remotely it would resolve
// against the login's home directory.
func (c *Conn) checkAbs(op string, names ...string) error {
	for _, name := range names {
		if !path.IsAbs(name) {
			return fmt.Errorf("%s: %s %q: %w", c.name, op, name, errNotAbsolute)
		}
	}
	return nil
}

var errNotAbsolute = errors.New("path is not absolute")

// Lstat describes the named file; a symbolic link is described itself.
func (c *Conn) Lstat(name string) (fs.FileInfo, error) {
	if err := c.checkAbs("lstat", name); err != nil {
		return nil, err
	}
	fi, err := c.files().Lstat(name)
	return fi, c.fsError(err)
}

// Stat describes the named file, following symbolic links.
func (c *Conn) Stat(name string) (fs.FileInfo, error) {
	if err := c.checkAbs("stat", name); err != nil {
		return nil, err
	}
	fi, err := c.files().Stat(name)
	return fi, c.fsError(err)
}

// Readlink returns the target of the symbolic link name, as stored.
func (c *Conn) Readlink(name string) (string, error) {
	if err := c.checkAbs("readlink", name); err != nil {
		return "", err
	}
	target, err := c.files().Readlink(name)
	return target, c.fsError(err)
}

// Symlink creates newname as a symbolic link to oldname, then syncs its
// directory. oldname is stored as given and may be relative; newname must not
// exist.
func (c *Conn) Symlink(oldname, newname string) error {
	if oldname == "" {
		return fmt.Errorf("%s: symlink %q: empty target", c.name, newname)
	}
	return c.change("symlink", newname, func() error { return c.files().Symlink(oldname, newname) }, newname)
}

// Rename renames oldname to newname with POSIX semantics: an existing
// newname (a file or a symbolic link) is replaced atomically. Remotely it
// uses the posix-rename@openssh.com SFTP extension. It then syncs newname's
// directory, and oldname's when that is another one.
func (c *Conn) Rename(oldname, newname string) error {
	return c.change("rename", newname, func() error { return c.files().Rename(oldname, newname) }, oldname, newname)
}

// Remove removes the named file, symbolic link or empty directory, then
// syncs its directory.
func (c *Conn) Remove(name string) error {
	return c.change("remove", name, func() error { return c.files().Remove(name) }, name)
}

// SymlinkNoSync is Symlink without the sync of newname's directory: the link
// may be lost to a power cut of the node until the caller's SyncDir of that
// directory returns (see layout.NoSyncFS).
func (c *Conn) SymlinkNoSync(oldname, newname string) error {
	if oldname == "" {
		return fmt.Errorf("%s: symlink %q: empty target", c.name, newname)
	}
	return c.change("symlink", newname, func() error { return c.files().SymlinkNoSync(oldname, newname) }, newname)
}

// RenameNoSync is Rename without the sync of the directories it changed: the
// rename may be undone by a power cut of the node until the caller's SyncDir
// of them returns (see layout.NoSyncFS).
func (c *Conn) RenameNoSync(oldname, newname string) error {
	return c.change("rename", newname, func() error { return c.files().RenameNoSync(oldname, newname) }, oldname, newname)
}

// RemoveNoSync is Remove without the sync of name's directory: the removal
// may be undone by a power cut of the node until the caller's SyncDir of that
// directory returns (see layout.NoSyncFS).
func (c *Conn) RemoveNoSync(name string) error {
	return c.change("remove", name, func() error { return c.files().RemoveNoSync(name) }, name)
}

// change makes one change to the node's files after the checks every change gets: every
// path in paths absolute, and no command of a dead execution still running (beforeWrite of
// target, the path changed).
func (c *Conn) change(op, target string, do func() error, paths ...string) error {
	if err := c.checkAbs(op, paths...); err != nil {
		return err
	}
	if err := c.beforeWrite(op, target); err != nil {
		return err
	}
	return c.fsError(do())
}

// ReadDir describes the entries of the named directory, sorted by name.
// Symbolic links are described themselves.
func (c *Conn) ReadDir(name string) ([]fs.FileInfo, error) {
	if err := c.checkAbs("readdir", name); err != nil {
		return nil, err
	}
	infos, err := c.files().ReadDir(name)
	return infos, c.fsError(err)
}

// ReadFile returns the contents of the named file.
func (c *Conn) ReadFile(name string) ([]byte, error) {
	if err := c.checkAbs("read", name); err != nil {
		return nil, err
	}
	data, err := c.files().ReadFile(name)
	return data, c.fsError(err)
}

// WriteFileAtomic replaces the named file with data and mode perm so that a
// reader sees either the old or the new contents: it writes a temporary file
// in the same directory, syncs it to disk, sets perm (exactly, whatever the
// umask), renames it over name and syncs the directory. The temporary file
// is removed when a step before the rename fails. The new file belongs to
// the login user (over SSH) or to this process.
func (c *Conn) WriteFileAtomic(name string, data []byte, perm fs.FileMode) error {
	if err := c.checkAbs("write", name); err != nil {
		return err
	}
	if perm&^fs.ModePerm != 0 {
		return fmt.Errorf("%s: write %s: mode %v has more than permission bits", c.name, name, perm)
	}
	if err := c.beforeWrite("write", name); err != nil {
		return err
	}
	return c.fsError(c.files().WriteFileAtomic(name, data, perm))
}

// MkdirAll creates the directory name and any missing parents. Directories it
// creates get perm (locally less the umask); existing ones are left alone.
// It syncs every directory it created and the directory holding each, so
// the new ones are durable up to the existing one they were made in.
func (c *Conn) MkdirAll(name string, perm fs.FileMode) error {
	if err := c.checkAbs("mkdir", name); err != nil {
		return err
	}
	if err := c.beforeWrite("mkdir", name); err != nil {
		return err
	}
	return c.fsError(c.files().MkdirAll(name, perm))
}

// Chmod sets the permission bits of the named file.
func (c *Conn) Chmod(name string, perm fs.FileMode) error {
	if err := c.checkAbs("chmod", name); err != nil {
		return err
	}
	if err := c.beforeWrite("chmod", name); err != nil {
		return err
	}
	return c.fsError(c.files().Chmod(name, perm))
}

// SyncDir fsyncs the named directory, making its entries durable: locally
// with fsync(2), over SFTP with the fsync@openssh.com extension (or the sync
// command when the server lacks it), and with the sync command on a node
// without SFTP. It changes nothing.
func (c *Conn) SyncDir(name string) error {
	if err := c.checkAbs("sync directory", name); err != nil {
		return err
	}
	return c.fsError(c.files().SyncDir(name))
}
