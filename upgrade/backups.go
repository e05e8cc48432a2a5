package upgrade

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/cutover/cutover/journal"
)

// BackupInfo describes one archive in the backup directory.
type BackupInfo struct {
	// ID names the archive: its file name without .tar.gz.
	ID   string `json:"id"`
	Path string `json:"path"`
	// Kind is "switch" for an archive a run took before it changed anything, or
	// "before-restore" for the state `cutover backup restore` kept aside.
	Kind    string    `json:"kind"`
	From    string    `json:"from"`
	To      string    `json:"to"`
	Run     uint64    `json:"run"`
	Created time.Time `json:"created"`
	// Size is the archive's size in bytes; Files the number of regular files it holds.
	Size  int64 `json:"size"`
	Files int   `json:"files"`
	// ManifestOK is true when the manifest was read and agrees with the archive's name.
	ManifestOK bool `json:"manifest_ok"`
	// Verified is true when every file was read and matched its size and checksum (only
	// with BackupListOptions.Verify).
	Verified bool `json:"verified"`
	// Problem says why ManifestOK or the verification failed.
	Problem string `json:"problem,omitempty"`
}

// BackupListOptions say how closely `cutover backup list` checks the archives.
type BackupListOptions struct {
	// Verify reads every archive through and checks every file's checksum.
	Verify bool
}

// BackupList is what `cutover backup list` shows.
type BackupList struct {
	// Dir is the backup directory.
	Dir string `json:"dir"`
	// Backups are the application's archives, oldest first.
	Backups []BackupInfo `json:"backups"`
}

// Kinds of backup archive.
const (
	BackupSwitch        = "switch"
	BackupBeforeRestore = "before-restore"
)

