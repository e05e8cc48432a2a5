package backup

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The attacks of the audit, as an unprivileged local user who owns a directory in the
// application's state (/var/lib/app/home here) would make them: between cutover's check and
// its write, the user swaps a file or a directory for a link to something only root may
// touch. A hook makes each race deterministic: testHookListed for a backup, and the gap
// between NewPlan and Plan.Restore for a restore.

const secret = "root-only secret!\n"

// hostile adds the attacker's directory and a root-only secret outside and inside the state.
func hostile(t *testing.T) (*fixture, attacker) {
	t.Helper()
	a := newAttacker(t)
	f := newFixture(t)
	f.reachable()
	f.mkdir("/secret", 0o700)
	f.write("/secret/shadow", secret, 0o600)
	f.mkdir("/var/lib/app/keys", 0o700)
	f.write("/var/lib/app/keys/key", secret, 0o600)
	f.mkdir("/var/lib/app/home", 0o755)
	f.chown("/var/lib/app/home", a.uid, a.gid)
	f.write("/var/lib/app/home/notes", strings.Repeat("n", len(secret)-1)+"\n", 0o644) // the secret's size
	f.chown("/var/lib/app/home/notes", a.uid, a.gid)
	return f, a
}

// onListed sets the backup's listing hook for the test's duration: fn runs once, when p has
// been listed and before it is opened.
func onListed(t *testing.T, p string, fn func()) {
	t.Helper()
	done := false
	testHookListed = func(listed string) {
		if listed == p && !done {
			done = true
			fn()
		}
	}
	t.Cleanup(func() { testHookListed = nil })
}

// noSecretIn fails if any file of dir holds the secret.
func noSecretIn(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		if bytes.Contains(data, []byte(secret)) {
			t.Errorf("%s holds the root-only secret", e.Name())
		}
	}
}

// TestAttackBackupFileSwappedForLink: the user's file is listed, then swapped for a link to
// a root-only file of the same size. Before, the backup reopened the path, archived the
// secret under the user's name with the user's owner and mode, and a restore gave it to the
// user. Now the file is opened without following the link: the backup is refused, naming it.
func TestAttackBackupFileSwappedForLink(t *testing.T) {
	f, a := hostile(t)
	onListed(t, "/var/lib/app/home/notes", func() {
		a.run(t, f.path("/var/lib/app/home"), "rm notes && ln -s "+f.path("/secret/shadow")+" notes")
	})
	_, _, err := f.tryBackup()
	if !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), "/var/lib/app/home/notes") {
		t.Fatalf("Write with notes swapped for a link to a root-only file = %v, want refused (ErrChanged), naming it", err)
	}
	if entries, _ := os.ReadDir(f.dir()); len(entries) != 0 {
		t.Errorf("a refused backup left %d files in the backup directory", len(entries))
	}
	noSecretIn(t, f.dir())
}

// TestAttackBackupDirSwappedForLink: the user's directory is listed, then swapped for a link
// to a root-only directory. The backup does not descend through the link.
func TestAttackBackupDirSwappedForLink(t *testing.T) {
	f, a := hostile(t)
	f.mkdir("/var/lib/app/home/sub", 0o755)
	f.chown("/var/lib/app/home/sub", a.uid, a.gid)
	onListed(t, "/var/lib/app/home/sub", func() {
		a.run(t, f.path("/var/lib/app/home"), "mv sub sub.old && ln -s "+f.path("/secret")+" sub")
	})
	_, _, err := f.tryBackup()
	if !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), "/var/lib/app/home/sub") {
		t.Fatalf("Write with a directory swapped for a link = %v, want refused (ErrChanged), naming it", err)
	}
	noSecretIn(t, f.dir())
}

// TestAttackBackupFileSwappedForFile: the user swaps the listed file for another regular
// file (their own, or a hard link): not the file listed, refused.
func TestAttackBackupFileSwappedForFile(t *testing.T) {
	f, a := hostile(t)
	onListed(t, "/var/lib/app/home/notes", func() {
		a.run(t, f.path("/var/lib/app/home"), "cp notes notes.new && mv notes.new notes")
	})
	if _, _, err := f.tryBackup(); !errors.Is(err, ErrChanged) {
		t.Fatalf("Write with notes replaced by another file = %v, want refused (ErrChanged)", err)
	}
}

