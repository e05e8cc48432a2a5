package upgrade_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/nodes/sshdtest"
	"github.com/cutover/cutover/upgrade"
	"github.com/cutover/cutover/upgrade/staging"
)

// TestStagedTreeAltered stages a version, then alters a file of it on the node without
// changing its size, modification time or mode: a second stage refuses it, verify-installed
// refuses it before a switch with [policy] verify_checksums, and status no longer counts the
// version as installed, each naming the file.
func TestStagedTreeAltered(t *testing.T) {
	t.Parallel()
	sc := newSSHCluster(t, sshdtest.Start(t, 1), 8)
	cfg, err := upgrade.LoadConfig(sc.cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Cluster.Nodes = cfg.Cluster.Nodes[:1]
	host := cfg.Cluster.Nodes[0].Name
	ctx := context.Background()

	const v = "1.0.5"
	src := t.TempDir()
	lib := filepath.Join(src, strings.TrimPrefix(cfg.Paths.LibDir, "/"), "app", v)
	share := filepath.Join(src, strings.TrimPrefix(cfg.Paths.DataDir, "/"), "app", v)
	for p, data := range map[string]string{
		filepath.Join(lib, "usr/sbin/app"):  strings.Repeat(v+" binary\n", 1000),
		filepath.Join(share, "VERSION"):     v + "\n",
		filepath.Join(share, "doc/changes"): "fixes\n",
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(share, "cutover/migrations"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := upgrade.StageVersion(ctx, cfg, upgrade.StagingOptions{Version: v, Source: src}); err != nil {
		t.Fatal(err)
	}
	// Both trees keep their manifests beside them.
	for _, base := range []string{"usr/lib/app", "usr/share/app"} {
		data, err := os.ReadFile(sc.path(base + "/." + v + ".cutover-manifest"))
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Entries []struct {
				Name, Kind, SHA256 string
			}
		}
		if err := json.Unmarshal(data, &m); err != nil || len(m.Entries) == 0 {
			t.Fatalf("the manifest of %s/%s: %v\n%s", base, v, err, data)
		}
	}
	dryRun := func(verify bool) error {
		c := *cfg
		c.Policy.VerifyChecksums = verify
		_, err := upgrade.Upgrade(ctx, &c, upgrade.Options{To: v, DryRun: true})
		return err
	}
	if err := dryRun(true); err != nil {
		t.Fatalf("dry run to the staged %s with verify_checksums: %v", v, err)
	}
	status := func() upgrade.NodeStatus {
		t.Helper()
		st, err := upgrade.Status(ctx, cfg, upgrade.StatusOptions{NoVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, ns := range st.Nodes {
			if ns.Name == host {
				return ns
			}
		}
		t.Fatalf("status has no node %s", host)
		return upgrade.NodeStatus{}
	}
	if ns := status(); !slices.Contains(ns.Installed, v) || ns.Error != "" {
		t.Fatalf("status of the staged %s: installed %v, error %q", v, ns.Installed, ns.Error)
	}

	// Other bytes behind the same size, time and mode.
	altered := sc.path("usr/lib/app/" + v + "/usr/sbin/app")
	fi, err := os.Stat(altered)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(altered, []byte(strings.Repeat("1.0.5 BINARY\n", 1000)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(altered, time.Time{}, fi.ModTime()); err != nil {
		t.Fatal(err)
	}

	const named = "usr/sbin/app has other contents (checksum)"
	_, err = upgrade.StageVersion(ctx, cfg, upgrade.StagingOptions{Version: v, Source: src})
	if err == nil || upgrade.IsBadInput(err) || !strings.Contains(err.Error(), named) || !strings.Contains(err.Error(), "--replace") {
		t.Errorf("second stage over the altered tree: err = %v, want a refusal naming %q and --replace", err, named)
	}
	if err := dryRun(true); err == nil || !strings.Contains(err.Error(), host) || !strings.Contains(err.Error(), named) ||
		!strings.Contains(err.Error(), "does not match its manifest") {
		t.Errorf("verify-installed with verify_checksums over the altered tree: err = %v, want it to name %s and %q", err, host, named)
	}
	if err := dryRun(false); err != nil {
		t.Errorf("verify-installed without verify_checksums: err = %v, want it to check only that the trees are there", err)
	}
	if ns := status(); slices.Contains(ns.Installed, v) || !strings.Contains(ns.Error, v+" is not counted as installed") || !strings.Contains(ns.Error, named) {
		t.Errorf("status of the altered %s: installed %v, error %q; want it left out, the error naming the file", v, ns.Installed, ns.Error)
	}

	// --replace stages it again; a tree half gone is not installed either.
	if _, err := upgrade.StageVersion(ctx, cfg, upgrade.StagingOptions{Version: v, Source: src, Replace: true}); err != nil {
		t.Fatal(err)
	}
	if ns := status(); !slices.Contains(ns.Installed, v) || ns.Error != "" {
		t.Errorf("status after --replace: installed %v, error %q", ns.Installed, ns.Error)
	}
	if err := os.Remove(sc.path("usr/share/app/" + v + "/doc/changes")); err != nil {
		t.Fatal(err)
	}
	if ns := status(); slices.Contains(ns.Installed, v) || !strings.Contains(ns.Error, "doc/changes is missing") {
		t.Errorf("status of a half-removed %s: installed %v, error %q", v, ns.Installed, ns.Error)
	}
	if _, err := os.Stat(staging.ManifestPath(sc.path("usr/share/app/" + v))); err != nil {
		t.Error(err)
	}
}
