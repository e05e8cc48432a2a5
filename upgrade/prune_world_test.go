package upgrade

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/staging"
	"github.com/cutover/cutover/upgrade/upgradetest"
)

// pruneCommand is the command prune's remove runs on a node of a World for versions.
func pruneCommand(versions ...string) string {
	return nodes.QuoteArgs(append([]string{"sh", "-c", pruneScript, "cutover-prune", "/usr/share/app", "/usr/lib/app"}, versions...))
}

// TestPruneStagesOnAWorld runs the prune's check and remove alone on a fake cluster with
// 1.0.0, 1.1.0 and 1.2.0 installed and 1.2.0 live, 1.1.0 the previous version.
func TestPruneStagesOnAWorld(t *testing.T) {
	three := upgradetest.Options{Versions: []string{"1.0.0", "1.1.0", "1.2.0"}}
	guard := pruneGuard{live: "1.2.0", previous: []string{"1.1.0", "1.2.0"}}
	wantRemove := func(job *pruneJob, want map[string][]string) func(t *testing.T, w *upgradetest.World, r *Run) {
		return func(t *testing.T, w *upgradetest.World, r *Run) {
			if fmt.Sprint(job.remove) != fmt.Sprint(want) {
				t.Errorf("to remove %v, want %v", job.remove, want)
			}
		}
	}
	found := &pruneJob{guard: guard, remove: map[string][]string{}}
	lagging := &pruneJob{guard: guard, remove: map[string][]string{}}
	kept := &pruneJob{keep: 3, guard: guard, remove: map[string][]string{}}
	down := &pruneJob{guard: guard, remove: map[string][]string{}}
	namedPrevious := &pruneJob{guard: pruneGuard{live: "1.2.0", previous: guard.previous, named: map[string]bool{"1.1.0": true, "1.0.0": true}}, remove: map[string][]string{}}
	removing := &pruneJob{guard: guard, remove: map[string][]string{"node2": {"1.0.0"}, "node3": {"1.0.0"}}}
	failing := &pruneJob{guard: guard, remove: map[string][]string{"node2": {"1.0.0"}}}
	runWorldCases(t, []worldCase{
		{name: "check finds on every node the version no run needs",
			opts: three, from: "1.2.0", to: "1.2.0", stage: pruneCheck{found}, state: journal.Done,
			check: wantRemove(found, map[string][]string{"node1": {"1.0.0"}, "node2": {"1.0.0"}, "node3": {"1.0.0"}})},
		{name: "check leaves a lagging node the version it runs",
			opts: three, from: "1.2.0", to: "1.2.0", setup: func(t *testing.T, w *upgradetest.World) { w.Link(t, "node3", "1.0.0") },
			stage: pruneCheck{lagging}, state: journal.Done,
			check: wantRemove(lagging, map[string][]string{"node1": {"1.0.0"}, "node2": {"1.0.0"}})},
		{name: "check keeps the keep newest versions",
			opts: three, from: "1.2.0", to: "1.2.0", stage: pruneCheck{kept}, state: journal.Done,
			check: wantRemove(kept, map[string][]string{})},
		{name: "check says that a version named for removal is kept, and removes the other named one",
			opts: three, from: "1.2.0", to: "1.2.0", stage: pruneCheck{namedPrevious}, state: journal.Done,
			check: func(t *testing.T, w *upgradetest.World, r *Run) {
				wantRemove(namedPrevious, map[string][]string{"node1": {"1.0.0"}, "node2": {"1.0.0"}, "node3": {"1.0.0"}})(t, w, r)
				jr, err := journal.NewStore(JournalPath(r.Config)).Run(context.Background(), r.ID)
				if err != nil {
					t.Fatal(err)
				}
				ev, _ := jr.LastEvent("check")
				if !strings.Contains(ev.Message, "1.1.0 kept: the previous version") || strings.Contains(ev.Message, "1.0.0 kept") {
					t.Errorf("check's note %q, want 1.1.0 (and only it) said kept", ev.Message)
				}
			}},
		{name: "check fails on a node that cannot be reached",
			opts: three, from: "1.2.0", to: "1.2.0", setup: func(t *testing.T, w *upgradetest.World) { w.Down("node2") },
			stage: pruneCheck{down}, state: journal.Failed, err: "node2"},
		{name: "remove runs the prune script with each node's versions, and with none where it only clears leftovers",
			opts: three, from: "1.2.0", to: "1.2.0", stage: pruneRemove{removing}, state: journal.Done,
			calls: []string{"node1: " + pruneCommand(), "node2: " + pruneCommand("1.0.0"), "node3: " + pruneCommand("1.0.0")}},
		{name: "remove fails on a node whose removal fails, naming the versions",
			opts: three, from: "1.2.0", to: "1.2.0", setup: func(t *testing.T, w *upgradetest.World) { w.Fail("node2", pruneCommand("1.0.0")) },
			stage: pruneRemove{failing}, state: journal.Failed, err: "remove [1.0.0]",
			calls: []string{"node1: " + pruneCommand(), "node2: " + pruneCommand("1.0.0"), "node3: " + pruneCommand()}},
	})
}

