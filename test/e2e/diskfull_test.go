package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/test/cluster"
)

// TestDiskFull fills a node's disk where a run writes, on one three-node cluster at 1.1.0.
// Before the point of no return, node3's links' directory at an upgrade's switch: the run
// rolls back (exit 1) and the cluster is as before. Past it, the config directory of node3
// when an upgrade copies the migrated config to it, then the links' directory of node2 when a
// downgrade switches it. Each time that node fails, named with its step; its daemons are not
// started (they would run a version on a config it does not have); the run pends (exit 3)
// naming the resume; the other nodes are at the target; and once the disk has room again the
// resume converges.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{Nodes: 3, Live: "1.1.0"})
	ctx := context.Background()

	// The switch of an upgrade, before its point of no return: the run rolls back.
	before := snapshot(t, c)
	h := startHeld(t, c, "switch", "upgrade", "--to=1.2.0", "--yes")
	full, err := c.FillDisk(ctx, "node3", "/etc/demoapp")
	if err != nil {
		h.release(t, c)
		t.Fatal(err)
	}
	res := h.release(t, c)
	if res.ExitCode != 1 || !strings.Contains(res.Stdout+res.Stderr, "node3: switch demoapp to 1.2.0") {
		t.Errorf("/etc/demoapp full at an upgrade's switch: exit %d, want 1 (rolled back) naming node3's switch", res.ExitCode)
	}
	if after := snapshot(t, c); after != before {
		t.Errorf("/etc/demoapp full at an upgrade's switch: the cluster changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	checkRolledBack(t, c, "/etc/demoapp full at an upgrade's switch", "1.1.0", "1.2.0", "switch")
	if err := full.Free(ctx); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, stage, node, dir, step string
		from, to                     string
		// links and config are the versions the full node's links and config name after the
		// failed run: what it had, never the target's daemons on the source's config.
		links, config string
	}{
		{"config copy of an upgrade", "config-upgrade", "node3", "/var/lib/demoapp", "config copy", "1.1.0", "1.2.0", "1.2.0", "1.1.0"},
		{"switch of a downgrade", "switch", "node2", "/etc/demoapp", "switch", "1.2.0", "1.1.0", "1.2.0", "1.1.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startHeld(t, c, tc.stage, "upgrade", "--to="+tc.to, "--yes")
			full, err := c.FillDisk(ctx, tc.node, tc.dir)
			if err != nil {
				h.release(t, c)
				t.Fatal(err)
			}
			res := h.release(t, c)
			out := res.Stdout + res.Stderr
			if res.ExitCode != 3 || !strings.Contains(res.Stderr, "--resume") {
				t.Errorf("%s full at %s: exit %d, want 3 naming --resume", tc.dir, tc.stage, res.ExitCode)
			}
			if want := tc.node + ": its daemons were not started: its " + tc.step + " failed"; !strings.Contains(out, want) {
				t.Errorf("%s full at %s: the output does not say %q", tc.dir, tc.stage, want)
			}
			if want := "the file system of " + tc.dir + " has 0 bytes available and 0 inodes free"; !strings.Contains(out, want) {
				t.Errorf("%s full at %s: the output does not say %q", tc.dir, tc.stage, want)
			}
			st := stateOf(t, c, tc.node)
			if st.Daemon == "running "+tc.to || st.Daemon == "running "+tc.from {
				t.Errorf("%s: daemon %q after its %s failed, want not running", tc.node, st.Daemon, tc.step)
			}
			if st.Lib != "/usr/lib/demoapp/"+tc.links {
				t.Errorf("%s: lib link -> %s, want %s", tc.node, st.Lib, tc.links)
			}
			if v := configVersion(t, c, tc.node); v != tc.config {
				t.Errorf("%s: config version %s, want %s", tc.node, v, tc.config)
			}
			checkAt(t, c, tc.to, online(c, tc.node)...)
			rs := runs(t, c)
			r := rs[len(rs)-1]
			if r.Outcome == journal.Succeeded || !r.PastPONR || r.To != tc.to {
				t.Errorf("run %d: %s -> %s %s (past its point of no return: %v), want pending past it", r.ID, r.From, r.To, r.Outcome, r.PastPONR)
			}
			if start, ok := r.LastEvent("start"); !ok || !failedOn(start, tc.node) {
				t.Errorf("run %d: the start stage does not record %s as failed: %+v", r.ID, tc.node, start)
			}
			if sh(t, c, c.Master, "test -e /var/lib/cutover/intent.json").ExitCode != 0 {
				t.Error("no intent after a failure past the point of no return, want the run pending")
			}

			if err := full.Free(ctx); err != nil {
				t.Fatal(err)
			}
			if res := cutover(t, c, "upgrade", "--resume"); res.ExitCode != 0 {
				t.Fatalf("resume after %s has room again: exit %d", tc.dir, res.ExitCode)
			}
			checkRunComplete(t, c, tc.from, tc.to)
			checkAt(t, c, tc.to, online(c)...)
		})
	}
}

// configVersion reads the version of node's demoapp config.
func configVersion(t *testing.T, c *cluster.Cluster, node string) string {
	t.Helper()
	var conf struct{ Version string }
	if err := json.Unmarshal([]byte(must(t, c, node, "cat /var/lib/demoapp/config.json")), &conf); err != nil {
		t.Fatalf("%s: config: %v", node, err)
	}
	return conf.Version
}

// failedOn reports whether ev records node's part as failed.
func failedOn(ev journal.Event, node string) bool {
	for _, n := range ev.Nodes {
		if n.Node == node {
			return !n.OK
		}
	}
	return false
}