// backupIDPattern is the shape of every archive id: the application, a version, then
// "-to-VERSION" or "-before-restore", then the UTC time.
var backupIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._+-]*-[0-9][0-9A-Za-z.+-]*-(to-[0-9][0-9A-Za-z.+-]*|before-restore)-[0-9]{8}T[0-9]{6}Z$`)

// maxBackupID bounds an archive id; real ones are far shorter.
const maxBackupID = 200

// ListBackups lists the archives of the application in the backup directory, oldest first,
// reading each one's manifest (and with opts.Verify every file). It only reads: it works
// during a run. A missing directory has no archives. An archive that cannot be read or does
// not check out is listed with its problem, not an error.
func ListBackups(ctx context.Context, cfg *Config, opts BackupListOptions) (*BackupList, error) {
	list := &BackupList{Dir: BackupDir(cfg), Backups: []BackupInfo{}}
	ids, err := backupIDs(list.Dir, cfg.App)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		list.Backups = append(list.Backups, describeBackup(ctx, cfg, list.Dir, id, opts.Verify))
	}
	return list, nil
}

// backupIDs returns the ids of app's archives in dir, oldest first: regular files (not
// symlinks) named <id>.tar.gz with an id of the right shape.
func backupIDs(dir, app string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list backups: %w", err)
	}
	var ids []string
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".tar.gz")
		if !ok || !e.Type().IsRegular() || !strings.HasPrefix(id, app+"-") || checkBackupID(id) != nil {
			continue
		}
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		si, sj := ids[i][len(ids[i])-len(backupStamp):], ids[j][len(ids[j])-len(backupStamp):]
		if si != sj {
			return si < sj
		}
		return ids[i] < ids[j]
	})
	return ids, nil
}

// checkBackupID refuses an id that cannot name an archive: the wrong shape, a path, "..",
// control characters, too long.
func checkBackupID(id string) error {
	if len(id) > maxBackupID || strings.Contains(id, "..") || !backupIDPattern.MatchString(id) {
		return fmt.Errorf("backup %q: not a backup id (an id as 'cutover backup list' shows it, such as app-1.0.0-to-1.1.0-20260102T150405Z)", id)
	}
	return nil
}

// describeBackup reads what it can of archive id.
func describeBackup(ctx context.Context, cfg *Config, dir, id string, verify bool) BackupInfo {
	b := BackupInfo{ID: id, Path: filepath.Join(dir, id+".tar.gz"), Kind: BackupSwitch}
	if strings.Contains(id, "-"+BackupBeforeRestore+"-") {
		b.Kind = BackupBeforeRestore
	}
	if info, err := os.Lstat(b.Path); err == nil {
		b.Size = info.Size()
	}
	m, err := ReadManifest(b.Path)
	if err != nil {
		b.Problem = err.Error()
		return b
	}
	b.From, b.To, b.Run, b.Created, b.Files = m.From, m.To, m.Run, m.Created, len(m.Files)
	if err := checkManifest(cfg, id, b.Kind, m); err != nil {
		b.Problem = err.Error()
		return b
	}
	b.ManifestOK = true
	if verify {
		bc, err := readBackup(ctx, b.Path)
		if err == nil {
			err = checkEntries((&Run{Config: cfg}).backupDirs(), bc)
		}
		if err != nil {
			b.Problem = err.Error()
			return b
		}
		b.Verified = true
	}
	return b
}

// checkManifest checks that the manifest of archive id belongs to the application and
// agrees with the archive's name.
func checkManifest(cfg *Config, id, kind string, m Manifest) error {
	if m.App != cfg.App {
		return fmt.Errorf("the manifest is of application %q, not %s", m.App, cfg.App)
	}
	stamp := m.Created.UTC().Format(backupStamp)
	want := fmt.Sprintf("%s-%s-to-%s-%s", m.App, m.From, m.To, stamp)
	if kind == BackupBeforeRestore {
		want = fmt.Sprintf("%s-%s-%s-%s", m.App, m.From, BackupBeforeRestore, stamp)
	}
	if id != want {
		return fmt.Errorf("the manifest (%s -> %s, created %s) does not match the archive's name", m.From, m.To, stamp)
	}
	return nil
}

// backupEntry is one entry of a backup archive, checked and ready to be restored.
type backupEntry struct {
	path     string // absolute path it is restored to
	typ      byte   // tar.TypeDir, tar.TypeReg or tar.TypeSymlink
	mode     fs.FileMode
	uid, gid int
	link     string // a symlink's target
	size     int64
	sum      string // a regular file's sha256
	modTime  time.Time
}

// backupContents is a backup archive read through and checked against its manifest.
type backupContents struct {
	manifest Manifest
	entries  []backupEntry
	skipped  []string // entries of other types (devices, fifos), not restored
}

// readBackup reads the archive at path through and checks it against its manifest: every
// regular file is in the manifest with the same size, mode and sha256, every file of the
// manifest is in the archive, every entry's name is a clean relative path named once, and the
// links of the manifest are symlinks of the archive with the same targets. It writes nothing.
func readBackup(ctx context.Context, archive string) (*backupContents, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, fmt.Errorf("read backup: %w", err)
	}
	defer f.Close()
	bc, err := scanBackup(ctx, f, nil)
	if err != nil {
		return nil, fmt.Errorf("backup %s: %w", archive, err)
	}
	return bc, nil
}

// scanBackup reads the archive in r and checks it (see readBackup). For every regular file,
// write (when not nil) is given the file's content as it is read; the checksum is compared
// only once the whole file is read, so write must not make a file visible until scanBackup
// has returned without error.
func scanBackup(ctx context.Context, r io.Reader, write func(e backupEntry, content io.Reader) error) (*backupContents, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("not a backup archive: %w", err)
	}
	tr := tar.NewReader(gz)
	m, err := readManifest(tr)
	if err != nil {
		return nil, err
	}
	files := map[string]ManifestFile{}
	for _, mf := range m.Files {
		if _, dup := files[mf.Path]; dup {
			return nil, fmt.Errorf("the manifest names %s twice", mf.Path)
		}
		files[mf.Path] = mf
	}
	bc := &backupContents{manifest: m}
	seen := map[string]bool{}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read archive: %w", err)
		}
		p, err := entryPath(hdr.Name)
		if err != nil {
			return nil, err
		}
		if seen[p] {
			return nil, fmt.Errorf("the archive holds %s twice", p)
		}
		seen[p] = true
		e := backupEntry{
			path: p, typ: hdr.Typeflag, uid: hdr.Uid, gid: hdr.Gid, modTime: hdr.ModTime,
			mode: hdr.FileInfo().Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky),
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
		case tar.TypeSymlink:
			if hdr.Linkname == "" || strings.ContainsRune(hdr.Linkname, 0) {
				return nil, fmt.Errorf("symlink %s has an invalid target %q", p, hdr.Linkname)
			}
			e.link = hdr.Linkname
		case tar.TypeReg:
			mf, ok := files[p]
			if !ok {
				return nil, fmt.Errorf("%s is in the archive but not in its manifest", p)
			}
			delete(files, p)
			if hdr.Size != mf.Size || e.mode.Perm() != mf.Mode.Perm() {
				return nil, fmt.Errorf("%s: %d bytes, mode %v in the archive; %d bytes, mode %v in the manifest", p, hdr.Size, e.mode.Perm(), mf.Size, mf.Mode.Perm())
			}
			e.size, e.sum = mf.Size, mf.SHA256
			h := sha256.New()
			var content io.Reader = io.TeeReader(tr, h)
			if write != nil {
				err = write(e, content)
			} else {
				_, err = io.Copy(io.Discard, content)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			if got := hex.EncodeToString(h.Sum(nil)); got != mf.SHA256 {
				return nil, fmt.Errorf("%s: sha256 %s, but the manifest says %s: the archive was changed", p, got, mf.SHA256)
			}
		default:
			bc.skipped = append(bc.skipped, p)
			continue
		}
		bc.entries = append(bc.entries, e)
	}
	if len(files) > 0 {
		var missing []string
		for p := range files {
			missing = append(missing, p)
		}
		sort.Strings(missing)
		return nil, fmt.Errorf("%s: in the manifest but not in the archive", strings.Join(missing, ", "))
	}
	for l, target := range m.Links {
		found := false
		for _, e := range bc.entries {
			if e.path == l {
				found = e.typ == tar.TypeSymlink && e.link == target
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("link %s -> %s of the manifest is not in the archive as such", l, target)
		}
	}
	return bc, nil
}

// entryPath turns an archive entry's name into the absolute path it is restored to, refusing
// anything but a clean relative path.
func entryPath(name string) (string, error) {
	rel := strings.TrimSuffix(name, "/")
	if rel == "" || strings.HasPrefix(rel, "/") || path.Clean(rel) != rel || rel == ".." || strings.HasPrefix(rel, "../") ||
		strings.ContainsFunc(rel, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", fmt.Errorf("entry %q is not a clean relative path", name)
	}
	return "/" + rel, nil
}

// RestoreOptions are what `cutover backup restore` needs besides the config.
type RestoreOptions struct {
	// ID names the archive, as `cutover backup list` shows it.
	ID string
	// Hostname is the local host's name; "" asks the system.
	Hostname string
}

// RestoreReport says what `cutover backup restore` did.
type RestoreReport struct {
	// ID and Archive name the archive restored.
	ID      string `json:"id"`
	Archive string `json:"archive"`
	// Run is the restore's run in the journal (0 if it could not be recorded).
	Run uint64 `json:"run"`
	// Version is the version the archive was taken from: the master's live version now.
	Version string `json:"version"`
	// Previous is the master's live version before the restore ("unknown" if it could not
	// be read).
	Previous string `json:"previous"`
	// Kept is the archive of the state before the restore.
	Kept string `json:"kept"`
	// Links are the links restored, with their targets.
	Links map[string]string `json:"links"`
	// Files, Dirs and Symlinks are the paths restored, by type.
	Files    []string `json:"files"`
	Dirs     []string `json:"dirs"`
	Symlinks []string `json:"symlinks"`
	// Skipped are entries of other types (devices, fifos), not restored.
	Skipped []string `json:"skipped"`
	// Warnings are things the operator should know that did not stop the restore.
	Warnings []string `json:"warnings"`
}

// RestoreBackup puts the master's application state, its /etc/<app> directory and the links
// back as archive opts.ID holds them. It refuses, changing nothing, when the id is not one
// that ListBackups shows (IsBadInput), when this host is not the master (IsNotMaster), when
// another run holds the lock (journal.IsLocked), when a run is pending, when the archive does
// not check out against its manifest, when a path of the archive is outside those
// directories or would replace a directory by a file (or a file by a directory), when a link
// would point at a version that is not installed, and while the daemons run.
//
// The daemons count as running when the configured verify command exits 0 on the master;
// with no verify command configured, restore refuses, as it cannot tell. Every check runs
// before anything is written. Then the current state is archived aside (Kept), every file
// is written to a temporary name next to its place and checked again, and only then renamed
// into place; SIGINT, SIGTERM and SIGHUP are ignored from the first write to the end. Files
// that exist but are not in the archive are left alone. Only the master is restored: the
// other nodes get the config and the links by `cutover sync` or a run.
func RestoreBackup(ctx context.Context, cfg *Config, opts RestoreOptions) (*RestoreReport, error) {
	id := strings.TrimSuffix(opts.ID, ".tar.gz")
	if err := checkBackupID(id); err != nil {
		return nil, badInput(err)
	}
	r, cleanup, err := setup(ctx, cfg, nil, opts.Hostname, true)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	if in, err := journal.ReadIntent(IntentPath(cfg)); err == nil {
		return nil, fmt.Errorf("run %d (%s -> %s) is pending: finish it with 'cutover upgrade --resume' or undo it with 'cutover upgrade --abort' before restoring a backup", in.RunID, in.From, in.To)
	} else if !journal.NoIntent(err) {
		return nil, err
	}
	dir := BackupDir(cfg)
	ids, err := backupIDs(dir, cfg.App)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(ids, id) {
		return nil, badInput(fmt.Errorf("no backup %s in %s (see 'cutover backup list')", id, dir))
	}
	rep := &RestoreReport{
		ID: id, Archive: filepath.Join(dir, id+".tar.gz"), Links: map[string]string{},
		Files: []string{}, Dirs: []string{}, Symlinks: []string{}, Skipped: []string{}, Warnings: []string{},
	}

	// Every check, before anything is written.
	f, err := os.Open(rep.Archive)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	defer f.Close()
	bc, err := scanBackup(ctx, f, nil)
	if err != nil {
		return nil, fmt.Errorf("backup %s does not check out, nothing was restored: %w", id, err)
	}
	if err := checkManifest(cfg, id, backupKind(id), bc.manifest); err != nil {
		return nil, fmt.Errorf("backup %s does not check out, nothing was restored: %w", id, err)
	}
	if err := planRestore(r.backupDirs(), bc); err != nil {
		return nil, fmt.Errorf("backup %s cannot be restored, nothing was restored: %w", id, err)
	}
	if err := checkDaemonsStopped(ctx, r); err != nil {
		return nil, err
	}
	rep.Version = bc.manifest.From
	rep.Previous = restoreLiveVersion(ctx, r)
	rep.Skipped = append(rep.Skipped, bc.skipped...)
	for l, target := range bc.manifest.Links {
		rep.Links[l] = target
	}

	store := journal.NewStore(JournalPath(cfg))
	closeOrphans(ctx, store, r)
	host, _ := os.Hostname()
	jr, err := store.CreateRun(ctx, journal.Run{Kind: "restore", From: rep.Previous, To: rep.Version, Direction: "restore", Host: host, PID: os.Getpid(),
		Facts: map[string]string{"archive": rep.Archive}})
	if err != nil {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("the restore is not in the journal: %v", err))
	} else {
		rep.Run = jr.ID
	}
	step := func(i int, stage string, state journal.State, d time.Duration, msg string) {
		if rep.Run == 0 {
			return
		}
		if _, err := store.Record(ctx, rep.Run, journal.Event{Stage: stage, Index: i, State: state, Duration: d, Message: msg}); err != nil {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("journal: %v", err))
		}
	}
	finish := func(o journal.Outcome) {
		if rep.Run != 0 {
			if err := store.Finish(ctx, rep.Run, o, time.Now()); err != nil {
				rep.Warnings = append(rep.Warnings, fmt.Sprintf("journal: %v", err))
			}
		}
	}
	step(1, "check", journal.Done, 0, fmt.Sprintf("%s: %d files check out; verify does not exit 0, the daemons are down", id, len(bc.manifest.Files)))

	// From here on the restore runs to its end: an interrupted one would leave temporary
	// files, or the state half restored.
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Reset(syscall.SIGINT, syscall.SIGTERM)

	// Keep the current state aside.
	start := time.Now()
	step(2, "keep-current", journal.Started, 0, "")
	rep.Kept, err = keepCurrent(ctx, r, rep.Previous)
	if err != nil {
		step(2, "keep-current", journal.Failed, time.Since(start), err.Error())
		finish(journal.RolledBack)
		return rep, fmt.Errorf("keep the current state before restoring, nothing was restored: %w", err)
	}
	step(2, "keep-current", journal.Done, time.Since(start), rep.Kept)
	if rep.Run != 0 {
		if _, err := store.SetFacts(ctx, rep.Run, map[string]string{"kept": rep.Kept}); err != nil {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("journal: %v", err))
		}
	}

	// Write everything to temporary names, checked again, then rename it into place.
	start = time.Now()
	step(3, "restore", journal.Started, 0, "")
	written, err := restoreEntries(ctx, f, bc)
	if err != nil {
		step(3, "restore", journal.Failed, time.Since(start), err.Error())
		if written {
			finish(journal.FailedPastPONR)
			return rep, fmt.Errorf("restore %s failed part way: %w; the state before it is in %s", id, err, rep.Kept)
		}
		finish(journal.RolledBack)
		return rep, fmt.Errorf("restore %s, nothing was restored: %w", id, err)
	}
	for _, e := range bc.entries {
		switch e.typ {
		case tar.TypeDir:
			rep.Dirs = append(rep.Dirs, e.path)
		case tar.TypeReg:
			rep.Files = append(rep.Files, e.path)
		case tar.TypeSymlink:
			rep.Symlinks = append(rep.Symlinks, e.path)
		}
	}
	step(3, "restore", journal.Done, time.Since(start), fmt.Sprintf("%d files, %d directories, %d symlinks", len(rep.Files), len(rep.Dirs), len(rep.Symlinks)))
	finish(journal.Succeeded)
	return rep, nil
}

func backupKind(id string) string {
	if strings.Contains(id, "-"+BackupBeforeRestore+"-") {
		return BackupBeforeRestore
	}
	return BackupSwitch
}

// checkEntries checks that the entries of bc stay within roots: each is one of them or under
// one, and its parent is a directory of the archive, so that no entry is written through a
// symlink.
func checkEntries(roots []string, bc *backupContents) error {
	dirs := map[string]bool{}
	var errs []error
	for _, e := range bc.entries {
		root := ""
		for _, r := range roots {
			if e.path == r || strings.HasPrefix(e.path, r+"/") {
				root = r
				break
			}
		}
		switch {
		case root == "":
			errs = append(errs, fmt.Errorf("%s is outside %s", e.path, strings.Join(roots, " and ")))
		case e.path != root && !dirs[path.Dir(e.path)]:
			errs = append(errs, fmt.Errorf("%s: its directory is not a directory of the archive", e.path))
		case e.typ == tar.TypeDir:
			dirs[e.path] = true
		}
	}
	return errors.Join(errs...)
}

// planRestore checks, against the disk and before anything is written, that the entries of
// bc can be restored: they stay within roots (checkEntries), nothing replaces a directory by
// a file or a file by a directory, and the links of the manifest point at installed trees.
func planRestore(roots []string, bc *backupContents) error {
	if err := checkEntries(roots, bc); err != nil {
		return err
	}
	var errs []error
	for _, e := range bc.entries {
		info, err := os.Lstat(e.path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			errs = append(errs, fmt.Errorf("inspect %s: %w", e.path, err))
		case e.typ == tar.TypeDir && !info.IsDir():
			errs = append(errs, fmt.Errorf("%s is a directory in the archive but %s here", e.path, fileType(info)))
		case e.typ != tar.TypeDir && info.IsDir():
			errs = append(errs, fmt.Errorf("%s is a directory here but %s in the archive", e.path, tarType(e.typ)))
		}
	}
	links := make([]string, 0, len(bc.manifest.Links))
	for l := range bc.manifest.Links {
		links = append(links, l)
	}
	sort.Strings(links)
	for _, l := range links {
		target := bc.manifest.Links[l]
		if info, err := os.Stat(target); err != nil || !info.IsDir() {
			errs = append(errs, fmt.Errorf("link %s would point at %s, which is not installed on this host", l, target))
		}
	}
	return errors.Join(errs...)
}

func fileType(info fs.FileInfo) string {
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		return "a symlink"
	case info.IsDir():
		return "a directory"
	case info.Mode().IsRegular():
		return "a regular file"
	}
	return "a special file"
}

func tarType(t byte) string {
	switch t {
	case tar.TypeDir:
		return "a directory"
	case tar.TypeSymlink:
		return "a symlink"
	}
	return "a regular file"
}

// checkDaemonsStopped refuses while the application's daemons run on the master: when the
// configured verify command exits 0 there, the cluster is up.
func checkDaemonsStopped(ctx context.Context, r *Run) error {
	cmd := r.Config.Commands.Verify
	if cmd == "" {
		return badInput(fmt.Errorf("backup restore needs [commands] verify to tell that the daemons are stopped, and none is configured"))
	}
	if _, err := r.OnMaster(ctx, cmd); err == nil {
		return fmt.Errorf("the cluster is up (verify exits 0 on %s): stop the daemons first (daemons_stop on every node), then restore", r.Inventory.Master)
	} else if ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

// restoreLiveVersion is the version the master's links point at now, or "unknown": a
// restore must work on a master whose state is broken.
func restoreLiveVersion(ctx context.Context, r *Run) string {
	if v, err := liveVersion(ctx, r); err == nil {
		return v
	}
	c, err := r.dial.Conn(ctx, r.Inventory.Master)
	if err != nil {
		return "unknown"
	}
	if dir, err := r.Layout.Live(ctx, c); err == nil {
		return dir
	}
	return "unknown"
}

// keepCurrent archives the state a restore is about to replace, next to the other backups:
// <app>-<live>-before-restore-<UTC>.tar.gz. It is not removed by backup_keep.
func keepCurrent(ctx context.Context, r *Run, live string) (string, error) {
	if live == "unknown" || checkBackupID(fmt.Sprintf("%s-%s-%s-%s", r.Config.App, live, BackupBeforeRestore, time.Now().UTC().Format(backupStamp))) != nil {
		live = "0.0.0"
	}
	links := map[string]string{}
	for _, l := range []string{r.Layout.LibLink(), r.Layout.ShareLink()} {
		if target, err := os.Readlink(l); err == nil {
			links[l] = target
		}
	}
	dir := BackupDir(r.Config)
	// Two restores within one second would get the same name: wait for the next one.
	for i := 0; ; i++ {
		now := time.Now().UTC()
		name := fmt.Sprintf("%s-%s-%s-%s.tar.gz", r.Config.App, live, BackupBeforeRestore, now.Format(backupStamp))
		if _, err := os.Lstat(filepath.Join(dir, name)); errors.Is(err, fs.ErrNotExist) || i == 20 {
			m := Manifest{App: r.Config.App, From: live, To: live, Created: now, Links: links}
			return writeArchive(ctx, dir, name, r.backupDirs(), m)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// staged is an entry written to a temporary name, waiting to be renamed into place.
type staged struct {
	tmp, path string
}

// restoreEntries writes the entries of bc from the archive f: the missing directories first,
// then every file and symlink to a temporary name in its directory (each file checked
// against the manifest once more), then renames them into place and sets the directories'
// modes and owners. Until the first rename, a failure removes what it wrote and written is
// false: nothing changed.
func restoreEntries(ctx context.Context, f *os.File, bc *backupContents) (written bool, err error) {
	root := os.Geteuid() == 0
	var created []string
	var temps []staged
	defer func() {
		if err == nil {
			return
		}
		for _, s := range temps {
			_ = os.Remove(s.tmp)
		}
		if !written {
			for i := len(created) - 1; i >= 0; i-- {
				_ = os.Remove(created[i])
			}
		}
	}()
	for _, e := range bc.entries {
		if e.typ != tar.TypeDir {
			continue
		}
		if err := os.Mkdir(e.path, 0o700); err == nil {
			created = append(created, e.path)
		} else if !errors.Is(err, fs.ErrExist) {
			return false, fmt.Errorf("create %s: %w", e.path, err)
		}
	}
	for _, e := range bc.entries {
		if e.typ != tar.TypeSymlink {
			continue
		}
		tmp := tempName(e.path)
		if err := os.Symlink(e.link, tmp); err != nil {
			return false, fmt.Errorf("create %s: %w", tmp, err)
		}
		temps = append(temps, staged{tmp, e.path})
		if root {
			if err := os.Lchown(tmp, e.uid, e.gid); err != nil {
				return false, fmt.Errorf("chown %s: %w", tmp, err)
			}
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return false, fmt.Errorf("read archive: %w", err)
	}
	planned := map[string]string{}
	for _, e := range bc.entries {
		if e.typ == tar.TypeReg {
			planned[e.path] = e.sum
		}
	}
	_, err = scanBackup(ctx, f, func(e backupEntry, content io.Reader) error {
		if sum, ok := planned[e.path]; !ok || sum != e.sum {
			return errors.New("not as it was when the archive was checked")
		}
		tmp, err := writeTemp(e, content, root)
		if tmp != "" {
			temps = append(temps, staged{tmp, e.path})
		}
		return err
	})
	if err != nil {
		return false, fmt.Errorf("archive changed while it was restored: %w", err)
	}

	// Everything is written and checked: rename it into place. A failure no longer stops the
	// others: the more of the archive is in place, the better.
	var errs []error
	dirsToSync := map[string]bool{}
	for i, s := range temps {
		if err := os.Rename(s.tmp, s.path); err != nil {
			errs = append(errs, fmt.Errorf("rename %s to %s: %w", s.tmp, s.path, err))
			continue
		}
		temps[i].tmp = "" // renamed: nothing to clean up
		written = true
		dirsToSync[filepath.Dir(s.path)] = true
	}
	for _, e := range bc.entries {
		if e.typ != tar.TypeDir {
			continue
		}
		if root {
			if err := os.Lchown(e.path, e.uid, e.gid); err != nil {
				errs = append(errs, fmt.Errorf("chown %s: %w", e.path, err))
			}
		}
		if err := os.Chmod(e.path, e.mode); err != nil {
			errs = append(errs, fmt.Errorf("chmod %s: %w", e.path, err))
		}
		written = true
	}
	for d := range dirsToSync {
		if err := syncDir(d); err != nil {
			errs = append(errs, fmt.Errorf("sync %s: %w", d, err))
		}
	}
	return written, errors.Join(errs...)
}

// writeTemp writes one regular file of the archive to a temporary name next to its place,
// with its mode, owner (as root) and modification time, synced. It returns the temporary
// name whenever it created one.
func writeTemp(e backupEntry, content io.Reader, root bool) (string, error) {
	tmp := tempName(e.path)
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("create %s: %w", tmp, err)
	}
	n, err := io.Copy(out, content)
	if err == nil && n != e.size {
		err = fmt.Errorf("%d bytes in the archive, %d in the manifest", n, e.size)
	}
	if err == nil && root {
		err = out.Chown(e.uid, e.gid)
	}
	if err == nil {
		err = out.Chmod(e.mode)
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && !e.modTime.IsZero() {
		err = os.Chtimes(tmp, e.modTime, e.modTime)
	}
	if err != nil {
		return tmp, fmt.Errorf("write %s: %w", tmp, err)
	}
	return tmp, nil
}

// tempName is a unique temporary name next to p: <dir>/.<name>.cutover-restore-<random>.
func tempName(p string) string {
	return filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".cutover-restore-"+rand.Text())
}
