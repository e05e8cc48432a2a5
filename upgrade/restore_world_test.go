package upgrade

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
	archive "github.com/cutover/cutover/upgrade/backup"
	"github.com/cutover/cutover/upgrade/upgradetest"
)

// restoreFixture is a Rooted World's setup for a restore: the master's state file says
// "archived" in an archive of the state taken as a backup of 1.0.0 -> 1.1.0, and "changed
// since" now; st is what the restore's stages share, for that archive.
func restoreFixture(st *restoring) func(t *testing.T, w *upgradetest.World) {
	return func(t *testing.T, w *upgradetest.World) {
		cfg := w.Config()
		w.WriteFile(t, w.Master, "/var/lib/app/state.db", "archived\n")
		sc, err := backupScope(cfg)
		if err != nil {
			t.Fatal(err)
		}
		m := archive.Manifest{Kind: archive.KindSwitch, App: cfg.App, Run: 1, From: "1.0.0", To: "1.1.0", Created: time.Now().UTC()}
		path, m, err := archive.Write(context.Background(), BackupDir(cfg), sc, m)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		w.WriteFile(t, w.Master, "/var/lib/app/state.db", "changed since\n")
		*st = restoring{id: m.ID(), file: f, sc: sc, rep: &RestoreReport{ID: m.ID(), Archive: path, Links: map[string]string{}, Previous: "1.0.0"}}
	}
}

// wantState checks what the master's state file says.
func wantState(want string) func(t *testing.T, w *upgradetest.World, r *Run) {
	return func(t *testing.T, w *upgradetest.World, r *Run) {
		t.Helper()
		if got := w.ReadFile(w.Master, "/var/lib/app/state.db"); got != want {
			t.Errorf("the state file says %q, want %q", got, want)
		}
	}
}

// TestRestoreStagesOnAWorld runs the stages of a backup restore alone on a fake cluster whose
// daemons are down (verify fails), or up.
func TestRestoreStagesOnAWorld(t *testing.T) {
	daemonsDown := func(st *restoring) func(t *testing.T, w *upgradetest.World) {
		return func(t *testing.T, w *upgradetest.World) {
			restoreFixture(st)(t, w)
			w.Fail(w.Master, "verify")
		}
	}
	var checked, up, kept, blocked, restored restoring
	runWorldCases(t, []worldCase{
		{name: "check passes the archive against its manifest with the daemons down, and changes nothing",
			opts: rooted, from: "1.0.0", to: "1.0.0", setup: daemonsDown(&checked), stage: restoreCheck{&checked},
			state: journal.Done, calls: []string{"node1: verify"},
			check: func(t *testing.T, w *upgradetest.World, r *Run) {
				wantState("changed since\n")(t, w, r)
				if checked.plan == nil || checked.rep.Version != "1.0.0" {
					t.Errorf("check: plan %v, version %q; want a plan of the archive of 1.0.0", checked.plan, checked.rep.Version)
				}
			}},
		{name: "check refuses while the daemons run",
			opts: rooted, from: "1.0.0", to: "1.0.0", setup: restoreFixture(&up), stage: restoreCheck{&up},
			state: journal.Failed, err: "stop the daemons first", calls: []string{"node1: verify"},
			check: wantState("changed since\n")},
		{name: "keep-current archives the state about to be replaced and names it in fact kept; its undo removes it",
			opts: rooted, from: "1.0.0", to: "1.0.0", setup: daemonsDown(&kept), stage: keepCurrent{&kept}, state: journal.Done,
			check: func(t *testing.T, w *upgradetest.World, r *Run) {
				p, _ := r.Fact("kept")
				if filepath.Dir(p) != BackupDir(r.Config) || !strings.HasPrefix(filepath.Base(p), "app-1.0.0-"+BackupBeforeRestore+"-") {
					t.Fatalf("fact kept = %q, want app-1.0.0-%s-* in %s", p, BackupBeforeRestore, BackupDir(r.Config))
				}
				if names := strings.Join(archiveNames(t, p), "\n"); !strings.Contains(names, "var/lib/app/state.db") {
					t.Errorf("the kept archive holds\n%s\nand not the state file", names)
				}
			},
			undo: &worldUndo{check: func(t *testing.T, w *upgradetest.World, r *Run) {
				p, _ := r.Fact("kept")
				if _, err := os.Stat(p); !os.IsNotExist(err) {
					t.Errorf("undo: %s is still there (%v)", p, err)
				}
				if _, err := os.Stat(kept.rep.Archive); err != nil {
					t.Errorf("undo: the archive to restore is gone: %v", err)
				}
			}}},
		{name: "keep-current fails when the backup dir cannot take an archive, and the runner undoes it",
			opts: rooted, from: "1.0.0", to: "1.0.0", setup: func(t *testing.T, w *upgradetest.World) {
				daemonsDown(&blocked)(t, w)
				// The archive to restore stays open; where backups go is a file now.
				dir := filepath.Join(w.Dir, "state", "backups")
				if err := os.Rename(dir, dir+".aside"); err != nil {
					t.Fatal(err)
				}
				w.WriteFile(t, w.Master, dir, "a file where the backups go\n")
			}, stage: keepCurrent{&blocked}, state: journal.Undone, err: "nothing was restored",
			check: func(t *testing.T, w *upgradetest.World, r *Run) {
				if _, ok := r.Fact("kept"); ok {
					t.Error("fact kept learned for an archive that was not written")
				}
				wantState("changed since\n")(t, w, r)
			}},
		{name: "restore puts the archived state back",
			opts: rooted, from: "1.0.0", to: "1.0.0", setup: daemonsDown(&restored), before: []Stage{restoreCheck{&restored}},
			stage: restoreFiles{&restored}, state: journal.Done, calls: []string{"node1: verify"}, check: wantState("archived\n")},
	})
}
