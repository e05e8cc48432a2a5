package upgrade

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	archive "github.com/cutover/cutover/upgrade/backup"
	"github.com/cutover/cutover/upgrade/config"
)

// BackupInfo describes one archive in the backup directory.
type BackupInfo = archive.Info

// Kinds of backup archive: BackupSwitch for an archive a run took before it changed
// anything, BackupBeforeRestore for the state `cutover backup restore` kept aside.
const (
	BackupSwitch        = archive.KindSwitch
	BackupBeforeRestore = archive.KindBeforeRestore
)

// BackupListOptions say how closely `cutover backup list` checks the archives.
type BackupListOptions struct {
	// Verify reads every archive through and checks every entry against its manifest.
	Verify bool
}

// BackupList is what `cutover backup list` shows.
type BackupList struct {
	// Dir is the backup directory.
	Dir string `json:"dir"`
	// Backups are the application's archives, oldest first.
	Backups []BackupInfo `json:"backups"`
}

// ListBackups lists the archives of the application in the backup directory, oldest first,
// reading each one's manifest (and with opts.Verify every entry). It only reads: it works
// during a run. A missing directory has no archives. An archive that cannot be read or does
// not check out is listed with its problem, not an error.
func ListBackups(ctx context.Context, cfg *config.Config, opts BackupListOptions) (*BackupList, error) {
	sc, err := backupScope(cfg)
	if err != nil {
		return nil, err
	}
	list, err := archive.List(ctx, BackupDir(cfg), cfg.App, sc, opts.Verify)
	if err != nil {
		return nil, err
	}
	return &BackupList{Dir: BackupDir(cfg), Backups: list}, nil
}

// restoreStages returns the stages of `cutover backup restore` in the order they run,
// working on the restore st describes. The restore stage is the point of no return: it
// runs to its end whatever signal arrives. From the intent on the restore is pending: a
// crash or a reboot leaves it for `cutover upgrade --resume` to finish (or, before the
// restore stage, for `--abort` to undo), like any run.
func restoreStages(st *restoring) []Stage {
	return []Stage{
		restoreCheck{st}, // 1 master: the archive against its manifest, the disk, the daemons stopped; read-only
		intent{},         // 2 master: the intent file (undo: remove it)
		keepCurrent{st},  // 3 master: the state about to be replaced, archived aside (undo: remove it)
		restoreFiles{st}, // 4 master: the archive's entries in place (point of no return)
	}
}

// restoring is what the stages of one restore share.
type restoring struct {
	id   string
	file *os.File // the archive, open from the check to the end
	sc   archive.Scope
	plan *archive.Plan // what the check verified, and the restore writes
	rep  *RestoreReport
	note string // the check's summary, for the journal
	err  error  // why the restore stage failed
}

// RestoreOptions are what `cutover backup restore` needs besides the config.
type RestoreOptions struct {
	// ID names the archive, as `cutover backup list` shows it.
	ID string
	// Hostname is the local host's name; "" asks the system.
	Hostname string
	// Reporter receives the restore's events; nil reports nothing. Warnings also end up in
	// the report.
	Reporter Reporter
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
	// Skipped are what the backup found and did not archive (sockets, fifos, devices, links
	// that lead elsewhere): not restored.
	Skipped []archive.Skipped `json:"skipped"`
	// Warnings are things the operator should know that did not stop the restore.
	Warnings []string `json:"warnings"`
}

