package nodes

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cmdFS implements a node's file operations with plain commands over the
// node's SSH connection, for nodes whose sshd has no SFTP subsystem. It
// needs GNU coreutils (stat, readlink, ln, mv, chmod, mkdir, sha256sum,
// sync) and findutils (find) on the node, as Debian has them. Each
// operation is one command with the connection's file timeout; a file is
// written through standard input into a 0700 temporary directory beside it,
// checked against its SHA-256 on the node, and only then renamed into
// place, so a write cut off anywhere leaves the old file. The operations that
// change a directory sync it with the sync command before they return.
type cmdFS struct{ c *sshClient }

// maxCmdRead bounds what ReadFile reads without SFTP.
const maxCmdRead = 64 << 20

// statFormat makes GNU stat print what cmdFS describes a file by: the raw
// mode in hex, size, modification time, owner and group, then the name.
const statFormat = `%f %s %Y %u %g %n\0`

// run runs argv (quoted) under the watchdog, untagged, in a session of its
// own (the SSH transport's) with the file timeout, and returns its standard
// output; a failure is mapped to the fs package's errors where the command's
// message says so.
func (f cmdFS) run(argv ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), f.c.fileTimeout)
	defer cancel()
	stdout, stderr := newHeadBuffer(maxCmdRead+1), newTailBuffer(maxStderr)
	cmd := &command{script: "LC_ALL=C " + QuoteArgs(argv), ownSession: true}
	o, err := (&sshTransport{c: f.c}).run(ctx, cmd, stdout, stderr)
	code := o.code
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s did not answer within %s", f.c.addr, f.c.fileTimeout)
		}
		return nil, err
	}
	if code != 0 {
		return nil, cmdError(argv[0], code, stderr.Bytes())
	}
	out := stdout.Bytes()
	if len(out) > maxCmdRead {
		return nil, fmt.Errorf("%s: more than %d bytes", argv[0], maxCmdRead)
	}
	return out, nil
}

// cmdError turns a failed command's message into an error, satisfying
// errors.Is with fs.ErrNotExist, fs.ErrExist or fs.ErrPermission where the
// message says so.
func cmdError(name string, code int, stderr []byte) error {
	msg := strings.TrimSpace(string(stderr))
	switch {
	case strings.Contains(msg, "No such file or directory"):
		return fs.ErrNotExist
	case strings.Contains(msg, "File exists"):
		return fs.ErrExist
	case strings.Contains(msg, "Permission denied"), strings.Contains(msg, "Operation not permitted"):
		return fs.ErrPermission
	case strings.Contains(msg, "Not a directory"):
		return syscall.ENOTDIR
	case strings.Contains(msg, "Directory not empty"):
		return syscall.ENOTEMPTY
	case strings.Contains(msg, "Invalid argument"):
		return syscall.EINVAL
	}
	if msg == "" {
		msg = "exit " + strconv.Itoa(code)
	}
	return fmt.Errorf("%s: %s", name, msg)
}

func (f cmdFS) pathErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

func (f cmdFS) linkErr(op, oldname, newname string, err error) error {
	if err == nil {
		return nil
	}
	return &os.LinkError{Op: op, Old: oldname, New: newname, Err: err}
}

func (f cmdFS) stat(op, name string, follow bool) (fs.FileInfo, error) {
	argv := []string{"stat", "--printf", statFormat, "--", name}
	if follow {
		argv = []string{"stat", "-L", "--printf", statFormat, "--", name}
	}
	out, err := f.run(argv...)
	if err != nil {
		return nil, f.pathErr(op, name, err)
	}
	infos, err := parseStat(out)
	if err != nil || len(infos) != 1 {
		return nil, f.pathErr(op, name, fmt.Errorf("unexpected stat output %q", out))
	}
	return infos[0], nil
}

func (f cmdFS) Lstat(name string) (fs.FileInfo, error) { return f.stat("lstat", name, false) }
func (f cmdFS) Stat(name string) (fs.FileInfo, error)  { return f.stat("stat", name, true) }

func (f cmdFS) Readlink(name string) (string, error) {
	out, err := f.run("readlink", "-v", "--", name)
	if err != nil {
		return "", f.pathErr("readlink", name, err)
	}
	return strings.TrimSuffix(string(out), "\n"), nil
}

// Symlink creates newname and syncs its directory.
func (f cmdFS) Symlink(oldname, newname string) error {
	if err := f.SymlinkNoSync(oldname, newname); err != nil {
		return err
	}
	return f.linkErr("symlink", oldname, newname, f.syncDirs(parentDir(newname)))
}

