package upgrade_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cutover/cutover/nodes/sshdtest"
	"github.com/cutover/cutover/upgrade"

	"github.com/cutover/cutover/upgrade/upgradetest"
)

// hostileTarGz writes a .tar.gz of the headers (each regular file's contents is its
// Linkname, which a regular file does not use otherwise).
func hostileTarGz(t *testing.T, out string, headers []tar.Header) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, h := range headers {
		body := ""
		if h.Typeflag == tar.TypeReg {
			body, h.Linkname = h.Linkname, ""
			h.Size = int64(len(body))
		}
		h.ModTime, h.Format = time.Unix(1700000000, 0), tar.FormatPAX
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestStageHostileSources stages sources crafted by a user who may write what root stages:
// each is refused as bad input, naming the entry, before anything is sent, and nothing
// outside the staging directory changes: not the cluster's trees, not the files the source
// aims at, not the source. An allowed setuid file is staged with its bit.
func TestStageHostileSources(t *testing.T) {
	t.Parallel()
	sc := newSSHCluster(t, sshdtest.Start(t, 1), 8)
	cfg, err := upgrade.LoadConfig(sc.cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Cluster.Nodes = cfg.Cluster.Nodes[:1]
	ctx := context.Background()
	work := t.TempDir()
	outside := filepath.Join(work, "outside")
	if err := os.MkdirAll(filepath.Join(outside, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("root's file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lib := strings.TrimPrefix(cfg.Paths.LibDir, "/") + "/app/1.2.0"
	share := strings.TrimPrefix(cfg.Paths.DataDir, "/") + "/app/1.2.0"

	// writeSource makes a directory source of 1.2.0.
	writeSource := func(t *testing.T) string {
		src := filepath.Join(t.TempDir(), "src")
		for name, data := range map[string]string{lib + "/usr/sbin/app": "binary\n", lib + "/usr/sbin/helper": "helper\n", share + "/VERSION": "1.2.0\n"} {
			p := filepath.Join(src, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(data), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return src
	}
	tarball := func(headers ...tar.Header) func(t *testing.T) string {
		return func(t *testing.T) string {
			out := filepath.Join(t.TempDir(), "app-1.2.0.tar.gz")
			hostileTarGz(t, out, headers)
			return out
		}
	}
	tests := []struct {
		name   string
		source func(t *testing.T) string
		during func(t *testing.T, src string) (stop func()) // runs while the stage runs
		// maxBytes is [stage] max_bytes, when not the default.
		maxBytes int64
		want     []string
	}{
		{name: "link then directory (setuid, world-writable)", source: tarball(
			tar.Header{Name: lib + "/", Typeflag: tar.TypeDir, Mode: 0o755},
			tar.Header{Name: lib + "/x", Typeflag: tar.TypeSymlink, Linkname: victim},
			tar.Header{Name: lib + "/x/", Typeflag: tar.TypeDir, Mode: 0o4777}),
			want: []string{fmt.Sprintf("entry %q", lib+"/x/"), "named twice"}},
		{name: "link then file", source: tarball(
			tar.Header{Name: lib + "/x", Typeflag: tar.TypeSymlink, Linkname: victim},
			tar.Header{Name: lib + "/x", Typeflag: tar.TypeReg, Linkname: "pwned\n"}),
			want: []string{fmt.Sprintf("entry %q", lib+"/x"), "named twice"}},
		{name: "dot dot", source: tarball(
			tar.Header{Name: lib + "/../../../../../../../" + victim, Typeflag: tar.TypeReg, Linkname: "pwned\n"}),
			want: []string{`a name with ".."`}},
		{name: "hard link out", source: tarball(
			tar.Header{Name: lib + "/h", Typeflag: tar.TypeLink, Linkname: victim}),
			want: []string{fmt.Sprintf("entry %q", lib+"/h"), "allow_hardlinks"}},
		{name: "highly compressed member", source: tarball(
			tar.Header{Name: lib + "/big", Typeflag: tar.TypeReg, Linkname: strings.Repeat("\x00", 5<<20)}),
			maxBytes: 1 << 20, want: []string{fmt.Sprintf("entry %q", lib+"/big"), "max_bytes"}},
		{name: "setuid in a directory", source: func(t *testing.T) string {
			src := writeSource(t)
			if err := os.Chmod(filepath.Join(src, lib, "usr/sbin/helper"), 0o755|os.ModeSetuid); err != nil {
				t.Fatal(err)
			}
			return src
		}, want: []string{lib + "/usr/sbin/helper: setuid", "allow_setuid"}},
		{name: "tree is a link", source: func(t *testing.T) string {
			src := writeSource(t)
			os.RemoveAll(filepath.Join(src, lib))
			if err := os.Symlink(filepath.Join(outside, "d"), filepath.Join(src, lib)); err != nil {
				t.Fatal(err)
			}
			return src
		}, want: []string{lib + ": a symbolic link"}},
		{name: "file mutated while read", source: func(t *testing.T) string {
			src := writeSource(t)
			if err := os.WriteFile(filepath.Join(src, lib, "usr/sbin/app"), make([]byte, 96<<20), 0o755); err != nil {
				t.Fatal(err)
			}
			return src
		}, during: func(t *testing.T, src string) func() {
			f, err := os.OpenFile(filepath.Join(src, lib, "usr/sbin/app"), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			done, started := make(chan struct{}), make(chan struct{})
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					if i == 100 {
						close(started)
					}
					select {
					case <-done:
						return
					default:
						f.WriteAt([]byte{byte(i)}, int64(i%4096))
						time.Sleep(100 * time.Microsecond)
					}
				}
			}()
			<-started
			return func() { close(done); wg.Wait(); f.Close() }
		}, want: []string{lib + "/usr/sbin/app: ", "while it was read"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := tt.source(t)
			stop := func() {}
			if tt.during != nil {
				stop = tt.during(t, src)
			}
			before := upgradetest.TreeSum(t, sc.path("state"), sc.root, outside)
			c := *cfg
			if tt.maxBytes > 0 {
				c.Stage.MaxBytes = tt.maxBytes
			}
			_, err := upgrade.StageVersion(ctx, &c, upgrade.StagingOptions{Version: "1.2.0", Source: src})
			stop()
			if err == nil || !upgrade.IsBadInput(err) {
				t.Fatalf("StageVersion() = %v, want bad input", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("StageVersion() = %v, want an error with %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "stage-source-") {
				t.Errorf("the error names the private directory: %v", err)
			}
			if after := upgradetest.TreeSum(t, sc.path("state"), sc.root, outside); after != before {
				t.Error("a refused stage changed something outside its staging directory")
			}
			if left, _ := filepath.Glob(sc.path("state/stage-source-*")); len(left) > 0 {
				t.Errorf("a refused stage left %v", left)
			}
		})
	}

	// Allowed by path, the setuid helper is staged with its bit.
	src := writeSource(t)
	if err := os.Chmod(filepath.Join(src, lib, "usr/sbin/helper"), 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	cfg.Stage.AllowSetuid = []string{"usr/sbin/helper"}
	if _, err := upgrade.StageVersion(ctx, cfg, upgrade.StagingOptions{Version: "1.2.0", Source: src}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(sc.path("usr/lib/app/1.2.0/usr/sbin/helper")); err != nil || fi.Mode() != 0o755|os.ModeSetuid {
		t.Errorf("the staged helper: %v (err %v), want setuid 0755", fi.Mode(), err)
	}
}
