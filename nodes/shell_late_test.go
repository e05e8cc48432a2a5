package nodes_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/nodes/sshdtest"
)

// TestCommandShellLateRequest sends a command to a node that cannot answer (its sshd and the
// shell are stopped, as a node cut off the network), gives it up, and closes the connection:
// when the node answers again, the request and the connection's end reach the shell together,
// and the command must not run, since cutover is no longer waiting for it.
func TestCommandShellLateRequest(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1)
	s := c.Servers[0]
	for _, how := range []string{"given up", "connection closed"} {
		p := newPool(t, c, func(cfg *nodes.SSHConfig) { cfg.KeepaliveInterval = time.Hour })
		cn := conn(t, p, s.Name)
		if res, err := cn.RunShell(context.Background(), parentScript); err != nil || string(res.Stdout) != "shell\n" {
			t.Fatalf("%s: first command: %q, %v; want it in the command shell", how, res.Stdout, err)
		}
		mark := filepath.Join(c.UserDir(t), "late-"+strings.ReplaceAll(how, " ", "-"))
		s.Freeze(t)
		if how == "given up" {
			// The node answers again within killWait: the shell reads the request and
			// cutover's kill on a connection that still works.
			go func() {
				time.Sleep(time.Second)
				s.Thaw(t)
			}()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err := cn.RunShell(ctx, "touch "+nodes.Quote(mark))
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: the command to a frozen node: %v, want its deadline", how, err)
		}
		if how == "connection closed" {
			p.Close()
			s.Thaw(t)
		}
		time.Sleep(time.Second)
		if _, err := os.Stat(mark); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: the command ran after it was given up (%s: %v)", how, mark, err)
		}
		p.Close()
	}
}

// TestCommandShellGoneBeforeAsk: a command whose shell ended before it asked to run it never
// ran there, and runs in a session of its own instead.
func TestCommandShellGoneBeforeAsk(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1, sshdtest.WithForcedCommand(hostileShell(`printf '\ncutover-shell-ready 0\n\ncutover-shell-ready end\n'
read -r op b rest
printf '\n%s end\n' "$b"; printf '\n%s end\n' "$b" >&2
exit 98`)))
	p := newPool(t, c, nil)
	cn := conn(t, p, "node1")
	res, err := cn.RunShell(context.Background(), parentScript)
	if err != nil || string(res.Stdout) != "session\n" || res.Boot != "" {
		t.Errorf("the command: ran in %q (%v), boot %q; want a session of its own", res.Stdout, err, res.Boot)
	}
}

// TestLateGoNeverActs holds a command's go back, as a network that delays the packets of one
// connection does, and delivers it after the connection was given up: a go later than the
// connection's keepalive span, and a go after a newer connection of the same run (command tag)
// reached the node, on the command shell and on a command in a session of its own. The
// command must not run in any of them: once cutover has given a connection up for a newer
// one, or for lost, nothing it sent before acts on the node.
func TestLateGoNeverActs(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1, sshdtest.WithRootLogin())
	ctx := context.Background()
	short := func(cfg *nodes.SSHConfig) { cfg.KeepaliveInterval, cfg.KeepaliveMax = 500*time.Millisecond, 2 }

	t.Run("go after the keepalive span", func(t *testing.T) {
		cn := conn(t, newPool(t, c, short), "node1")
		nodes.SetShellGoHook(cn, func() { time.Sleep(2500 * time.Millisecond) })
		mark := filepath.Join(t.TempDir(), "mark")
		res, err := cn.RunShell(ctx, "touch "+nodes.Quote(mark))
		if err == nil {
			t.Errorf("a go a second and a half past the keepalive span: %+v, want an error", res)
		}
		time.Sleep(500 * time.Millisecond)
		if _, err := os.Stat(mark); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the command ran on a go that came after the keepalive span (%v)", err)
		}
	})

	t.Run("go after a newer connection", func(t *testing.T) {
		tag := uniqueTag()
		old := newPool(t, c, nil)
		if err := old.SetCommandTag(tag); err != nil {
			t.Fatal(err)
		}
		newer := newPool(t, c, nil)
		if err := newer.SetCommandTag(tag); err != nil {
			t.Fatal(err)
		}
		oldConn := conn(t, old, "node1")
		if _, err := oldConn.Run(ctx, "true"); err != nil {
			t.Fatal(err)
		}
		var took error
		nodes.SetShellGoHook(oldConn, func() {
			// The newer connection reaches the node while the old one's go is held.
			_, took = conn(t, newer, "node1").Run(ctx, "true")
		})
		mark := filepath.Join(t.TempDir(), "mark")
		res, err := oldConn.RunShell(ctx, "touch "+nodes.Quote(mark))
		if took != nil {
			t.Fatalf("the newer connection's command: %v", took)
		}
		if err == nil {
			t.Errorf("the old connection's command after a newer one took over: %+v, want an error", res)
		}
		time.Sleep(500 * time.Millisecond)
		if _, err := os.Stat(mark); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the command ran on a go that came after a newer connection took over (%v)", err)
		}
		// The newer connection's commands still run, in its shell.
		if res, err := conn(t, newer, "node1").RunShell(ctx, parentScript); err != nil || string(res.Stdout) != "shell\n" {
			t.Errorf("the newer connection's next command: %q, %v; want it run in its command shell", res.Stdout, err)
		}
	})

	t.Run("session after a newer connection", func(t *testing.T) {
		tag := uniqueTag()
		old, newer := newPool(t, c, nil), newPool(t, c, nil)
		for _, p := range []*nodes.Pool{old, newer} {
			nodes.NoCommandShell(p)
			if err := p.SetCommandTag(tag); err != nil {
				t.Fatal(err)
			}
		}
		oldConn := conn(t, old, "node1")
		if _, err := oldConn.Run(ctx, "true"); err != nil {
			t.Fatal(err)
		}
		if _, err := conn(t, newer, "node1").Run(ctx, "true"); err != nil {
			t.Fatal(err)
		}
		mark := filepath.Join(t.TempDir(), "mark")
		res, err := oldConn.RunShell(ctx, "touch "+nodes.Quote(mark))
		if err == nil || res.ExitCode != 96 || !strings.Contains(string(res.Stderr), "a newer connection") {
			t.Errorf("the old connection's command after a newer one took over: exit %d, %q, %v; want exit 96 naming the newer connection", res.ExitCode, res.Stderr, err)
		}
		if _, err := os.Stat(mark); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the old connection's command ran after a newer one took over (%v)", err)
		}
		if _, err := conn(t, newer, "node1").RunShell(ctx, "true"); err != nil {
			t.Errorf("the newer connection's next command: %v", err)
		}
	})
}
