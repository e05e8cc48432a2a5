package metrics

import (
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/cutover/cutover/upgrade/atomicfile"
)

// TextfileMode is the mode of the metrics file: node_exporter runs as its own user (Debian's
// as prometheus) and must read it, and the metrics hold nothing secret (versions, node names,
// times).
const TextfileMode = 0o644

// WriteFile replaces the file at path with data, atomically (package atomicfile): a reader
// sees the old file or the new one, never a part, and nothing goes through a link. The directory
// must belong to root (or to the user cutover runs as) and must not be writable by group or
// others unless it is sticky and root's, so that nobody else can swap the file between the write
// and the rename; what is at path must be a regular file, or nothing. Each is refused, naming the
// path.
func WriteFile(path string, data []byte, mode fs.FileMode) error {
	return atomicfile.Write("metrics file", path, data, mode, trustedDir)
}

// trustedDir says why a directory with status st is not one to write the metrics in: another
// user owns it, or group or others may write it (a sticky directory of root's, such as /tmp,
// is fine: nobody may rename or remove another's entry in it).
func trustedDir(st *unix.Stat_t) error {
	uid := uint32(os.Geteuid())
	if st.Uid != 0 && st.Uid != uid {
		return fmt.Errorf("owned by uid %d, not root: whoever owns it could swap the file; give it to root", st.Uid)
	}
	if st.Mode&0o022 != 0 && !(st.Mode&unix.S_ISVTX != 0 && st.Uid == 0) {
		return fmt.Errorf("writable by group or others (mode %04o): others could swap the file; make it 0755", st.Mode&0o7777)
	}
	return nil
}