// RestoreBackup puts the master's application state, its /etc/<app> directory and the links
// back as archive opts.ID holds them. It refuses, changing nothing, when the id is not one
// that ListBackups shows (IsBadInput), when this host is not the master (IsNotMaster), when
// another run holds the lock (journal.IsLocked), when a run is pending, when the archive does
// not check out against its manifest (upgrade/backup's Verify: paths, types, owners, modes,
// sizes, checksums, link targets), when the disk does not allow it (a directory of the
// archive that is a link or a file here, a file that is a directory here, a link that would
// point at a version that is not installed), and while the daemons run.
//
// The daemons count as running when the configured verify command exits 0 on the master;
// with no verify command configured, restore refuses, as it cannot tell. It runs as the
// stages of restoreStages through the Runner: check (read-only), keep-current (the current
// state archived aside, Kept), restore (the point of no return: signals no longer stop it).
// A refused check leaves no trace; from keep-current on, the restore is a run of KindRestore
// in the journal. The restore writes exactly what the check verified, through
// directory descriptors, never through a link (upgrade/backup's Plan.Restore). Files that
// exist but are not in the archive are left alone. Only the master is restored: the other
// nodes get the config and the links by `cutover sync` or a run.
func RestoreBackup(ctx context.Context, cfg *config.Config, opts RestoreOptions) (*RestoreReport, error) {
	id := strings.TrimSuffix(opts.ID, ".tar.gz")
	if err := archive.CheckID(id); err != nil {
		return nil, badInput(err)
	}
	sc, err := backupScope(cfg)
	if err != nil {
		return nil, err
	}
	s, err := openSession(ctx, cfg, modeExclusive, sessionOptions{Reporter: opts.Reporter, Hostname: opts.Hostname, HostCheck: true})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if err := s.refusePending("restoring a backup"); err != nil {
		return nil, err
	}
	r := s.r
	dir := BackupDir(cfg)
	ids, err := archive.IDs(dir, cfg.App)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(ids, id) {
		return nil, badInput(fmt.Errorf("no backup %s in %s (see 'cutover backup list')", id, dir))
	}
	rep := &RestoreReport{
		ID: id, Archive: filepath.Join(dir, id+".tar.gz"), Links: map[string]string{},
		Files: []string{}, Dirs: []string{}, Symlinks: []string{}, Skipped: []archive.Skipped{}, Warnings: []string{},
	}
	f, err := archive.Open(rep.Archive)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	defer f.Close()
	st := &restoring{id: id, file: f, sc: sc, rep: rep}
	r.report = st.collectWarnings(r.report)
	err = execute(ctx, r, recipe{
		kind: KindRestore, stages: restoreStages(st), facts: map[string]string{"archive": rep.Archive},
		what:  "restore " + id,
		where: "on " + r.Inventory.Master,
	})
	rep.Run = r.ID
	return rep, st.result(err)
}

// collectWarnings returns a Reporter that keeps the warnings in the restore's report and
// passes every event on to next.
func (st *restoring) collectWarnings(next Reporter) Reporter {
	return ReporterFunc(func(e Event) {
		if e.Type == "warn" {
			st.rep.Warnings = append(st.rep.Warnings, e.Message)
		}
		next.Report(e)
	})
}

// result is the error a restore ends with, given the Runner's.
func (st *restoring) result(err error) error {
	if err != nil && IsPastPONR(err) && st.err != nil {
		return pastPONR(fmt.Errorf("restore %s failed part way: %w; the state before it is in %s; the restore stays pending: fix the cause and run 'cutover upgrade --resume' to finish it", st.id, st.err, st.rep.Kept))
	}
	return err
}

// checkDaemonsStopped refuses while the application's daemons run on the master: when the
// configured verify command exits 0 there, the cluster is up.
func checkDaemonsStopped(ctx context.Context, r *Run) error {
	cmd := r.Config.Commands.Verify
	if cmd == "" {
		return badInput(errors.New("backup restore needs [commands] verify to tell that the daemons are stopped, and none is configured"))
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

// keepState archives the state a restore is about to replace, next to the other backups:
// <app>-<live>-before-restore-<UTC>.tar.gz. backup_keep does not remove it.
func keepState(ctx context.Context, cfg *config.Config, sc archive.Scope, live string) (string, archive.Manifest, error) {
	if live == "unknown" || archive.CheckID(fmt.Sprintf("%s-%s-%s-%s", cfg.App, live, BackupBeforeRestore, time.Now().UTC().Format(archive.Stamp))) != nil {
		live = "0.0.0"
	}
	dir := BackupDir(cfg)
	// Two restores within one second would get the same name: wait for the next one.
	for i := 0; ; i++ {
		m := archive.Manifest{Kind: BackupBeforeRestore, App: cfg.App, From: live, To: live, Created: time.Now().UTC()}
		if _, err := os.Lstat(filepath.Join(dir, m.ID()+".tar.gz")); errors.Is(err, os.ErrNotExist) || i == 20 {
			return archive.Write(ctx, dir, sc, m)
		}
		select {
		case <-ctx.Done():
			return "", archive.Manifest{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
