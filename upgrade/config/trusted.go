package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// MaxTrustedSize bounds every file cutover reads to decide what to run as root: its config,
// the migration and policy files of a version tree.
const MaxTrustedSize = 1 << 20

// ReadTrusted reads a file cutover trusts to decide what it runs as root. It refuses, naming
// the file, anything but a regular file (a FIFO or a device never blocks or floods it), a
// file larger than MaxTrustedSize, and a file that someone other than root (or, when cutover
// does not run as root, its own user) owns or that group or others may write. The checks
// and the read use one open descriptor, so a file swapped in between is not read.
func ReadTrusted(name string) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := trusted(name, info); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxTrustedSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(data) > MaxTrustedSize {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, MaxTrustedSize)
	}
	return data, nil
}

// trusted checks what ReadTrusted checks of an open file.
func trusted(name string, info fs.FileInfo) error {
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%s)", name, info.Mode().Type())
	}
	if info.Size() > MaxTrustedSize {
		return fmt.Errorf("%s is larger than %d bytes", name, MaxTrustedSize)
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("cannot read the owner of " + name)
	}
	if want := uint32(os.Geteuid()); st.Uid != 0 && st.Uid != want {
		return fmt.Errorf("%s is owned by uid %d, not by root: cutover does not run what another user could have edited", name, st.Uid)
	}
	if info.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by group or others (mode %04o): cutover does not run what another user could have edited; chmod go-w it", name, info.Mode().Perm())
	}
	return nil
}
