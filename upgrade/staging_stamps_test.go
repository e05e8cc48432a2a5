package upgrade_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/nodes/sshdtest"
	"github.com/cutover/cutover/upgrade"
)

// TestRestageFindsChangedByte stages 1.2.0 from a directory on the master and a real sshd
// node with trees of its own, then changes one byte of one file of the source in place, its
// modification time put back: only the file's ctime tells. The restage judges the source by
// the stamps the first stage kept, and still finds the file: it refuses the differing copy
// without --replace and, with it, sends the file, and both nodes end with the new bytes.
// Then from a .tar.gz: a restage of the unchanged archive takes its trees from the stamps,
// and a node that lacks them gets them all the same.
func TestRestageFindsChangedByte(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1, sshdtest.WithOwnProcesses())
	sc := newSSHCluster(t, c, 8)
	libs := c.Bind(t, sc.path("usr/lib/app"))
	c.Bind(t, sc.path("usr/share/app"))
	cfg, err := upgrade.LoadConfig(sc.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	src := t.TempDir()
	app := filepath.Join(src, sc.tree("lib", "1.2.0"), "usr/sbin/app")
	for p, data := range map[string]string{
		app: strings.Repeat("1.2.0 binary\n", 1000),
		filepath.Join(src, sc.tree("share", "1.2.0"), "VERSION"): "1.2.0\n",
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Stamps taken within two seconds of a file's change are racy and not kept: let the
	// source age past that, so that the first stage keeps them all.
	time.Sleep(2100 * time.Millisecond)
	stage := func(source string, replace bool) (*upgrade.StagingResult, error) {
		return upgrade.StageVersion(ctx, cfg, upgrade.StagingOptions{Version: "1.2.0", Source: source, Replace: replace})
	}
	res, err := stage(src, false)
	if err != nil || res.Sent != 2*res.TreeBytes {
		t.Fatalf("first stage: sent %v of 2 x %v bytes, err %v; want both nodes sent everything", res.Sent, res.TreeBytes, err)
	}
	if fi, err := os.Lstat(upgrade.StampsPath(cfg)); err != nil || fi.Mode() != 0o600 {
		t.Fatalf("the stamps: %v, %v; want a file of mode 0600", fi, err)
	}
	if res, err := stage(src, false); err != nil || res.Sent != 0 || len(res.Already) != 2 {
		t.Fatalf("restage: sent %d, already on %v, err %v; want nothing sent", res.Sent, res.Already, err)
	}

	fi, err := os.Stat(app)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(app, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("X"), 500); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(app, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(app)
	if _, err := stage(src, false); err == nil || !strings.Contains(err.Error(), "usr/sbin/app") || !strings.Contains(err.Error(), "--replace") {
		t.Fatalf("restage of a source with a changed byte: err %v, want a refusal naming usr/sbin/app", err)
	}
	res, err = stage(src, true)
	if err != nil || res.Sent != 2*int64(len(want)) {
		t.Fatalf("restage --replace: sent %d, err %v; want the changed file on both nodes (%d bytes)", res.Sent, err, 2*len(want))
	}
	for _, dir := range []string{sc.tree("lib", "1.2.0"), filepath.Join(libs[0], "1.2.0")} {
		if got, err := os.ReadFile(filepath.Join(dir, "usr/sbin/app")); err != nil || string(got) != string(want) {
			t.Errorf("%s: usr/sbin/app is not the changed file (err %v)", dir, err)
		}
	}

	// From a .tar.gz of the source: the first stage keeps the archive's trees; the restage
	// takes them from the stamps and unpacks the archive only for the node that lacks them.
	tgz := filepath.Join(t.TempDir(), "app-1.2.0.tar.gz")
	writeTarGz(t, src, tgz)
	if _, err := stage(tgz, true); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(libs[0], "1.2.0"), filepath.Join(libs[0], ".1.2.0.cutover-manifest")} {
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}
	res, err = stage(tgz, false)
	if err != nil || res.Sent != res.TreeBytes-int64(len("1.2.0\n")) || len(res.Already) != 1 {
		t.Fatalf("restage from the archive to a node without the lib tree: sent %d of %d, already on %v, err %v", res.Sent, res.TreeBytes, res.Already, err)
	}
	if got, err := os.ReadFile(filepath.Join(libs[0], "1.2.0/usr/sbin/app")); err != nil || string(got) != string(want) {
		t.Errorf("the node's usr/sbin/app after the restage from the archive: err %v, not the archive's", err)
	}
	if entries, _ := os.ReadDir(cfg.Paths.StateDir); len(entries) == 0 {
		t.Error("the state directory is empty")
	} else {
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "stage-source-") || strings.Contains(e.Name(), ".new-") {
				t.Errorf("left behind in the state directory: %s", e.Name())
			}
		}
	}
}