// SymlinkNoSync creates newname, leaving its directory to the caller to sync.
func (f cmdFS) SymlinkNoSync(oldname, newname string) error {
	_, err := f.run("ln", "-s", "-T", "--", oldname, newname)
	return f.linkErr("symlink", oldname, newname, err)
}

// Rename renames oldname to newname and syncs the directories it changed.
func (f cmdFS) Rename(oldname, newname string) error {
	if err := f.RenameNoSync(oldname, newname); err != nil {
		return err
	}
	return f.linkErr("rename", oldname, newname, f.syncDirs(renamedDirs(oldname, newname)...))
}

// RenameNoSync renames oldname to newname, leaving the directories to the
// caller to sync.
func (f cmdFS) RenameNoSync(oldname, newname string) error {
	_, err := f.run("mv", "-f", "-T", "--", oldname, newname)
	return f.linkErr("rename", oldname, newname, err)
}

// Remove removes name and syncs its directory.
func (f cmdFS) Remove(name string) error {
	if err := f.RemoveNoSync(name); err != nil {
		return err
	}
	return f.pathErr("remove", name, f.syncDirs(parentDir(name)))
}

// RemoveNoSync removes name, leaving its directory to the caller to sync.
func (f cmdFS) RemoveNoSync(name string) error {
	_, err := f.run("rm", "-d", "--", name)
	return f.pathErr("remove", name, err)
}

// SyncDir fsyncs the directory name.
func (f cmdFS) SyncDir(name string) error { return f.syncDirs(name) }

// syncCommand fsyncs the files and directories named after it: GNU sync
// given operands fsyncs each of them (it opens a directory read-only). It is
// a variable so that tests can watch it run, and make it fail.
var syncCommand = []string{"sync", "--"}

// syncDirs fsyncs dirs with one sync command; the error is an
// *fs.PathError whose Op is "sync directory" and whose Path names dirs.
func (f cmdFS) syncDirs(dirs ...string) error {
	if len(dirs) == 0 || skipSync {
		return nil
	}
	_, err := f.run(append(slices.Clone(syncCommand), dirs...)...)
	return f.pathErr("sync directory", strings.Join(dirs, " "), err)
}

func (f cmdFS) Chmod(name string, perm fs.FileMode) error {
	_, err := f.run("chmod", fmt.Sprintf("%04o", perm.Perm()), "--", name)
	return f.pathErr("chmod", name, err)
}

// readDirScript lists $1's entries with statFormat, NUL-terminated; an
// empty directory prints nothing.
const readDirScript = `if [ ! -d "$1" ]; then
	if [ -e "$1" ]; then echo "$1: Not a directory" >&2; else echo "$1: No such file or directory" >&2; fi
	exit 1
fi
find -H "$1" -mindepth 1 -maxdepth 1 -exec stat --printf "$2" -- {} +`

func (f cmdFS) ReadDir(name string) ([]fs.FileInfo, error) {
	out, err := f.run("sh", "-c", readDirScript, "cutover-readdir", name, statFormat)
	if err != nil {
		return nil, f.pathErr("readdir", name, err)
	}
	infos, err := parseStat(out)
	if err != nil {
		return nil, f.pathErr("readdir", name, err)
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name() < infos[j].Name() })
	return infos, nil
}

func (f cmdFS) ReadFile(name string) ([]byte, error) {
	out, err := f.run("cat", "--", name)
	return out, f.pathErr("read", name, err)
}

// mkdirScript creates $1 and its missing parents with mode $2, printing each
// directory it created, parents first, NUL-terminated.
const mkdirScript = `mk() {
	[ -z "$1" ] && return 0
	[ -d "$1" ] && return 0
	if [ -e "$1" ] || [ -L "$1" ]; then echo "$1: Not a directory" >&2; return 1; fi
	mk "${1%/*}" "$2" || return 1
	mkdir -m "$2" -- "$1" 2>/dev/null && { printf '%s\0' "$1"; return 0; }
	[ -d "$1" ] && return 0
	mkdir -m "$2" -- "$1" && printf '%s\0' "$1"
}
mk "$1" "$2"`

// MkdirAll creates name and its missing parents with mode perm, then syncs
// every directory it created and the directory holding each.
func (f cmdFS) MkdirAll(name string, perm fs.FileMode) error {
	out, err := f.run("sh", "-c", mkdirScript, "cutover-mkdir", path.Clean(name), fmt.Sprintf("%04o", perm.Perm()))
	if err != nil {
		return f.pathErr("mkdir", name, err)
	}
	var created []string
	for _, d := range strings.Split(string(out), "\x00") {
		if d != "" {
			created = append(created, d)
		}
	}
	return f.pathErr("mkdir", name, f.syncDirs(mkdirSyncs(created)...))
}