// TestStagingStagesOnAWorld runs the stage run's check, send and place on a fake cluster: the
// check alone on three nodes, and the three in turn on a Rooted one-node World whose master is
// this host, through the real local transport, so that the trees of 1.2.0 really travel.
func TestStagingStagesOnAWorld(t *testing.T) {
	job := func(version string) *stagingJob {
		v, err := layout.ParseVersion(version)
		if err != nil {
			t.Fatal(err)
		}
		return &stagingJob{version: v, states: map[string][2]treeState{}, already: map[string]bool{}, replacing: map[string]bool{}}
	}
	local := upgradetest.Options{Nodes: []string{"master"}, Rooted: true}
	sending, placing := stagedJob(), stagedJob()
	// The check reads each node in one command, the version's links included: the World's
	// nodes answer it with their links as they are.
	read := nodes.QuoteArgs(staging.ReadFinalsArgv([]string{"", ""}, []string{"/etc/app/lib", "/etc/app/share"}))
	answer := func(t *testing.T, w *upgradetest.World) {
		for _, n := range w.Inventory().Online() {
			var out strings.Builder
			for _, l := range []string{"lib", "share"} {
				target, err := os.Readlink(filepath.Join(w.Dir, n.Name, "etc", w.App, l))
				if err != nil {
					t.Fatal(err)
				}
				out.WriteString("=link\x00" + target + "\x00")
			}
			out.WriteString("absent\x00=nomanifest\x00absent\x00=nomanifest\x00")
			w.Answer(n.Name, read, out.String())
		}
	}
	runWorldCases(t, []worldCase{
		{name: "check refuses the live version on every node, and runs nothing but the one reading of each node",
			from: "1.0.0", to: "1.0.0", setup: answer, stage: stagingCheck{job("1.0.0")}, state: journal.Failed, err: "1.0.0 is the live version",
			calls: []string{"node1: " + read, "node2: " + read, "node3: " + read}},
		{name: "send brings both trees into their temporary directories beside their places, and nothing into place",
			opts: local, from: "1.0.0", to: "1.0.0", prepare: sending.prepare, before: []Stage{stagingCheck{sending.job}},
			stage: stagingSend{sending.job}, state: journal.Done, links: map[string]string{"master": "1.0.0"},
			check: func(t *testing.T, w *upgradetest.World, r *Run) {
				for i, final := range []string{sending.job.libDir, sending.job.shareDir} {
					sending.wantTree(t, i, staging.TempDir(final), false)
					if _, err := os.Lstat(final); !os.IsNotExist(err) {
						t.Errorf("%s is there after the send alone (%v)", final, err)
					}
				}
				if got, want := sending.job.bytes.Load(), sending.job.diskNeeded; got != want {
					t.Errorf("sent %d bytes, want the trees' %d", got, want)
				}
			}},
		{name: "place renames the sent trees into place with their manifests, and leaves the live version live",
			opts: local, from: "1.0.0", to: "1.0.0", prepare: placing.prepare, before: []Stage{stagingCheck{placing.job}, stagingSend{placing.job}},
			stage: stagingPlace{placing.job}, state: journal.Done, links: map[string]string{"master": "1.0.0"},
			check: func(t *testing.T, w *upgradetest.World, r *Run) {
				for i, final := range []string{placing.job.libDir, placing.job.shareDir} {
					placing.wantTree(t, i, final, true)
					if _, err := os.Stat(staging.ManifestPath(final)); err != nil {
						t.Errorf("the manifest of %s: %v", final, err)
					}
					if _, err := os.Lstat(staging.TempDir(final)); !os.IsNotExist(err) {
						t.Errorf("%s is still there after the place (%v)", staging.TempDir(final), err)
					}
				}
			}},
	})
}

// stagedCase is a staging of 1.2.0 from a directory of this host onto a World's master through
// the real local transport: its job, filled by prepare, and the source trees.
type stagedCase struct {
	job   *stagingJob
	trees [2]*staging.Tree
}

func stagedJob() *stagedCase {
	v, err := layout.ParseVersion("1.2.0")
	if err != nil {
		panic(err)
	}
	return &stagedCase{job: &stagingJob{version: v, src: &stagingSource{}, states: map[string][2]treeState{},
		sent: map[string][2]*staging.Sent{}, already: map[string]bool{}, replacing: map[string]bool{}}}
}

// prepare writes the source trees, fills the job for r's layout and dials the master locally.
func (s *stagedCase) prepare(t *testing.T, w *upgradetest.World, r *Run) {
	src := t.TempDir()
	for name, data := range map[string]string{"lib/usr/sbin/app": "1.2.0 binary\n", "share/VERSION": "1.2.0\n", "share/doc/changes": "new\n"} {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, dir := range []string{"lib", "share"} {
		tree, err := staging.ReadTree(filepath.Join(src, dir))
		if err != nil {
			t.Fatal(err)
		}
		s.trees[i] = tree
	}
	lib, share := r.Layout.Trees(s.job.version)
	s.job.lib, s.job.share, s.job.libDir, s.job.shareDir = s.trees[0], s.trees[1], lib, share
	s.job.diskNeeded = s.trees[0].Bytes + s.trees[1].Bytes
	r.dial = localDialer{upgradetest.LocalConn(t)}
}

// wantTree checks that dir holds the i-th source tree (lib, share): its entries, and the mode
// of its root once placed (a temporary directory is private until then).
func (s *stagedCase) wantTree(t *testing.T, i int, dir string, placed bool) {
	t.Helper()
	got, err := staging.ReadTree(dir)
	if err != nil || !slices.Equal(got.Entries, s.trees[i].Entries) || placed && !got.Equal(s.trees[i]) {
		t.Errorf("%s is not the staged tree (err %v):\n got %+v\nwant %+v", dir, err, got, s.trees[i])
	}
}

// localDialer hands the one connection to this host to a run, for every node.
type localDialer struct{ c Conn }

func (d localDialer) Conn(context.Context, string) (Conn, error) { return d.c, nil }
