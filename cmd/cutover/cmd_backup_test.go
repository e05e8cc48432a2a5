package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/cutover/cutover/journal"
)

// backupIDs lists the archive ids in the local cluster's backup directory.
func (lc *localCluster) backupIDs() []string {
	lc.t.Helper()
	names, err := filepath.Glob(lc.path("state/backups/*.tar.gz"))
	if err != nil {
		lc.t.Fatal(err)
	}
	var ids []string
	for _, n := range names {
		ids = append(ids, strings.TrimSuffix(filepath.Base(n), ".tar.gz"))
	}
	sort.Strings(ids)
	return ids
}

// upgraded returns a local cluster upgraded from 1.0.0 to 1.1.0, its config before the
// upgrade and the id of the archive the upgrade took.
func upgraded(t *testing.T) (*localCluster, string, string) {
	t.Helper()
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	conf := lc.read("var/lib/app/config.json")
	if code, out, errOut := lc.cutover("upgrade", "--to=1.1.0", "--yes"); code != 0 {
		t.Fatalf("upgrade exit %d\n%s%s", code, out, errOut)
	}
	ids := lc.backupIDs()
	if len(ids) != 1 || !strings.HasPrefix(ids[0], "app-1.0.0-to-1.1.0-") {
		t.Fatalf("backups after the upgrade = %v, want one of 1.0.0 -> 1.1.0", ids)
	}
	return lc, conf, ids[0]
}