// writeScript writes standard input to $1/$2 through the temporary
// directory $1/$3 (made 0700 before anything is written), checks that what
// arrived has the SHA-256 $4, gives it mode $5 and renames it over $1/$2.
// Temporary directories of earlier writes of the same file go first: those
// of another writer than $6 at once, the writer's own once older than ten
// minutes. Whatever fails, the temporary directory goes.
const writeScript = `set -e
umask 077
for e in "$1"/.*; do
	case ${e##*/} in ".$2.tmp-"????????????????) ;; *) continue;; esac
	case ${e##*/} in ".$2.tmp-$6"*) [ -n "$(find "$e" -maxdepth 0 -mmin +10)" ] || continue;; esac
	rm -rf -- "$e"
done
t=$1/$3
mkdir -m 700 -- "$t"
trap 'rm -f -- "$t/$2"; rmdir -- "$t" 2>/dev/null || true' EXIT
cat > "$t/$2"
sync -- "$t/$2"
sum=$(sha256sum < "$t/$2")
if [ "${sum%% *}" != "$4" ]; then echo "$2: the data arrived damaged or cut off (checksum mismatch)" >&2; exit 1; fi
chmod "$5" -- "$t/$2"
mv -f -T -- "$t/$2" "$1/$2"`

func (f cmdFS) WriteFileAtomic(name string, data []byte, perm fs.FileMode) error {
	dir, base := path.Dir(name), path.Base(name)
	sum := sha256.Sum256(data)
	line := "LC_ALL=C " + QuoteArgs([]string{"sh", "-c", writeScript, "cutover-write", dir, base,
		tempName(base), hex.EncodeToString(sum[:]), fmt.Sprintf("%04o", perm.Perm()), writerID})
	timeout := f.c.fileTimeout + time.Duration(len(data)/(1<<20))*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var stderr bytes.Buffer
	o, err := (&sshTransport{c: f.c}).run(ctx, &command{script: line, input: bytes.NewReader(data)}, io.Discard, &stderr)
	if err == nil && o.code != 0 {
		err = cmdError("write", o.code, stderr.Bytes())
	}
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%s did not answer within %s", f.c.addr, timeout)
	}
	if err != nil {
		return f.pathErr("write", name, err)
	}
	return f.pathErr("write", name, f.syncDirs(dir))
}

// statInfo is a file described by GNU stat.
type statInfo struct {
	name  string
	size  int64
	mode  fs.FileMode
	mtime time.Time
	sys   *syscall.Stat_t
}

func (s *statInfo) Name() string       { return s.name }
func (s *statInfo) Size() int64        { return s.size }
func (s *statInfo) Mode() fs.FileMode  { return s.mode }
func (s *statInfo) ModTime() time.Time { return s.mtime }
func (s *statInfo) IsDir() bool        { return s.mode.IsDir() }
func (s *statInfo) Sys() any           { return s.sys }

// parseStat reads NUL-terminated statFormat records.
func parseStat(out []byte) ([]fs.FileInfo, error) {
	var infos []fs.FileInfo
	for _, rec := range bytes.Split(out, []byte{0}) {
		if len(rec) == 0 {
			continue
		}
		fields := strings.SplitN(string(rec), " ", 6)
		if len(fields) != 6 {
			return nil, fmt.Errorf("unexpected stat output %q", rec)
		}
		raw, err1 := strconv.ParseUint(fields[0], 16, 32)
		size, err2 := strconv.ParseInt(fields[1], 10, 64)
		mtime, err3 := strconv.ParseInt(fields[2], 10, 64)
		uid, err4 := strconv.ParseUint(fields[3], 10, 32)
		gid, err5 := strconv.ParseUint(fields[4], 10, 32)
		if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
			return nil, fmt.Errorf("unexpected stat output %q: %w", rec, err)
		}
		infos = append(infos, &statInfo{
			name:  path.Base(fields[5]),
			size:  size,
			mode:  unixMode(uint32(raw)),
			mtime: time.Unix(mtime, 0),
			sys:   &syscall.Stat_t{Mode: uint32(raw), Uid: uint32(uid), Gid: uint32(gid), Size: size},
		})
	}
	return infos, nil
}

// unixMode converts a raw st_mode to an fs.FileMode.
func unixMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & syscall.S_IFMT {
	case syscall.S_IFDIR:
		mode |= fs.ModeDir
	case syscall.S_IFLNK:
		mode |= fs.ModeSymlink
	case syscall.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case syscall.S_IFSOCK:
		mode |= fs.ModeSocket
	case syscall.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFBLK:
		mode |= fs.ModeDevice
	}
	if m&syscall.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&syscall.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&syscall.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}
