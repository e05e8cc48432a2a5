package nodes

import (
	"context"
	"errors"
	"io"
)

// sshTransport runs a node's commands over its SSH connection: in the connection's command
// shell (shell.go) where it can, else in a session of their own under the watchdog; and
// reaches its files over SFTP, or plain commands where the node has no SFTP.
type sshTransport struct {
	c    *sshClient
	node string
	pool *Pool // whether command shells are used, and their program
}

// run runs cmd in the connection's command shell when that is free, or else in a session of
// its own: a RunInput command always, and not under the watchdog.
func (t *sshTransport) run(ctx context.Context, cmd *command, stdout, stderr io.Writer) (outcome, error) {
	if cmd.input != nil {
		code, err := t.c.runInput(ctx, cmd.script, cmd.input, stdout, stderr)
		return outcome{code: code}, err
	}
	// A shell that is not used, whatever the reason, leaves the command a session of its own,
	// and so does one that ended before the command ran.
	if !cmd.ownSession {
		if sh, _ := t.shell(ctx, cmd.tag, cmd.reapFirst); sh != nil {
			mode := "sh"
			if cmd.exec {
				mode = "exec"
			}
			code, started, err := sh.run(ctx, mode, cmd.script, stdout, stderr)
			sh.busy.Unlock()
			if !errors.Is(err, errShellGone) {
				return outcome{code: code, boot: sh.boot, start: started, shellStatus: true}, err
			}
		}
	}
	remote := sshLine(cmd.shellCode(), cmd.tag, t.node, t.c.fence)
	if cmd.reapFirst {
		remote = reapLine(cmd.tag, t.node, t.c.fence, t.c.owner()) + remote
	}
	code, err := t.c.run(ctx, remote, stdout, stderr)
	return outcome{code: code}, err
}

// reapsAhead is true: a tagged command's session, or the command shell it runs in, reaps
// ahead of it.
func (t *sshTransport) reapsAhead() bool { return true }

// shell returns the connection's command shell for tag, held busy for the caller, starting it
// (after the reap of tag's leftovers when reap is set) where there is none yet, it serves
// another tag, or reap is asked for; nil when the command is to have a session of its own: the
// shell is busy with another command, or the node cannot run one. The error says why a shell
// that was started is not used (a *shellRefused, a transport error); nil otherwise.
func (t *sshTransport) shell(ctx context.Context, tag string, reap bool) (*remoteShell, error) {
	if t.c.noShell.Load() || t.pool.noShell {
		return nil, nil
	}
	bash := "bash"
	if t.pool.shellBash != "" {
		bash = t.pool.shellBash
	}
	return t.c.acquireShell(ctx, bash, tag, t.node, reap)
}

func (t *sshTransport) fence() string { return t.c.fence }

// files returns the file operations over SFTP, or over plain commands where the node's sshd
// has no SFTP subsystem (found out on first use, not configured).
func (t *sshTransport) files() fileSystem {
	if t.c.usesCommands() {
		return cmdFS{t.c}
	}
	return remoteFS{t.c}
}

func (t *sshTransport) alive() bool  { return t.c.alive() }
func (t *sshTransport) close() error { return t.c.close() }
