package upgrade_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/nodes/sshdtest"
	"github.com/cutover/cutover/upgrade"
	"github.com/cutover/cutover/upgrade/staging"
)

// TestStageVersion stages 1.2.0 from a directory and from a .tar.gz on the master: a first
// run installs both trees, a rerun sends nothing, a live version and a differing copy are
// refused before anything changes, and --replace replaces the differing copy.
func TestStageVersion(t *testing.T) {
	t.Parallel()
	sc := newSSHCluster(t, sshdtest.Start(t, 1), 8)
	cfg, err := upgrade.LoadConfig(sc.cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Only the master: the sshd node shares this host's directories.
	cfg.Cluster.Nodes = cfg.Cluster.Nodes[:1]
	ctx := context.Background()

	src := t.TempDir()
	lib := filepath.Join(src, strings.TrimPrefix(cfg.Paths.LibDir, "/"), "app", "1.2.0")
	share := filepath.Join(src, strings.TrimPrefix(cfg.Paths.DataDir, "/"), "app", "1.2.0")
	for p, data := range map[string]string{
		filepath.Join(lib, "usr/sbin/app"):   strings.Repeat("1.2.0 binary\n", 1000),
		filepath.Join(share, "VERSION"):      "1.2.0\n",
		filepath.Join(share, "doc/changes"):  "new\n",
		filepath.Join(share, "cutover/x.go"): "package x\n",
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		// Whole seconds, as a tarball made by tar keeps them: staged from the directory or
		// from the .tar.gz below, the trees are the same.
		if err := os.Chtimes(p, time.Unix(1700000000, 0), time.Unix(1700000000, 0)); err != nil {
			t.Fatal(err)
		}
	}
	installed := func() {
		t.Helper()
		for _, pair := range [][2]string{{lib, sc.path("usr/lib/app/1.2.0")}, {share, sc.path("usr/share/app/1.2.0")}} {
			want, err := staging.ReadTree(pair[0])
			if err != nil {
				t.Fatal(err)
			}
			got, err := staging.ReadTree(pair[1])
			if err != nil || !got.Equal(want) {
				t.Fatalf("%s is not the staged tree (err %v):\n got %+v\nwant %+v", pair[1], err, got, want)
			}
		}
	}

	res, err := upgrade.StageVersion(ctx, cfg, upgrade.StagingOptions{Version: "1.2.0", Source: src})
	if err != nil {
		t.Fatal(err)
	}
	installed()
	if res.Sent != res.TreeBytes || res.Run == 0 {
		t.Errorf("first stage: sent %d of %d bytes in run %d; want everything, journaled", res.Sent, res.TreeBytes, res.Run)
	}

	res, err = upgrade.StageVersion(ctx, cfg, upgrade.StagingOptions{Version: "1.2.0", Source: src})
	if err != nil || res.Sent != 0 || len(res.Already) != 1 {
		t.Errorf("restage: sent %d, already on %v, err %v; want nothing sent", res.Sent, res.Already, err)
	}

	// Refusals change nothing.
	if _, err := upgrade.StageVersion(ctx, cfg, upgrade.StagingOptions{Version: "1.0.0", Source: src}); err == nil || !upgrade.IsBadInput(err) {
		t.Errorf("stage of a version the source does not hold: err = %v, want bad input", err)
	}
	changed := sc.path("usr/lib/app/1.2.0/usr/sbin/app")
	if err := os.WriteFile(changed, []byte("tampered"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = upgrade.StageVersion(ctx, cfg, upgrade.StagingOptions{Version: "1.2.0", Source: src})
	if err == nil || upgrade.IsBadInput(err) || !strings.Contains(err.Error(), "usr/sbin/app") || !strings.Contains(err.Error(), "--replace") {
		t.Errorf("stage over a differing copy: err = %v, want a refusal of the check (exit 1) naming the file and --replace", err)
	}
	if data, _ := os.ReadFile(changed); string(data) != "tampered" {
		t.Error("a refused stage changed the installed copy")
	}

	// --replace, from a .tar.gz this time.
	tgz := filepath.Join(t.TempDir(), "app-1.2.0.tar.gz")
	writeTarGz(t, src, tgz)
	if _, err := upgrade.StageVersion(ctx, cfg, upgrade.StagingOptions{Version: "1.2.0", Source: tgz, Replace: true}); err != nil {
		t.Fatal(err)
	}
	// A version the archive does not hold: the refusal names the archive and the entry it
	// lacks, not the private directory the archive was unpacked into.
	_, err = upgrade.StageVersion(ctx, cfg, upgrade.StagingOptions{Version: "1.3.0", Source: tgz})
	if err == nil || !upgrade.IsBadInput(err) || strings.Contains(err.Error(), "stage-source-") ||
		!strings.Contains(err.Error(), tgz+" must hold ") || !strings.Contains(err.Error(), "1.3.0: no such file or directory") {
		t.Errorf("stage of a version the archive lacks: err = %v, want bad input naming %s and the missing tree", err, tgz)
	}
	installed()
	entries, _ := os.ReadDir(sc.path("usr/lib/app"))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") && e.Name() != ".1.2.0.cutover-manifest" {
			t.Errorf("left behind in usr/lib/app: %s", e.Name())
		}
	}

	runs, err := journal.NewStore(upgrade.JournalPath(cfg)).Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var staged int
	for _, r := range runs {
		if r.Kind == "stage" && r.To == "1.2.0" && r.Outcome == journal.Succeeded {
			staged++
		}
	}
	if staged != 3 {
		t.Errorf("the journal has %d successful stage runs of 1.2.0, want 3: %+v", staged, runs)
	}
}

// writeTarGz packs dir into a .tar.gz.
func writeTarGz(t *testing.T, dir, out string) {
	t.Helper()
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h.Name = "./" + filepath.ToSlash(rel)
		// The archive keeps whole seconds, as GNU tar's default format does.
		h.ModTime = info.ModTime().Truncate(time.Second)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			_, err = tw.Write(data)
			return err
		}
		return nil
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = gz.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestPrune installs versions beside the live 1.0.0 and prunes them: the dry run changes
// nothing; the run removes exactly what no run needs — never the journal's previous version,
// never one newer than the live one unless named — and leaves nothing hidden behind.
func TestPrune(t *testing.T) {
	t.Parallel()
	sc := newSSHCluster(t, sshdtest.Start(t, 1), 8)
	cfg, err := upgrade.LoadConfig(sc.cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Cluster.Nodes = cfg.Cluster.Nodes[:1]
	for _, v := range []string{"0.8.0", "0.9.0", "1.2.0"} {
		sc.mkdir(t, "usr/lib/app/"+v+"/usr/sbin")
		sc.mkdir(t, "usr/share/app/"+v)
	}
	// A lib tree without its share tree is not an installed version: prune leaves it.
	sc.mkdir(t, "usr/lib/app/0.5.0")
	// What an interrupted prune left.
	sc.mkdir(t, "usr/share/app/.0.7.0.cutover-prune/doc")
	ctx := context.Background()
	host, _ := os.Hostname()

	// The journal has no switch: the previous version is the newest below the live one
	// (0.9.0), and versions newer than the live one stay unless named.
	res, err := upgrade.Prune(ctx, cfg, upgrade.PruneOptions{Keep: 1, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(res.Remove[host], " "); got != "0.8.0" {
		t.Errorf("dry run would remove %q on %s, want \"0.8.0\"", got, host)
	}
	if _, err := os.Stat(sc.path("usr/lib/app/0.8.0")); err != nil {
		t.Fatalf("the dry run removed 0.8.0: %v", err)
	}
	res, err = upgrade.Prune(ctx, cfg, upgrade.PruneOptions{Keep: 1, DryRun: true, Versions: []string{"1.1.0"}})
	if got := strings.Join(res.Remove[host], " "); err != nil || got != "0.8.0 1.1.0" {
		t.Errorf("dry run naming 1.1.0 would remove %q on %s (%v), want \"0.8.0 1.1.0\"", got, host, err)
	}

	// The journal's last done switch came from 0.8.0: that is the previous version now.
	store := journal.NewStore(upgrade.JournalPath(cfg))
	run, err := store.CreateRun(ctx, journal.Run{Kind: "upgrade", From: "0.8.0", To: "1.0.0", Direction: "upgrade"})
	if err == nil {
		err = store.Finish(ctx, run.ID, journal.Succeeded, time.Now())
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := upgrade.Prune(ctx, cfg, upgrade.PruneOptions{Keep: 1, Versions: []string{"1.1.0"}}); err != nil {
		t.Fatal(err)
	}
	for _, base := range []string{"usr/lib/app", "usr/share/app"} {
		entries, err := os.ReadDir(sc.path(base))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		want := "0.8.0 1.0.0 1.2.0"
		if base == "usr/lib/app" {
			want = "0.5.0 " + want
		}
		if got := strings.Join(names, " "); got != want {
			t.Errorf("%s holds %q after the prune, want %q", base, got, want)
		}
	}
	if _, err := upgrade.Prune(ctx, cfg, upgrade.PruneOptions{Keep: -1}); !upgrade.IsBadInput(err) {
		t.Errorf("prune --keep=-1: err = %v, want bad input", err)
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 bytes", 1: "1 byte", 512: "512 bytes", 4096: "4.1 kB", 99_999: "100.0 kB", 100_000: "0.1 MB", 41_000_000: "41.0 MB"} {
		if got := upgrade.HumanBytes(n); got != want {
			t.Errorf("HumanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
