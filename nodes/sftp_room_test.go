package nodes_test

import (
	"path/filepath"
	"regexp"
	"testing"

	"github.com/cutover/cutover/nodes/sshdtest"
)

// TestFailureSaysRoom: a write that SFTP refuses with its generic "Failure" (as OpenSSH
// reports a full disk, and here a link whose name is taken) says what room the file system
// of the directory has left, as df and df -i would.
func TestFailureSaysRoom(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1)
	p := newPool(t, c, nil)
	conn := conn(t, p, "node1")
	dir := c.UserDir(t)
	name := filepath.Join(dir, "taken")
	if err := conn.Symlink("/nowhere", name); err != nil {
		t.Fatal(err)
	}
	err := conn.Symlink("/elsewhere", name)
	if err == nil {
		t.Fatal("a link over a taken name: err = nil, want SFTP's failure")
	}
	want := regexp.MustCompile(`^node1: .*Failure.*; the file system of ` + regexp.QuoteMeta(dir) + ` has [0-9]+ bytes available and [0-9]+ inodes free$`)
	if !want.MatchString(err.Error()) {
		t.Errorf("err = %q, want it to match %s", err, want)
	}
	// A failure that is not SFTP's generic one says nothing more.
	if err := conn.Symlink("/elsewhere", filepath.Join(dir, "missing", "link")); err == nil || regexp.MustCompile(`inodes free`).MatchString(err.Error()) {
		t.Errorf("a link in a missing directory: err = %v, want the error alone", err)
	}
}