// TestAttackRestoreDirSwappedForLink: the archive holds the user's directory (mode 0777) and
// a file in it. Between the check and the write, the user swaps the directory for a link to
// a root-only directory. Before, root chmodded the link's target 0777 and wrote the user's
// files into it. Now the restore refuses, writes nothing, and leaves no temporary file.
func TestAttackRestoreDirSwappedForLink(t *testing.T) {
	for _, tt := range []struct {
		name, swap string
	}{
		{"link out of the state", "mv home home.old && ln -s SECRET home"},
		{"link to a root-only directory of the state", "mv home home.old && ln -s keys home"},
		{"another directory", "mv home home.old && mkdir home"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, a := hostile(t)
			if err := os.Chmod(f.path("/var/lib/app"), 0o777); err != nil { // the user may rename in the state dir
				t.Fatal(err)
			}
			if err := os.Chmod(f.path("/var/lib/app/home"), 0o777); err != nil {
				t.Fatal(err)
			}
			f.write("/var/lib/app/home/mine", "the user's file\n", 0o644)
			f.chown("/var/lib/app/home/mine", a.uid, a.gid)
			p, _ := f.backup()
			if err := os.Chmod(f.path("/var/lib/app"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(f.path("/var/lib/app/home"), 0o755); err != nil {
				t.Fatal(err)
			}

			_, plan, err := f.check(p)
			if err != nil {
				t.Fatalf("check = %v", err)
			}
			if err := os.Chmod(f.path("/var/lib/app"), 0o777); err != nil {
				t.Fatal(err)
			}
			a.run(t, f.path("/var/lib/app"), strings.ReplaceAll(tt.swap, "SECRET", f.path("/secret")))
			before := f.tree()
			written, err := f.restorePlan(p, plan)
			if err == nil || written || !strings.Contains(err.Error(), "/var/lib/app/home") {
				t.Fatalf("restore after the swap = %v, %v; want refused, nothing written, naming /var/lib/app/home", written, err)
			}
			t.Logf("refused: %v", err)
			if after := f.tree(); after != before {
				t.Errorf("the refused restore changed files:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			for _, dir := range []string{"/secret", "/var/lib/app/keys"} {
				if info, err := os.Stat(f.path(dir)); err != nil || info.Mode().Perm() != 0o700 {
					t.Errorf("%s: %v, %v; want it 0700 still", dir, info.Mode(), err)
				}
			}
			if temps := f.temps(); len(temps) > 0 {
				t.Errorf("temporary files left: %v", temps)
			}
		})
	}
}

// TestAttackRestoreFileSwappedForLink: between the check and the write, the user swaps their
// file for a link to a root-only file. The restore replaces the link by the archived file
// (a rename replaces a link, it never writes through it): the root-only file is untouched.
func TestAttackRestoreFileSwappedForLink(t *testing.T) {
	f, a := hostile(t)
	f.write("/var/lib/app/home/mine", "the user's file\n", 0o644)
	f.chown("/var/lib/app/home/mine", a.uid, a.gid)
	p, _ := f.backup()
	_, plan, err := f.check(p)
	if err != nil {
		t.Fatalf("check = %v", err)
	}
	a.run(t, f.path("/var/lib/app/home"), "ln -sf "+f.path("/secret/shadow")+" mine")
	if written, err := f.restorePlan(p, plan); err != nil || !written {
		t.Fatalf("restore = %v, %v", written, err)
	}
	if info, err := os.Lstat(f.path("/var/lib/app/home/mine")); err != nil || !info.Mode().IsRegular() || f.read("/var/lib/app/home/mine") != "the user's file\n" {
		t.Errorf("home/mine after the restore: %v, %v; want the archived regular file", info, err)
	}
	if got := f.read("/secret/shadow"); got != secret {
		t.Errorf("the root-only file was written: %q", got)
	}
	if info, _ := os.Stat(f.path("/secret/shadow")); info.Mode().Perm() != 0o600 {
		t.Errorf("the root-only file's mode = %v, want 0600", info.Mode())
	}
}
