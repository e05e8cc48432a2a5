package nodes

import (
	"fmt"
	"io"
	"os"
	"slices"
	"syscall"
)

// Size limits of the files cutover logs in with and checks host keys
// against.
const (
	maxIdentitySize   = 64 << 10
	maxKnownHostsSize = 16 << 20
)

// openTrusted opens a file that decides whom cutover logs in as or which
// host it accepts: an identity file or a known_hosts file. Like the config,
// it must be a regular file owned by root (or by the user cutover runs as)
// that group and others may not write; an identity file, as OpenSSH has it,
// may not even be readable by them. The checks are made on the open
// descriptor, so a file swapped in afterwards is not the one read.
func openTrusted(kind, name string, private bool, limit int64) (*os.File, error) {
	return openTrustedBy(kind, name, private, limit, nil)
}

// openTrustedBy is openTrusted that also accepts a file owned by one of the uids in owners.
func openTrustedBy(kind, name string, private bool, limit int64, owners []uint32) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kind, err)
	}
	if err := (trustRule{kind: kind, private: private, limit: limit, owners: owners}).check(f, name); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// trustRule is what openTrustedBy requires of a file.
type trustRule struct {
	kind    string   // what the file is, for error messages
	private bool     // group and others may not even read it
	limit   int64    // its largest size
	owners  []uint32 // the uids it may belong to besides root and cutover's own
}

// check checks the open file f, called name, for openTrustedBy.
func (r trustRule) check(f *os.File, name string) error {
	kind, private, limit, owners := r.kind, r.private, r.limit, r.owners
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s %s: %w", kind, name, err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s %s is not a regular file (%s)", kind, name, info.Mode().Type())
	}
	if info.Size() > limit {
		return fmt.Errorf("%s %s is larger than %d bytes", kind, name, limit)
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s %s: cannot read its owner", kind, name)
	}
	if me := uint32(os.Geteuid()); st.Uid != 0 && st.Uid != me && !slices.Contains(owners, st.Uid) {
		return fmt.Errorf("%s %s is owned by uid %d, not by root: cutover does not trust what another user could have edited", kind, name, st.Uid)
	}
	perm := info.Mode().Perm()
	if private && perm&0o077 != 0 {
		return fmt.Errorf("%s %s is accessible by group or others (mode %04o): a private key must not be; chmod 600 it", kind, name, perm)
	}
	if perm&0o022 != 0 {
		return fmt.Errorf("%s %s is writable by group or others (mode %04o): cutover does not trust what another user could have edited; chmod go-w it", kind, name, perm)
	}
	return nil
}

// readTrusted reads a file opened by openTrusted, at most limit bytes.
func readTrusted(f *os.File, kind string, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", kind, f.Name(), err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s %s is larger than %d bytes", kind, f.Name(), limit)
	}
	return data, nil
}

// fdPath names an open file by its descriptor, for readers that take a
// path: opening it opens the same file, wherever its name now points.
func fdPath(f *os.File) string { return fmt.Sprintf("/proc/self/fd/%d", f.Fd()) }
