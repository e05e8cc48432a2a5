package upgradetest

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cutover/cutover/nodes"
)

// Node is one node of a World: its file system is a directory of the test machine, every
// absolute path taken below it; link targets stay as written, as on a real node. A path
// under the master's directory (the master's file as the test machine names it, e.g.
// ConfigFile, or a Rooted World's paths) names the same path below the node's own directory.
// Commands are recorded, not run. It has the methods of upgrade.Conn.
type Node struct {
	name string
	root string
	w    *World
}

func (n *Node) at(name string) string {
	if rest, ok := strings.CutPrefix(name, filepath.Join(n.w.Dir, n.w.Master)); ok && (rest == "" || rest[0] == '/') {
		name = rest
	}
	return filepath.Join(n.root, name)
}

// Lstat describes name without following a final link.
func (n *Node) Lstat(name string) (fs.FileInfo, error) { return os.Lstat(n.at(name)) }

// Stat describes name.
func (n *Node) Stat(name string) (fs.FileInfo, error) { return os.Stat(n.at(name)) }

// Readlink returns the target of the link name as stored.
func (n *Node) Readlink(name string) (string, error) { return os.Readlink(n.at(name)) }

// Symlink creates newname pointing at oldname.
func (n *Node) Symlink(oldname, newname string) error {
	n.w.changed()
	return os.Symlink(oldname, n.at(newname))
}

// Rename renames oldname to newname, replacing it.
func (n *Node) Rename(oldname, newname string) error {
	n.w.changed()
	return os.Rename(n.at(oldname), n.at(newname))
}

// changed moves the World's fake clock, if it has one, on by a file change.
func (w *World) changed() {
	w.mu.Lock()
	c := w.clock
	w.mu.Unlock()
	if c != nil {
		c.changed()
	}
}

// Remove removes name.
func (n *Node) Remove(name string) error { return os.Remove(n.at(name)) }

// ReadFile reads name.
func (n *Node) ReadFile(name string) ([]byte, error) { return os.ReadFile(n.at(name)) }

// MkdirAll makes name and its parents.
func (n *Node) MkdirAll(name string, perm fs.FileMode) error { return os.MkdirAll(n.at(name), perm) }

// SyncDir fsyncs the directory name.
func (n *Node) SyncDir(name string) error {
	d, err := os.Open(n.at(name))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ReadDir describes the entries of name.
func (n *Node) ReadDir(name string) ([]fs.FileInfo, error) {
	entries, err := os.ReadDir(n.at(name))
	if err != nil {
		return nil, err
	}
	var out []fs.FileInfo
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// WriteFileAtomic writes name through a temporary file renamed into place.
func (n *Node) WriteFileAtomic(name string, data []byte, perm fs.FileMode) error {
	n.w.changed()
	if err := os.MkdirAll(filepath.Dir(n.at(name)), 0o755); err != nil {
		return err
	}
	tmp := n.at(name) + ".tmp"
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return err
	}
	return os.Rename(tmp, n.at(name))
}

// Node is the node's name.
func (n *Node) Node() string { return n.name }

// Run records argv as RunShell records a script, each argument quoted as a shell would need
// it. With Node and RunOutput it gives a Node the methods of a streaming connection
// (staging.Conn), which the prune and staging stages ask for; what such a command prints is
// what Answer set, nothing by default.
func (n *Node) Run(ctx context.Context, argv ...string) (nodes.Result, error) {
	return n.RunShell(ctx, nodes.QuoteArgs(argv))
}

// RunOutput records argv as Run does and writes what Answer set for it to out.
func (n *Node) RunOutput(ctx context.Context, out io.Writer, argv ...string) (nodes.Result, error) {
	res, err := n.RunShell(ctx, nodes.QuoteArgs(argv))
	if _, werr := out.Write(res.Stdout); werr != nil && err == nil {
		err = werr
	}
	return res, err
}

// RunInput records argv as RunShell records a script; the fake nodes read no input.
func (n *Node) RunInput(ctx context.Context, _ io.Reader, argv ...string) (nodes.Result, error) {
	return n.RunShell(ctx, nodes.QuoteArgs(argv))
}

// Prepare records that the run readied the node's connection ahead of its commands.
func (n *Node) Prepare(ctx context.Context) error {
	n.w.mu.Lock()
	defer n.w.mu.Unlock()
	n.w.prepared = append(n.w.prepared, n.name)
	return nil
}

// SetBoot makes the results of node's commands carry the boot identity boot, as those of a
// node's command shell do (nodes.Result.Boot).
func (w *World) SetBoot(node, boot string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.boots[node] = boot
}

// Prepared returns the nodes whose connection a run prepared, in order.
func (w *World) Prepared() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.prepared)
}

// RunShell records script and succeeds, or fails with exit 7 when Fail or FailOnce asked for
// it (with FailWith's error when it holds FailWith's text), or hangs unrecorded when Hang
// asked for it. The checks cutover makes of a node's processes find none (the fake nodes run
// nothing), or print what AnswerChecks set.
func (n *Node) RunShell(ctx context.Context, script string) (nodes.Result, error) {
	if strings.Contains(script, "cutover-check") {
		n.w.mu.Lock()
		defer n.w.mu.Unlock()
		n.w.seq = append(n.w.seq, n.name+": check")
		out := "B \x00E\x00"
		if queued := n.w.checks[n.name]; len(queued) > 0 {
			out = queued[0]
			if len(queued) > 1 {
				n.w.checks[n.name] = queued[1:]
			}
		}
		return nodes.Result{Node: n.name, Stdout: []byte(out)}, nil
	}
	n.w.mu.Lock()
	reached, hang := n.w.hang[n.name+" "+script]
	delete(n.w.hang, n.name+" "+script)
	seen := n.w.seen
	n.w.mu.Unlock()
	if seen != nil {
		seen(n.name, script)
	}
	if hang {
		close(reached)
		<-ctx.Done()
		return nodes.Result{Node: n.name, Command: script}, ctx.Err()
	}
	if err := ctx.Err(); err != nil {
		return nodes.Result{Node: n.name, Command: script}, err
	}
	n.w.mu.Lock()
	defer n.w.mu.Unlock()
	if n.w.clock != nil {
		n.w.clock.ran(script)
	}
	n.w.calls[n.name] = append(n.w.calls[n.name], script)
	n.w.seq = append(n.w.seq, n.name+": "+script)
	failOnce := n.w.once[n.name+" "+script] > 0
	if failOnce {
		n.w.once[n.name+" "+script]--
	}
	if f, ok := n.w.failWith[n.name]; ok && strings.Contains(script, f.holds) {
		return nodes.Result{Node: n.name, Command: script, ExitCode: 1}, f.err
	}
	if failOnce || n.w.fail[n.name+" "+script] {
		return nodes.Result{Node: n.name, Command: script, ExitCode: 7, Stderr: []byte(script + " failed on demand\n")},
			fmt.Errorf("run %q: exit 7: %s failed on demand", script, script)
	}
	out := n.w.out[n.name+" "+script]
	if queued := n.w.outs[n.name+" "+script]; len(queued) > 0 {
		out, n.w.outs[n.name+" "+script] = queued[0], queued[1:]
	}
	return nodes.Result{Node: n.name, Command: script, Stdout: []byte(out), Boot: n.w.boots[n.name], Start: n.w.starts[n.name]}, nil
}
