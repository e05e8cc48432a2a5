package cfgupgrade

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Options tune Apply.
type Options struct {
	// DryRun computes the report, with its diff, and writes nothing.
	DryRun bool
	// Now dates the backup; the zero time means time.Now().
	Now time.Time
}

// backupTime is the layout of the UTC time in a backup's name.
const backupTime = "20060102T150405Z"

// backupsKept is how many backup copies of a config Apply keeps beside it: the newest. A run
// archives the application's state before it migrates the config, so older copies would only
// take room, and go into every later archive.
const backupsKept = 3

// Apply migrates the config file spec.File from version from to version to
// with migs (see Migrate) and returns the report and the path of the backup
// it took.
//
// Apply first writes a backup copy of the file next to it, named
// <file>.<config version>-<UTC time>.bak (e.g.
// config.json.1.0.0-20261121T180102Z.bak), readable by its owner only and
// never more widely than the config (mode 0600, or 0400 for a 0400 config),
// and synced to disk with its directory. It then writes the new config to a
// temporary file in the same directory with the original file's mode and
// owner, syncs it, renames it over the original and syncs the directory, so
// the config is either wholly old or wholly new. A symbolic link is followed
// and the file it names is replaced. On any error before that rename the
// original file is unchanged and no backup is left. Once the config is
// replaced, the backups of the file beyond the 3 newest are removed (see
// pruneBackups).
//
// Apply is idempotent: a config whose version already is to (a run redone
// after a crash, a downgrade applied twice) is left alone but synced, file
// and directory, since the run that wrote it may have died before its sync,
// and Apply returns a report with no steps and no backup. With opts.DryRun, Apply writes
// nothing and returns the report with its diff.
func Apply(spec Spec, from, to string, migs []Migration, opts Options) (Report, string, error) {
	if err := spec.checkFile(); err != nil {
		return Report{}, "", err
	}
	if _, err := parseVersion(from); err != nil {
		return Report{}, "", fmt.Errorf("migrate %s: live version: %w", spec.File, err)
	}
	target, err := parseVersion(to)
	if err != nil {
		return Report{}, "", fmt.Errorf("migrate %s: target version: %w", spec.File, err)
	}
	file, err := filepath.EvalSymlinks(spec.File)
	if err != nil {
		return Report{}, "", fmt.Errorf("read config: %w", err)
	}
	info, err := os.Stat(file)
	if err != nil {
		return Report{}, "", fmt.Errorf("read config: %w", err)
	}
	if !info.Mode().IsRegular() {
		return Report{}, "", fmt.Errorf("config %s is not a regular file", file)
	}
	doc, err := os.ReadFile(file)
	if err != nil {
		return Report{}, "", fmt.Errorf("read config: %w", err)
	}
	current, err := VersionOf(doc, spec)
	if err != nil {
		return Report{}, "", err
	}
	if current == target.String() {
		if opts.DryRun {
			return Report{From: current, To: current}, "", nil
		}
		if err := syncFile(file); err != nil {
			return Report{}, "", fmt.Errorf("migrate %s: %w", spec.File, err)
		}
		return Report{From: current, To: current}, "", nil
	}
	out, rep, err := Migrate(doc, spec, from, to, migs)
	if err != nil || opts.DryRun {
		return rep, "", err
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	backup, err := writeBackup(file, doc, current, now, info.Mode().Perm()&0o600)
	if err != nil {
		return Report{}, "", err
	}
	renamed, err := replaceFile(file, out, info)
	if err != nil && !renamed {
		os.Remove(backup)
		return Report{}, "", err
	}
	if err == nil {
		pruneBackups(file, backup)
	}
	return rep, backup, err
}

// writeBackup writes data to a new backup file of file, mode perm, synced with its
// directory.
func writeBackup(file string, data []byte, version string, now time.Time, perm fs.FileMode) (string, error) {
	base := fmt.Sprintf("%s.%s-%s", file, version, now.UTC().Format(backupTime))
	for n := 1; n <= 100; n++ {
		name := base + ".bak"
		if n > 1 {
			name = fmt.Sprintf("%s-%d.bak", base, n)
		}
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("back up config: %w", err)
		}
		err = f.Chmod(perm)
		if err == nil {
			_, err = f.Write(data)
		}
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = syncDir(filepath.Dir(name))
		}
		if err != nil {
			os.Remove(name)
			return "", fmt.Errorf("back up config to %s: %w", name, err)
		}
		return name, nil
	}
	return "", fmt.Errorf("back up config: every name %s*.bak is taken", base)
}

