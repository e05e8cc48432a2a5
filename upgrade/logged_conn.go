package upgrade

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"

	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/nodes"
)

// loggedConn writes every command a stage runs, and its output, to the run's log.
type loggedConn struct {
	Conn
	node string
	log  *runLog

	mu   sync.Mutex
	prev *nodes.Result
}

func (c *loggedConn) RunShell(ctx context.Context, script string) (nodes.Result, error) {
	return c.command(script, func() (nodes.Result, error) { return c.Conn.RunShell(ctx, script) })
}

func (c *loggedConn) RunInput(ctx context.Context, input io.Reader, argv ...string) (nodes.Result, error) {
	return c.command(nodes.QuoteArgs(argv), func() (nodes.Result, error) { return c.Conn.RunInput(ctx, input, argv...) })
}

// command runs a command through run: its start and its end are crash points, and the log
// gets the command line with what it printed.
func (c *loggedConn) command(line string, run func() (nodes.Result, error)) (nodes.Result, error) {
	crashPoint(true, "%s: command started: %s", c.node, line)
	res, err := run()
	crashPoint(false, "%s: command finished: %s", c.node, line)
	c.log.Command(c.node, line, res, err)
	c.mu.Lock()
	c.prev = &res
	c.mu.Unlock()
	return res, onNode(c.node, err)
}

// The file operations that change a node are crash points.

func (c *loggedConn) Symlink(oldname, newname string) error {
	return c.wrote("symlink "+newname, c.Conn.Symlink(oldname, newname))
}

func (c *loggedConn) Rename(oldname, newname string) error {
	return c.wrote("rename "+oldname+" to "+newname, c.Conn.Rename(oldname, newname))
}

func (c *loggedConn) Remove(name string) error {
	return c.wrote("remove "+name, c.Conn.Remove(name))
}

// The NoSync forms leave the sync of the directory to the caller (layout.NoSyncFS), so that a
// link switch syncs its directory once after both links changed and before it returns; on a
// connection without them they sync as the plain forms do. Each is a crash point like the
// plain form.
var _ layout.NoSyncFS = (*loggedConn)(nil)

func (c *loggedConn) SymlinkNoSync(oldname, newname string) error {
	if ns, ok := c.Conn.(layout.NoSyncFS); ok {
		return c.wrote("symlink "+newname, ns.SymlinkNoSync(oldname, newname))
	}
	return c.Symlink(oldname, newname)
}

func (c *loggedConn) RenameNoSync(oldname, newname string) error {
	if ns, ok := c.Conn.(layout.NoSyncFS); ok {
		return c.wrote("rename "+oldname+" to "+newname, ns.RenameNoSync(oldname, newname))
	}
	return c.Rename(oldname, newname)
}

func (c *loggedConn) RemoveNoSync(name string) error {
	if ns, ok := c.Conn.(layout.NoSyncFS); ok {
		return c.wrote("remove "+name, ns.RemoveNoSync(name))
	}
	return c.Remove(name)
}

func (c *loggedConn) WriteFileAtomic(name string, data []byte, perm fs.FileMode) error {
	return c.wrote("write "+name, c.Conn.WriteFileAtomic(name, data, perm))
}

func (c *loggedConn) MkdirAll(name string, perm fs.FileMode) error {
	return c.wrote("mkdir "+name, c.Conn.MkdirAll(name, perm))
}

// probe runs argv as a shell command (under the watchdog, so that it never outlives
// cutover) and logs it, but is no crash point: it changes nothing.
func (c *loggedConn) probe(ctx context.Context, argv ...string) (nodes.Result, error) {
	line := nodes.QuoteArgs(argv)
	res, err := c.Conn.RunShell(ctx, line)
	c.log.Command(c.node, line, res, err)
	return res, onNode(c.node, err)
}

func (c *loggedConn) wrote(what string, err error) error {
	crashPoint(false, "%s: %s", c.node, what)
	return err
}

func (c *loggedConn) last() *nodes.Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.prev
}

// onNode names node in err unless the message already starts with it.
func onNode(node string, err error) error {
	if err == nil || strings.HasPrefix(err.Error(), node+": ") {
		return err
	}
	return fmt.Errorf("%s: %w", node, err)
}
