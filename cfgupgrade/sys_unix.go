//go:build unix

package cfgupgrade

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
)

// keepOwner gives f the owner and group of the file that info describes,
// so that a config owned by the application's user stays readable to it.
func keepOwner(f *os.File, info fs.FileInfo) error {
	want, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	have, err := f.Stat()
	if err != nil {
		return err
	}
	if st, ok := have.Sys().(*syscall.Stat_t); ok && st.Uid == want.Uid && st.Gid == want.Gid {
		return nil
	}
	if err := f.Chown(int(want.Uid), int(want.Gid)); err != nil {
		return fmt.Errorf("keep owner %d:%d: %w", want.Uid, want.Gid, err)
	}
	return nil
}

// isolate runs cmd in its own process group, so that a terminal's ^C does not
// reach it behind cutover's back (cutover decides, through the context,
// whether to stop it), and cancelling kills the whole group.
func isolate(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