// pruneBackups removes the backups of file beyond the backupsKept newest, never kept (the
// one just written). A backup is a regular file named exactly as writeBackup names them; a
// link, a directory or another name is left alone, and a link is never followed. The newest
// are those with the latest time in their name, then the latest modification time, then
// the highest sequence number. Failures are ignored: a leftover only takes room, and a
// removal that a power cut undoes is done again by the next migration.
func pruneBackups(file, kept string) {
	dir, base := filepath.Dir(file), filepath.Base(file)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type backup struct {
		name     string
		at, mod  time.Time
		sequence int
	}
	var old []backup
	for _, e := range entries {
		at, seq, ok := parseBackupName(base, e.Name())
		if !ok || !e.Type().IsRegular() || e.Name() == filepath.Base(kept) {
			continue
		}
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		old = append(old, backup{e.Name(), at, info.ModTime(), seq})
	}
	slices.SortFunc(old, func(a, b backup) int { // newest first
		if c := b.at.Compare(a.at); c != 0 {
			return c
		}
		if c := b.mod.Compare(a.mod); c != 0 {
			return c
		}
		if c := b.sequence - a.sequence; c != 0 {
			return c
		}
		return strings.Compare(b.name, a.name)
	})
	removed := false
	for _, b := range old[min(len(old), backupsKept-1):] {
		removed = os.Remove(filepath.Join(dir, b.name)) == nil || removed
	}
	if removed {
		_ = syncDir(dir)
	}
}

// parseBackupName reads the name of a backup of the file base, as writeBackup names them:
// <base>.<version>-<UTC time>.bak or <base>.<version>-<UTC time>-<n>.bak.
func parseBackupName(base, name string) (at time.Time, sequence int, ok bool) {
	rest, ok1 := strings.CutPrefix(name, base+".")
	rest, ok2 := strings.CutSuffix(rest, ".bak")
	if !ok1 || !ok2 {
		return time.Time{}, 0, false
	}
	sequence = 1
	if i := strings.LastIndexByte(rest, '-'); i > 0 && strings.HasSuffix(rest[:i], "Z") {
		n, err := strconv.Atoi(rest[i+1:])
		if err != nil || n < 2 || n > 100 || strconv.Itoa(n) != rest[i+1:] {
			return time.Time{}, 0, false
		}
		rest, sequence = rest[:i], n
	}
	stamp := len(rest) - len(backupTime)
	if stamp < 2 || rest[stamp-1] != '-' {
		return time.Time{}, 0, false
	}
	at, err := time.Parse(backupTime, rest[stamp:])
	if err != nil {
		return time.Time{}, 0, false
	}
	if _, err := parseVersion(rest[:stamp-1]); err != nil {
		return time.Time{}, 0, false
	}
	return at, sequence, true
}

// replaceFile atomically replaces file with data, keeping info's mode and
// owner. renamed reports whether file was replaced (the error then is
// about syncing the directory).
func replaceFile(file string, data []byte, info fs.FileInfo) (renamed bool, err error) {
	dir, base := filepath.Dir(file), filepath.Base(file)
	removeDeadTemps(dir, base)
	tmp, err := os.CreateTemp(dir, fmt.Sprintf(".%s.tmp-%d-*", base, os.Getpid()))
	if err != nil {
		return false, fmt.Errorf("write config %s: %w", file, err)
	}
	name := tmp.Name()
	err = tmp.Chmod(info.Mode().Perm())
	if err == nil {
		err = keepOwner(tmp, info)
	}
	if err == nil {
		_, err = tmp.Write(data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(name, file)
	}
	if err != nil {
		os.Remove(name)
		return false, fmt.Errorf("write config %s: %w", file, err)
	}
	if err := syncDir(dir); err != nil {
		return true, fmt.Errorf("write config %s: %w", file, err)
	}
	return true, nil
}

// removeDeadTemps removes the temporary files that replaceFile left beside base in dir when
// its process was killed mid-write: their names carry the writer's process id, and a writer
// that no longer runs will never rename its file. A live writer's file is left alone.
// Failures are ignored: a leftover only takes room.
func removeDeadTemps(dir, base string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	prefix := "." + base + ".tmp-"
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		id, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(id)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// syncFile fsyncs the file name, then its directory: what another writer
// (a migration command, a run that died before its sync) left there is then
// on stable storage.
func syncFile(name string) error {
	if err := fsync(name); err != nil {
		return fmt.Errorf("sync %s: %w", name, unwrapPath(err))
	}
	return syncDir(filepath.Dir(name))
}

// syncDir makes a rename or a new file in dir durable.
func syncDir(dir string) error {
	if err := fsync(dir); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, unwrapPath(err))
	}
	return nil
}

// fsync opens the file or directory name read-only and fsyncs it. It is a
// variable so that tests can see what is synced, and make a sync fail.
var fsync = func(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// unwrapPath returns the cause of an *fs.PathError, so that the path is not
// named twice.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
