package upgrade

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/config"
	"github.com/cutover/cutover/upgrade/upgradetest"
)

// renameStep is a config migration of 1.1: /name becomes /title, and back.
const renameStep = `{"from":"1.0","to":"1.1","up":[{"op":"move","from":"/name","path":"/title"}],"down":[{"op":"move","from":"/title","path":"/name"}]}`

// settingStep is a config migration of 1.1 that sets /settings/mode, which needs /settings.
const settingStep = `{"from":"1.0","to":"1.1","up":[{"op":"set","path":"/settings/mode","value":"fast"}],"down":[{"op":"remove","path":"/settings/mode"}]}`

// appConfigAt writes the master's application config at version with a field named field.
func appConfigAt(t *testing.T, w *upgradetest.World, version, field string) {
	t.Helper()
	w.WriteFile(t, w.Master, w.ConfigFile(), `{"`+field+`": "demo", "version": "`+version+`"}`)
}

// appConfig reads the master's application config (or a node's copy of it).
func appConfig(t *testing.T, w *upgradetest.World, node string) map[string]any {
	t.Helper()
	p := w.ConfigFile()
	if node != w.Master {
		p = strings.TrimPrefix(p, filepath.Join(w.Dir, w.Master))
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(w.ReadFile(node, p)), &doc); err != nil {
		t.Fatalf("%s's application config: %v", node, err)
	}
	return doc
}

// wantAppConfig checks the version of node's application config and which of the fields
// /name and /title it has.
func wantAppConfig(t *testing.T, w *upgradetest.World, node, version, field string) {
	t.Helper()
	doc := appConfig(t, w, node)
	other := map[string]string{"name": "title", "title": "name"}[field]
	if doc["version"] != version || doc[field] != "demo" || doc[other] != nil {
		t.Errorf("%s's application config %v, want version %s with /%s alone", node, doc, version, field)
	}
}

// withMigration is a Rooted World's setup: the rename step in 1.1.0's tree and the master's
// config at version, with the field that version has.
func withMigration(version string) func(t *testing.T, w *upgradetest.World) {
	return func(t *testing.T, w *upgradetest.World) {
		w.Migration(t, "1.1.0", "1.0-1.1.json", renameStep)
		field := "name"
		if version == "1.1.0" {
			field = "title"
		}
		appConfigAt(t, w, version, field)
	}
}

// archiveNames lists the entries of a .tar.gz.
func archiveNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}

// wantIntent checks that the run's intent is there (or gone).
func wantIntent(t *testing.T, r *Run, there bool) {
	t.Helper()
	in, err := journal.ReadIntent(IntentPath(r.Config))
	switch {
	case there && (err != nil || in.RunID != r.ID):
		t.Errorf("intent %+v, %v; want the intent of run %d", in, err, r.ID)
	case !there && !journal.NoIntent(err):
		t.Errorf("intent %+v, %v; want none", in, err)
	}
}

var rooted = upgradetest.Options{Rooted: true}

// watched sets redist_conf and a restart_watch; watchCommand is what reads the watched files.
func watched(c *config.Config) {
	c.Commands.RedistConf = "redist"
	c.Commands.RestartWatch = []string{"/state/ssconf_*"}
}

var watchCommand = nodes.QuoteArgs([]string{"sh", "-c", watchScript, "cutover-watch", "/state/ssconf_*"})

// syncCommand and watchedSync sync the file systems redist_conf writes to, without and with
// the restart_watch.
var (
	syncCommand = nodes.QuoteArgs([]string{"sh", "-c", syncFSScript, "cutover-sync", "/var/lib/app", "/etc/app"})
	watchedSync = nodes.QuoteArgs([]string{"sh", "-c", syncFSScript, "cutover-sync", "/var/lib/app", "/etc/app", "/state"})
)