func TestBackupListLocal(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	if code, out, _ := lc.cutover("backup", "list"); code != 0 || !strings.HasPrefix(out, "no backups yet in ") {
		t.Errorf("backup list before any run: exit %d, %q; want 0 and no backups yet", code, out)
	}
	if code, out, errOut := lc.cutover("upgrade", "--to=1.1.0", "--yes"); code != 0 {
		t.Fatalf("upgrade exit %d\n%s%s", code, out, errOut)
	}
	id := lc.backupIDs()[0]

	tests := []struct {
		golden string
		args   []string
		want   string
	}{
		{"backup-list.golden", []string{"backup", "list"}, "manifest ok"},
		{"backup-list-verify.golden", []string{"backup", "list", "--verify"}, "verified"},
		{"backup-list-json.golden", []string{"--output", "json", "backup", "list"}, `"manifest_ok": true`},
	}
	for _, tt := range tests {
		code, out, errOut := lc.cutover(tt.args...)
		if code != 0 || errOut != "" || !strings.Contains(out, id) || !strings.Contains(out, tt.want) {
			t.Errorf("%v: exit %d, stderr %q, stdout:\n%s\nwant exit 0 listing %s with %q", tt.args, code, errOut, out, id, tt.want)
		}
		golden(t, tt.golden, []byte(normalizeOutput(lc, out)))
	}

	_, out, _ := lc.cutover("--output", "json", "backup", "list", "--verify")
	var doc struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Backups    []struct {
			ID, From, To string
			Run          uint64
			Files        int
			Verified     bool
		} `json:"backups"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("backup list --output json: %v\n%s", err, out)
	}
	if doc.APIVersion != "cutover/v1" || doc.Kind != "BackupList" || len(doc.Backups) != 1 {
		t.Fatalf("backup list --output json = %+v, want one archive in a BackupList", doc)
	}
	if b := doc.Backups[0]; b.ID != id || b.From != "1.0.0" || b.To != "1.1.0" || b.Run != 1 || b.Files != 1 || !b.Verified {
		t.Errorf("archive = %+v, want %s of run 1, 1.0.0 -> 1.1.0, 1 file, verified", b, id)
	}

	// A damaged archive is listed with its problem, and the listing still succeeds.
	if err := os.WriteFile(lc.path("state/backups/app-1.1.0-to-1.2.0-20300101T000000Z.tar.gz"), []byte("not gzip"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := lc.cutover("backup", "list")
	if code != 0 || !strings.Contains(out, "BAD: ") || !strings.Contains(out, id) {
		t.Errorf("backup list with a damaged archive: exit %d, stderr %q, stdout:\n%s\nwant 0 with the damaged one marked BAD", code, errOut, out)
	}
}

func TestBackupRestoreLocal(t *testing.T) {
	lc, conf100, id := upgraded(t)
	conf110 := lc.read("var/lib/app/config.json")

	// verify exits 0: the cluster is up, and restore refuses, changing nothing.
	before := lc.snapshot()
	code, out, errOut := lc.cutover("backup", "restore", id)
	if code != exitFailed || !strings.Contains(errOut, "stop the daemons first") || out != "" {
		t.Errorf("restore while verify exits 0: exit %d, stdout %q, stderr %q; want %d and stop the daemons first", code, out, errOut, exitFailed)
	}
	if after := lc.snapshot(); after != before {
		t.Errorf("a refused restore changed the cluster:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if ids := lc.backupIDs(); len(ids) != 1 {
		t.Errorf("a refused restore wrote an archive: %v", ids)
	}

	// The daemons are down (verify fails): restore brings the config and the links back.
	lc.setCommand("verify", "false")
	code, out, errOut = lc.cutover("backup", "restore", id)
	if code != 0 || errOut != "" {
		t.Fatalf("restore: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	golden(t, "backup-restore.golden", []byte(normalizeOutput(lc, out)))
	if got := lc.read("var/lib/app/config.json"); got != conf100 {
		t.Errorf("config after restore:\n%s\nwant as before the upgrade:\n%s", got, conf100)
	}
	if got := lc.readlink("etc/app/lib"); got != "/usr/lib/app/1.0.0" {
		t.Errorf("lib link after restore -> %s, want /usr/lib/app/1.0.0", got)
	}
	if got := lc.readlink("etc/app/share"); got != "/usr/share/app/1.0.0" {
		t.Errorf("share link after restore -> %s, want /usr/share/app/1.0.0", got)
	}
	if info, err := os.Stat(lc.path("var/lib/app/config.json")); err != nil || info.Mode().Perm() != 0o644 {
		t.Errorf("config mode after restore = %v, %v; want 0644 as archived", info.Mode().Perm(), err)
	}
	leftovers, _ := filepath.Glob(lc.path("*/*/*/.*cutover-restore*"))
	more, _ := filepath.Glob(lc.path("etc/app/.*cutover-restore*"))
	if len(leftovers)+len(more) > 0 {
		t.Errorf("temporary files left: %v %v", leftovers, more)
	}

	// The state before the restore was kept aside, and is listed and restorable.
	ids := lc.backupIDs()
	kept := ""
	for _, i := range ids {
		if strings.HasPrefix(i, "app-1.1.0-before-restore-") {
			kept = i
		}
	}
	if len(ids) != 2 || kept == "" {
		t.Fatalf("backups after restore = %v, want the upgrade's and a before-restore archive of 1.1.0", ids)
	}
	if code, out, _ := lc.cutover("backup", "list", "--verify"); code != 0 || strings.Count(out, "verified") != 2 || !strings.Contains(out, "before restore at 1.1.0") {
		t.Errorf("backup list after restore: exit %d\n%s\nwant both archives verified, one before restore at 1.1.0", code, out)
	}
	runs, err := journal.NewStore(lc.path("state/journal.db")).Runs(t.Context())
	if err != nil || len(runs) != 2 {
		t.Fatalf("journal runs = %v, %v; want the upgrade and the restore", runs, err)
	}
	if r := runs[1]; r.Kind != "restore" || r.From != "1.1.0" || r.To != "1.0.0" || r.Outcome != journal.Succeeded || !strings.HasSuffix(r.Facts["kept"], kept+".tar.gz") {
		t.Errorf("journal restore run = %+v", r)
	}

	// Restoring the kept archive undoes the restore.
	code, out, errOut = lc.cutover("--output", "json", "backup", "restore", kept+".tar.gz")
	if code != 0 {
		t.Fatalf("restore %s: exit %d\n%s%s", kept, code, out, errOut)
	}
	var doc struct {
		APIVersion, Kind  string
		Version, Previous string
		Files             []string
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.APIVersion != "cutover/v1" || doc.Kind != "BackupRestore" || doc.Version != "1.1.0" || doc.Previous != "1.0.0" || len(doc.Files) == 0 {
		t.Errorf("restore --output json = %+v, %v\n%s", doc, err, out)
	}
	if got := lc.read("var/lib/app/config.json"); got != conf110 {
		t.Errorf("config after restoring the kept state:\n%s\nwant:\n%s", got, conf110)
	}
	if got := lc.readlink("etc/app/lib"); got != "/usr/lib/app/1.1.0" {
		t.Errorf("lib link after restoring the kept state -> %s, want /usr/lib/app/1.1.0", got)
	}
}

func TestBackupRestoreRefusals(t *testing.T) {
	host, _ := os.Hostname()
	tests := []struct {
		name     string
		setup    func(t *testing.T, lc *localCluster)
		id       string // "" for the upgrade's archive
		wantCode int
		wantErr  string
		// noSnapshot: the setup leaves what lc.snapshot reads unreadable; the file tree is
		// still compared.
		noSnapshot bool
	}{
		{"path", nil, "../../etc/passwd", exitUsage, "not a backup id", false},
		{"slash", nil, "app-1.0.0-to-1.1.0-20260101T000000Z/x", exitUsage, "not a backup id", false},
		{"shell", nil, "app-1.0.0-to-1.1.0-20260101T000000Z; rm -rf /", exitUsage, "not a backup id", false},
		{"empty", nil, " ", exitUsage, "not a backup id", false},
		{"unknown", nil, "app-1.0.0-to-1.1.0-20260101T000000Z", exitUsage, "no backup app-1.0.0-to-1.1.0-20260101T000000Z", false},
		{"other application", nil, "other-1.0.0-to-1.1.0-20260101T000000Z", exitUsage, "no backup", false},
		{"no verify", func(t *testing.T, lc *localCluster) { lc.setCommand("verify", "") }, "", exitUsage, "verify", false},
		{"pending run", func(t *testing.T, lc *localCluster) {
			if err := journal.WriteIntent(lc.path("state/intent.json"), journal.Intent{RunID: 7, From: "1.1.0", To: "1.0.0"}); err != nil {
				t.Fatal(err)
			}
		}, "", exitFailed, "run 7 (1.1.0 -> 1.0.0) is pending", false},
		{"locked", func(t *testing.T, lc *localCluster) {
			lock, err := journal.AcquireLock(lc.path("state/lock"), journal.Holder{Host: "node9", PID: 4242})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { lock.Release() })
		}, "", exitLocked, "4242", false},
		{"not the master", func(t *testing.T, lc *localCluster) {
			lc.writeConfig(strings.ReplaceAll(lc.read("cutover.toml"), fmt.Sprintf("%q", host), `"elsewhere"`))
		}, "", exitNotMaster, "not the cluster's master", false},
		{"version not installed", func(t *testing.T, lc *localCluster) {
			if err := os.RemoveAll(lc.path("usr/share/app/1.0.0")); err != nil {
				t.Fatal(err)
			}
		}, "", exitFailed, "not installed", false},
		{"directory in the way", func(t *testing.T, lc *localCluster) {
			if err := os.Remove(lc.path("var/lib/app/config.json")); err != nil {
				t.Fatal(err)
			}
			lc.mkdir("var/lib/app/config.json")
		}, "", exitFailed, "is a directory here", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lc, _, id := upgraded(t)
			lc.setCommand("verify", "false")
			if tt.setup != nil {
				tt.setup(t, lc)
			}
			if tt.id != "" {
				id = tt.id
			}
			snapshot := lc.snapshot
			if tt.noSnapshot {
				snapshot = func() string { return "" }
			}
			before := snapshot()
			var tree []string
			_ = filepath.Walk(lc.root, func(p string, info os.FileInfo, err error) error {
				if err == nil && !strings.HasPrefix(p, lc.path("state")) {
					tree = append(tree, fmt.Sprintf("%s %v %d", p, info.Mode(), info.Size()))
				}
				return nil
			})
			code, out, errOut := lc.cutover("backup", "restore", id)
			if code != tt.wantCode || !strings.Contains(errOut, tt.wantErr) || out != "" {
				t.Errorf("restore %q: exit %d, stdout %q, stderr %q; want exit %d and %q", id, code, out, errOut, tt.wantCode, tt.wantErr)
			}
			if !strings.HasPrefix(errOut, "cutover: ") {
				t.Errorf("stderr %q is not a cutover: line", errOut)
			}
			if after := snapshot(); after != before {
				t.Errorf("a refused restore changed the cluster:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			var after []string
			_ = filepath.Walk(lc.root, func(p string, info os.FileInfo, err error) error {
				if err == nil && !strings.HasPrefix(p, lc.path("state")) {
					after = append(after, fmt.Sprintf("%s %v %d", p, info.Mode(), info.Size()))
				}
				return nil
			})
			if strings.Join(after, "\n") != strings.Join(tree, "\n") {
				t.Errorf("a refused restore changed files:\nbefore:\n%s\nafter:\n%s", strings.Join(tree, "\n"), strings.Join(after, "\n"))
			}
			if ids := lc.backupIDs(); len(ids) != 1 {
				t.Errorf("a refused restore wrote an archive: %v", ids)
			}
		})
	}
}

func TestBackupUsage(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0")
	for _, args := range [][]string{
		{"backup"},
		{"backup", "frobnicate"},
		{"backup", "restore"},
		{"backup", "restore", "a", "b"},
		{"backup", "list", "extra"},
		{"backup", "list", "--bogus"},
	} {
		code, _, errOut := lc.cutover(args...)
		if code != exitUsage || !strings.HasPrefix(errOut, "cutover: ") {
			t.Errorf("%v: exit %d, stderr %q; want %d and a cutover: line", args, code, errOut, exitUsage)
		}
	}
}

// TestUpgradeBacksUpAroundSpecialFiles: a unix socket in the state no longer fails the
// upgrade at the backup stage; it is named, and the state on another disk (a linked state
// directory) is backed up with its content.
func TestUpgradeBacksUpAroundSpecialFiles(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	if err := os.Rename(lc.path("var/lib/app"), lc.path("srv-app")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(lc.path("srv-app"), lc.path("var/lib/app")); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", lc.path("srv-app/sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	code, out, errOut := lc.cutover("upgrade", "--to=1.1.0", "--yes")
	if code != 0 {
		t.Fatalf("upgrade with a socket in the state: exit %d\n%s%s", code, out, errOut)
	}
	if want := lc.path("var/lib/app/sock") + " (socket)"; !strings.Contains(out+errOut, want) {
		t.Errorf("upgrade output does not name %s:\n%s%s", want, out, errOut)
	}
	code, out, _ = lc.cutover("--output", "json", "backup", "list", "--verify")
	var doc struct {
		Backups []struct {
			Files    int
			Verified bool
		} `json:"backups"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 || len(doc.Backups) != 1 || doc.Backups[0].Files != 1 || !doc.Backups[0].Verified {
		t.Errorf("backup list --verify: exit %d, %+v, %v\n%s\nwant the config file of the linked state, verified", code, doc, err, out)
	}
}
