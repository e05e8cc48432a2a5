package upgrade

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cutover/cutover/upgrade/upgradetest"
	"golang.org/x/sys/unix"
)

// TestCheckSpace runs the stage check's free-space test on the master's own file system: a
// tree that fits passes, one larger than the room left is refused naming the directory and
// both sizes, and a directory that does not exist yet is judged by its nearest existing
// parent, as a first stage of a version finds it.
func TestCheckSpace(t *testing.T) {
	ctx := context.Background()
	c := upgradetest.LocalConn(t)
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	missing := filepath.Join(dir, "usr/lib/app/1.2.0")
	if _, err := os.Stat(filepath.Dir(missing)); !os.IsNotExist(err) {
		t.Fatalf("%s: %v, want it missing", filepath.Dir(missing), err)
	}
	for _, tt := range []struct {
		name string
		dir  string
		need int64
		want string // part of the refusal; "" for none
	}{
		{"a small tree fits", dir, 1 << 20, ""},
		{"a tree larger than the room left", dir, 2 * free, dir + " has "},
		{"a tree that fits only without the tenth more for metadata", dir, free - free/20, "free some space"},
		{"a directory not there yet, judged by its parent", missing, 1 << 20, ""},
		{"a directory not there yet, too large", missing, 2 * free, missing + " has "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := checkSpace(ctx, c, []string{tt.dir}, []int64{tt.need})
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("checkSpace(%s, %d) = %v, want it to pass", tt.dir, tt.need, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "the version needs")):
				t.Errorf("checkSpace(%s, %d) = %v, want a refusal naming %q and the need", tt.dir, tt.need, err, tt.want)
			}
		})
	}
	// Both trees in one command: each is judged by its own directory.
	if err := checkSpace(ctx, c, []string{dir, missing}, []int64{1 << 20, 1 << 20}); err != nil {
		t.Errorf("checkSpace of two trees that fit = %v", err)
	}
	if err := checkSpace(ctx, c, []string{dir, missing}, []int64{1 << 20, 2 * free}); err == nil || !strings.Contains(err.Error(), missing+" has ") {
		t.Errorf("checkSpace with the second tree too large = %v, want a refusal naming %s", err, missing)
	}
	if _, err := os.Stat(filepath.Dir(missing)); !os.IsNotExist(err) {
		t.Errorf("the check created %s: %v", filepath.Dir(missing), err)
	}
}