// watchedRedist are the commands of a redist-conf with a restart_watch: the watched files on
// every node, the command on the master, a sync on every node, the watched files again.
var watchedRedist = []string{"node1: " + watchCommand, "node1: redist", "node1: " + watchedSync, "node1: " + watchCommand,
	"node2: " + watchCommand, "node2: " + watchedSync, "node2: " + watchCommand,
	"node3: " + watchCommand, "node3: " + watchedSync, "node3: " + watchCommand}

// syncedRedist are the commands of a redist-conf without one: the command on the master and
// a sync on every node.
var syncedRedist = []string{"node1: redist", "node1: " + syncCommand, "node2: " + syncCommand, "node3: " + syncCommand}

// TestUpgradeStagesOnAWorld runs each stage of Stages that TestStagesOnAWorld leaves out
// alone on a fake cluster, for its success and its refusal or skip.
func TestUpgradeStagesOnAWorld(t *testing.T) {
	runWorldCases(t, []worldCase{
		{name: "preflight passes an allowed path, runs the health gate and reads the clocks",
			opts: rooted, from: "1.0.0", to: "1.1.0", setup: withMigration("1.0.0"), stage: preflight{},
			state: journal.Done, calls: []string{"node1: verify", "node2: date +%s", "node3: date +%s"}},
		{name: "preflight refuses a downgrade the policy forbids, before the health gate",
			opts: rooted, from: "1.1.0", to: "1.0.0", setup: withMigration("1.1.0"),
			config: func(c *config.Config) { c.Policy.Downgrade = "never" }, stage: preflight{},
			state: journal.Failed, err: `downgrade = "never"`},
		{name: "preflight refuses an unhealthy cluster",
			opts: rooted, from: "1.0.0", to: "1.1.0", setup: func(t *testing.T, w *upgradetest.World) {
				withMigration("1.0.0")(t, w)
				w.Fail("node1", "verify")
			}, stage: preflight{},
			state: journal.Failed, err: "health gate", calls: []string{"node1: verify", "node2: date +%s", "node3: date +%s"}},
		{name: "preflight refuses a config its migrations do not apply to",
			opts: rooted, from: "1.0.0", to: "1.1.0", setup: func(t *testing.T, w *upgradetest.World) {
				w.Migration(t, "1.1.0", "1.0-1.1.json", settingStep)
				appConfigAt(t, w, "1.0.0", "label")
			}, stage: preflight{},
			state: journal.Failed, err: "cannot be migrated from 1.0.0 to 1.1.0"},

		{name: "verify-installed passes nodes holding the target's trees at the live version",
			from: "1.0.0", to: "1.1.0", stage: verifyInstalled{}, state: journal.Done},
		{name: "verify-installed refuses a node lacking the target's trees",
			from: "1.0.0", to: "1.1.0", setup: func(t *testing.T, w *upgradetest.World) {
				if err := os.RemoveAll(filepath.Join(w.Dir, "node3/usr/lib/app/1.1.0")); err != nil {
					t.Fatal(err)
				}
			}, stage: verifyInstalled{}, state: journal.Failed, err: "node3"},
		{name: "verify-installed refuses a node on another version than the cluster's",
			opts: upgradetest.Options{Versions: []string{"1.0.0", "1.1.0", "1.2.0"}}, from: "1.0.0", to: "1.1.0",
			setup: func(t *testing.T, w *upgradetest.World) { w.Link(t, "node2", "1.2.0") },
			stage: verifyInstalled{}, state: journal.Failed, err: "run 'cutover sync node2' first",
			links: map[string]string{"node1": "1.0.0", "node2": "1.2.0", "node3": "1.0.0"}},

		{name: "pause-reconciler is skipped without a pause command",
			from: "1.0.0", to: "1.1.0", stage: pauseReconciler{}, state: journal.Skipped},
		{name: "pause-reconciler pauses a running reconciler; its undo continues it",
			from: "1.0.0", to: "1.1.0", config: func(c *config.Config) {
				c.Commands.ReconcilerPause, c.Commands.ReconcilerContinue = "pause", "continue"
			}, stage: pauseReconciler{},
			state: journal.Done, calls: []string{"node1: pause"}, learned: map[string]string{factReconcilerPause: "no"},
			undo: &worldUndo{calls: []string{"node1: pause", "node1: continue"}}},
		{name: "pause-reconciler learns it was paused before, pauses nothing, and its undo leaves it paused",
			from: "1.0.0", to: "1.1.0", config: func(c *config.Config) {
				c.Commands.ReconcilerPause, c.Commands.ReconcilerContinue, c.Commands.ReconcilerPaused = "pause", "continue", "paused"
			}, stage: pauseReconciler{},
			state: journal.Done, calls: []string{"node1: paused"}, learned: map[string]string{factReconcilerPause: "yes"},
			undo: &worldUndo{calls: []string{"node1: paused"}}},
		{name: "pause-reconciler fails when the pause fails, and the runner lets the reconciler continue",
			from: "1.0.0", to: "1.1.0", setup: func(t *testing.T, w *upgradetest.World) { w.Fail("node1", "pause") },
			config: func(c *config.Config) {
				c.Commands.ReconcilerPause, c.Commands.ReconcilerContinue = "pause", "continue"
			}, stage: pauseReconciler{},
			state: journal.Undone, err: "node1", calls: []string{"node1: pause", "node1: continue"},
			learned: map[string]string{factReconcilerPause: "no"}},

		{name: "backup archives the master's state and /etc/app in the backup dir, 0600, and names it in fact backup",
			opts: rooted, from: "1.0.0", to: "1.1.0", setup: func(t *testing.T, w *upgradetest.World) {
				w.WriteFile(t, w.Master, "/var/lib/app/state.db", "state\n")
			}, stage: backup{}, state: journal.Done,
			check: func(t *testing.T, w *upgradetest.World, r *Run) {
				jr, err := journal.NewStore(JournalPath(r.Config)).Run(t.Context(), r.ID)
				if err != nil {
					t.Fatal(err)
				}
				p := jr.Facts["backup"]
				if filepath.Dir(p) != BackupDir(r.Config) || !strings.HasPrefix(filepath.Base(p), "app-1.0.0-to-1.1.0-") || !strings.HasSuffix(p, ".tar.gz") {
					t.Fatalf("fact backup = %q, want app-1.0.0-to-1.1.0-*.tar.gz in %s", p, BackupDir(r.Config))
				}
				info, err := os.Stat(p)
				if err != nil || info.Mode().Perm() != 0o600 {
					t.Fatalf("the archive: %v, %v; want mode 0600", info, err)
				}
				names := strings.Join(archiveNames(t, p), "\n")
				for _, want := range []string{"var/lib/app/state.db", "var/lib/app/config.json", "etc/app/lib"} {
					if !strings.Contains(names, want) {
						t.Errorf("the archive holds\n%s\nnothing of %s", names, want)
					}
				}
			}},
		{name: "backup fails when the state dir cannot hold archives, and archives nothing",
			opts: rooted, from: "1.0.0", to: "1.1.0", setup: func(t *testing.T, w *upgradetest.World) {
				w.WriteFile(t, w.Master, filepath.Join(w.Dir, "state", "backups"), "a file where the backups go\n")
			}, stage: backup{}, state: journal.Failed, err: "backups",
			check: func(t *testing.T, w *upgradetest.World, r *Run) {
				if _, ok := r.Fact("backup"); ok {
					t.Error("fact backup learned for an archive that was not written")
				}
			}},

		{name: "config-upgrade migrates the master's config with the target's migrations and copies it to the nodes",
			opts: rooted, from: "1.0.0", to: "1.1.0", setup: withMigration("1.0.0"), stage: configUpgrade{}, state: journal.Done,
			check: func(t *testing.T, w *upgradetest.World, r *Run) {
				for _, n := range []string{"node1", "node2", "node3"} {
					wantAppConfig(t, w, n, "1.1.0", "title")
				}
			}},
		{name: "config-upgrade leaves the config as it was when a migration does not apply",
			opts: rooted, from: "1.0.0", to: "1.1.0", setup: func(t *testing.T, w *upgradetest.World) {
				w.Migration(t, "1.1.0", "1.0-1.1.json", settingStep)
				appConfigAt(t, w, "1.0.0", "label")
			}, stage: configUpgrade{}, state: journal.Failed, err: "config-upgrade",
			check: func(t *testing.T, w *upgradetest.World, r *Run) {
				if doc := appConfig(t, w, "node1"); doc["version"] != "1.0.0" || doc["label"] != "demo" {
					t.Errorf("the config %v, want it unchanged at 1.0.0", doc)
				}
			}},
		{name: "config-upgrade is skipped by a downgrade",
			opts: rooted, from: "1.1.0", to: "1.0.0", setup: withMigration("1.1.0"), stage: configUpgrade{}, state: journal.Skipped,
			check: func(t *testing.T, w *upgradetest.World, r *Run) { wantAppConfig(t, w, "node1", "1.1.0", "title") }},

		{name: "config-downgrade migrates the config down with the live (newer) version's migrations",
			opts: rooted, from: "1.1.0", to: "1.0.0", setup: withMigration("1.1.0"), stage: configDowngrade{}, state: journal.Done,
			check: func(t *testing.T, w *upgradetest.World, r *Run) {
				for _, n := range []string{"node1", "node2", "node3"} {
					wantAppConfig(t, w, n, "1.0.0", "name")
				}
			}},
		{name: "config-downgrade is skipped by an upgrade",
			opts: rooted, from: "1.0.0", to: "1.1.0", setup: withMigration("1.0.0"), stage: configDowngrade{}, state: journal.Skipped,
			check: func(t *testing.T, w *upgradetest.World, r *Run) { wantAppConfig(t, w, "node1", "1.0.0", "name") }},

		{name: "start starts the daemons on every node",
			from: "1.0.0", to: "1.1.0", stage: start{},
			state: journal.Done, calls: []string{"node1: start", "node2: start", "node3: start"}},
		{name: "start starts every node's daemons before it checks any node's processes",
			from: "1.0.0", to: "1.1.0", config: func(c *config.Config) { c.SSH.Parallel = 1 }, stage: start{},
			state: journal.Done, calls: []string{"node1: start", "node2: start", "node3: start"},
			check: func(t *testing.T, w *upgradetest.World, r *Run) {
				want := []string{"node1: start", "node2: start", "node3: start", "node1: check", "node2: check", "node3: check"}
				if got := w.Sequence(); !slices.Equal(got, want) {
					t.Errorf("one node at a time, the commands ran %q, want %q", got, want)
				}
			}},
		{name: "start checks only the nodes that started",
			from: "1.0.0", to: "1.1.0", setup: func(t *testing.T, w *upgradetest.World) { w.Fail("node2", "start") }, stage: start{},
			state: journal.Failed, err: "node2", calls: []string{"node1: start", "node2: start", "node3: start"},
			check: func(t *testing.T, w *upgradetest.World, r *Run) {
				if got := w.Sequence(); slices.Contains(got, "node2: check") || !slices.Contains(got, "node3: check") {
					t.Errorf("the commands ran %q, want node1 and node3 checked and node2 not", got)
				}
			}},
		{name: "start fails on a node whose start fails, naming it",
			from: "1.0.0", to: "1.1.0", setup: func(t *testing.T, w *upgradetest.World) { w.Fail("node2", "start") }, stage: start{},
			state: journal.Failed, err: "node2", calls: []string{"node1: start", "node2: start", "node3: start"}},
		{name: "start starts no daemon on a node whose config copy failed past the point of no return",
			opts: rooted, from: "1.0.0", to: "1.1.0", setup: func(t *testing.T, w *upgradetest.World) {
				withMigration("1.0.0")(t, w)
				// node3's config is a directory: the copy cannot replace it (a full disk, say).
				if err := os.MkdirAll(filepath.Join(w.Dir, "node3", "var/lib/app/config.json/full"), 0o755); err != nil {
					t.Fatal(err)
				}
			}, before: []Stage{configUpgrade{}}, stage: start{},
			state: journal.Failed, err: "config-upgrade and start failed",
			calls: []string{"node1: start", "node2: start"},
			check: func(t *testing.T, w *upgradetest.World, r *Run) {
				if why := r.perNode.notReadyWhy("node3"); why != "its config copy failed" {
					t.Errorf("node3 is not ready because %q, want its config copy", why)
				}
			}},
		{name: "start starts no daemon on a node whose switch failed past the point of no return",
			opts: rooted, from: "1.1.0", to: "1.0.0", setup: func(t *testing.T, w *upgradetest.World) {
				withMigration("1.1.0")(t, w)
				if err := os.RemoveAll(filepath.Join(w.Dir, "node3/usr/lib/app/1.0.0")); err != nil {
					t.Fatal(err)
				}
			}, before: []Stage{configDowngrade{}, switchLinks{}}, stage: start{},
			state: journal.Failed, err: "switch and start failed",
			calls: []string{"node1: start", "node2: start"},
			check: func(t *testing.T, w *upgradetest.World, r *Run) {
				if why := r.perNode.notReadyWhy("node3"); why != "its switch failed" {
					t.Errorf("node3 is not ready because %q, want its switch", why)
				}
			}},
		{name: "start waits for the master's daemons to answer",
			from: "1.0.0", to: "1.1.0", config: func(c *config.Config) { c.Commands.DaemonsReady = "ready" }, stage: start{},
			state: journal.Done, calls: []string{"node1: start", "node1: ready", "node2: start", "node3: start"}},

		{name: "redist-conf is skipped without the command",
			from: "1.0.0", to: "1.1.0", stage: redistConf{}, state: journal.Skipped},
		{name: "redist-conf runs the command on the master when set, and syncs what it wrote on every node",
			from: "1.0.0", to: "1.1.0", config: func(c *config.Config) { c.Commands.RedistConf = "redist" }, stage: redistConf{},
			state: journal.Done, calls: syncedRedist},
		{name: "redist-conf fails on a node whose storage does not sync",
			from: "1.0.0", to: "1.1.0", setup: func(t *testing.T, w *upgradetest.World) { w.Fail("node2", syncCommand) },
			config: func(c *config.Config) { c.Commands.RedistConf = "redist" }, stage: redistConf{},
			state: journal.Failed, err: "node2: sync what redist-conf wrote", calls: syncedRedist},
		{name: "redist-conf fails when the command fails",
			from: "1.0.0", to: "1.1.0", setup: func(t *testing.T, w *upgradetest.World) { w.Fail("node1", "redist") },
			config: func(c *config.Config) { c.Commands.RedistConf = "redist" }, stage: redistConf{},
			state: journal.Failed, err: "redist", calls: []string{"node1: redist"}},

		{name: "redist-conf with restart_watch learns the nodes where a watched file changed",
			from: "1.0.0", to: "1.1.0", config: watched, setup: func(t *testing.T, w *upgradetest.World) {
				w.AnswerOnce("node2", watchCommand, "aaa  /state/ssconf_x\n")
				w.AnswerOnce("node2", watchCommand, "bbb  /state/ssconf_x\n")
				w.AnswerOnce("node3", watchCommand, "ccc  /state/ssconf_x\n")
				w.AnswerOnce("node3", watchCommand, "ccc  /state/ssconf_x\n")
			},
			stage: redistConf{}, state: journal.Done,
			calls: watchedRedist, learned: map[string]string{factRestartNodes: "node2"}},
		{name: "redist-conf with restart_watch learns none when nothing changed",
			from: "1.0.0", to: "1.1.0", config: watched, stage: redistConf{}, state: journal.Done,
			calls: watchedRedist, learned: map[string]string{factRestartNodes: "none"}},
		{name: "redist-conf resumed compares with the files as they were before the first execution's command",
			from: "1.0.0", to: "1.1.0", config: watched,
			facts: map[string]string{factWatchBefore: `{"node1":"0000000000000000","node2":"e3b0c44298fc1c14","node3":"e3b0c44298fc1c14"}`},
			stage: redistConf{}, state: journal.Done,
			calls: watchedRedist, learned: map[string]string{factRestartNodes: "node1"}},
		{name: "redist-conf resumed after its comparison runs the command alone and keeps what it learned",
			from: "1.0.0", to: "1.1.0", config: watched, facts: map[string]string{factRestartNodes: "node3"},
			stage: redistConf{}, state: journal.Done,
			calls:   []string{"node1: redist", "node1: " + watchedSync, "node2: " + watchedSync, "node3: " + watchedSync},
			learned: map[string]string{factRestartNodes: "node3"}},
		{name: "redist-conf fails on a node whose watched files cannot be read, before the command runs",
			from: "1.0.0", to: "1.1.0", config: watched, setup: func(t *testing.T, w *upgradetest.World) { w.Fail("node3", watchCommand) },
			stage: redistConf{}, state: journal.Failed, err: "node3: read the restart_watch files",
			calls: []string{"node1: " + watchCommand, "node2: " + watchCommand, "node3: " + watchCommand}},
		{name: "restart restarts only the nodes where redist-conf changed a watched file",
			from: "1.0.0", to: "1.1.0", config: watched, facts: map[string]string{factRestartNodes: "node2"}, stage: restart{},
			state: journal.Done, calls: []string{"node2: stop", "node2: start"}},
		{name: "restart restarts nothing when redist-conf changed nothing watched",
			from: "1.0.0", to: "1.1.0", config: watched, facts: map[string]string{factRestartNodes: "none"}, stage: restart{},
			state: journal.Done},
		{name: "restart is skipped without redist_conf (the config came before the start)",
			from: "1.0.0", to: "1.1.0", stage: restart{}, state: journal.Skipped},
		{name: "restart stops and starts the daemons on every node",
			from: "1.0.0", to: "1.1.0", config: func(c *config.Config) { c.Commands.RedistConf = "redist" }, stage: restart{},
			state: journal.Done, calls: []string{"node1: stop", "node1: start", "node2: stop", "node2: start", "node3: stop", "node3: start"}},
		{name: "restart does not start a node whose stop failed, and names it",
			from: "1.0.0", to: "1.1.0", setup: func(t *testing.T, w *upgradetest.World) { w.Fail("node3", "stop") },
			config: func(c *config.Config) { c.Commands.RedistConf = "redist" }, stage: restart{},
			state: journal.Failed, err: "node3", calls: []string{"node1: stop", "node1: start", "node2: stop", "node2: start", "node3: stop"}},

		{name: "intent readies every online node's connection, ahead of the stops, and runs no command",
			from: "1.0.0", to: "1.1.0", stage: intent{}, state: journal.Done,
			check: func(t *testing.T, w *upgradetest.World, r *Run) {
				got := w.Prepared()
				slices.Sort(got)
				if want := []string{"node1", "node2", "node3"}; !slices.Equal(got, want) {
					t.Errorf("prepared %v, want every online node once: %v", got, want)
				}
			}},
		{name: "finish verifies, and the run ends done with its intent removed",
			from: "1.0.0", to: "1.1.0", past: true, before: []Stage{intent{}}, stage: finish{},
			state: journal.Done, calls: []string{"node1: verify"},
			check: func(t *testing.T, w *upgradetest.World, r *Run) { wantIntent(t, r, false) }},
		{name: "finish fails when verify fails, and the run keeps its intent",
			from: "1.0.0", to: "1.1.0", past: true, before: []Stage{intent{}}, setup: func(t *testing.T, w *upgradetest.World) {
				w.Fail("node1", "verify")
			}, stage: finish{},
			state: journal.Failed, err: "--resume", calls: []string{"node1: verify"},
			check: func(t *testing.T, w *upgradetest.World, r *Run) { wantIntent(t, r, true) }},
	})
}
