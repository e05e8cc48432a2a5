package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/test/cluster"
)

const demoapp = "/usr/lib/demoapp/default/usr/sbin/demoapp"

// sh runs script on node and fails the test if docker itself fails.
func sh(t *testing.T, c *cluster.Cluster, node, script string) cluster.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := c.Shell(ctx, node, script)
	if err != nil {
		t.Fatalf("%s: %s: %v", node, script, err)
	}
	return res
}

// must runs script on node and fails the test unless it exits 0; it returns stdout.
func must(t *testing.T, c *cluster.Cluster, node, script string) string {
	t.Helper()
	res := sh(t, c, node, script)
	if res.ExitCode != 0 {
		t.Fatalf("%s: %s: exit %d\n%s%s", node, script, res.ExitCode, res.Stdout, res.Stderr)
	}
	return strings.TrimSpace(res.Stdout)
}

// cutover runs cutover on the master and logs its output.
func cutover(t *testing.T, c *cluster.Cluster, args ...string) cluster.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	res, err := c.Cutover(ctx, args...)
	if err != nil {
		t.Fatalf("cutover %v: %v", args, err)
	}
	t.Logf("cutover %s: exit %d in %s\n%s%s", strings.Join(args, " "), res.ExitCode, time.Since(start).Round(time.Millisecond), res.Stdout, res.Stderr)
	return res
}

// submitJobs queues n jobs of secs seconds on the master and returns their ids.
func submitJobs(t *testing.T, c *cluster.Cluster, n, secs int) []string {
	t.Helper()
	var ids []string
	for range n {
		ids = append(ids, must(t, c, c.Master, fmt.Sprintf("%s job submit --seconds %d", demoapp, secs)))
	}
	return ids
}

// nodeState is what a node looks like from outside: links, config, daemon.
type nodeState struct {
	Lib, Share string
	Config     string
	Daemon     string
}

// stateScript prints what stateOf and checkAt read of a node in one exec (each exec costs the
// machine a tenth of a CPU second, and these checks run thousands of times): the two links,
// the config's checksum, the config itself and the daemon's status, each ended by a NUL. It
// fails if a link, the checksum or the config cannot be read; the status is what it prints.
const stateScript = `l=$(readlink /etc/demoapp/lib) && s=$(readlink /etc/demoapp/share) && ` +
	`h=$(sha256sum /var/lib/demoapp/config.json) && j=$(cat /var/lib/demoapp/config.json) || exit 1
d=$(` + demoapp + ` daemon status)
printf '%s\0' "$l" "$s" "$h" "$j" "$d"`

// probe reads a node's state and its config in one exec.
func probe(t *testing.T, c *cluster.Cluster, node string) (nodeState, string) {
	t.Helper()
	res := sh(t, c, node, stateScript)
	f := strings.Split(res.Stdout, "\x00")
	if res.ExitCode != 0 || len(f) != 6 || f[5] != "" {
		t.Fatalf("%s: reading the links, the config and the daemon: exit %d\n%q%s", node, res.ExitCode, res.Stdout, res.Stderr)
	}
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	return nodeState{Lib: f[0], Share: f[1], Config: f[2], Daemon: f[4]}, f[3]
}

// stateOf reads a node's links, config checksum and daemon status.
func stateOf(t *testing.T, c *cluster.Cluster, node string) nodeState {
	t.Helper()
	st, _ := probe(t, c, node)
	return st
}

// snapshot is everything a refused or rolled-back run must leave as it was: every node's
// state, and the master's queue and reconciler flags.
func snapshot(t *testing.T, c *cluster.Cluster) string {
	t.Helper()
	var b strings.Builder
	for _, n := range c.Nodes {
		fmt.Fprintf(&b, "%s: %+v\n", n.Name, stateOf(t, c, n.Name))
	}
	b.WriteString(sh(t, c, c.Master, demoapp+` queue drained >/dev/null 2>&1; echo "drained: $?"; `+
		demoapp+` watcher paused >/dev/null 2>&1; echo "watcher paused: $?"; `+
		`test -e /var/lib/cutover/intent.json; echo "intent: $?"`).Stdout)
	return b.String()
}

// checkAt asserts that every node of names runs version: links, config version and schema,
// the daemon of that version.
func checkAt(t *testing.T, c *cluster.Cluster, version string, names ...string) {
	t.Helper()
	for _, node := range names {
		st, config := probe(t, c, node)
		if st.Lib != "/usr/lib/demoapp/"+version || st.Share != "/usr/share/demoapp/"+version {
			t.Errorf("%s: links -> %s, %s; want version %s", node, st.Lib, st.Share, version)
		}
		if st.Daemon != "running "+version {
			t.Errorf("%s: daemon %q, want running %s", node, st.Daemon, version)
		}
		var conf struct {
			Version string
			Cluster map[string]any
			Nodes   map[string]map[string]any
			Queue   map[string]any
		}
		if err := json.Unmarshal([]byte(config), &conf); err != nil {
			t.Fatalf("%s: config: %v", node, err)
		}
		if conf.Version != version {
			t.Errorf("%s: config version %s, want %s", node, conf.Version, version)
		}
		// The schema of each minor: 1.1 renamed the addresses, 1.2 added roles.
		_, hasAddress := conf.Cluster["master_address"]
		_, hasRole := conf.Nodes[c.Master]["role"]
		_, hasWorkers := conf.Queue["workers"]
		minor := version[:3]
		if hasAddress != (minor >= "1.1") || hasWorkers != (minor >= "1.1") || hasRole != (minor >= "1.2") {
			t.Errorf("%s: config schema %+v is not the schema of %s", node, conf, minor)
		}
	}
}

func online(c *cluster.Cluster, except ...string) []string {
	var out []string
	for _, n := range c.Nodes {
		if !slices.Contains(except, n.Name) {
			out = append(out, n.Name)
		}
	}
	return out
}

// checkQueue asserts that the queue is open and every job in ids completed.
func checkQueue(t *testing.T, c *cluster.Cluster, ids []string) {
	t.Helper()
	if code := sh(t, c, c.Master, demoapp+" queue drained").ExitCode; code != 1 {
		t.Errorf("queue drained exit %d, want 1 (undrained)", code)
	}
	if code := sh(t, c, c.Master, demoapp+" watcher paused").ExitCode; code != 1 {
		t.Errorf("watcher paused exit %d, want 1 (running)", code)
	}
	deadline := time.Now().Add(60 * time.Second)
	var poll cluster.Poll
	for {
		list := must(t, c, c.Master, demoapp+" job list")
		done := 0
		for _, id := range ids {
			if strings.Contains(list, id+" done") {
				done++
			}
		}
		if done == len(ids) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs %v not all done:\n%s", ids, list)
		}
		poll.Wait()
	}
}

// runs reads the master's journal.
func runs(t *testing.T, c *cluster.Cluster) []journal.Run {
	t.Helper()
	// The copy is taken under a shared lock of the journal file, as cutover's own readers take
	// it: a run may be writing it meanwhile (a watch, a boot resume), and a copy of its bytes
	// in the middle of a transaction is no journal.
	res, err := c.Exec(context.Background(), c.Master, "sh", "-c", `[ -e "$1" ] && exec flock -s "$1" cat -- "$1"`, "read", "/var/lib/cutover/journal.db")
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		t.Fatalf("read journal: %v", err)
	}
	data := []byte(res.Stdout)
	path := filepath.Join(t.TempDir(), "journal.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	rs, err := journal.NewStore(path).Runs(context.Background())
	if err != nil {
		t.Fatalf("journal: %v", err)
	}
	return rs
}

// checkRunComplete asserts that the last run went from -> to, ended done, and that every
// stage is done or skipped.
func checkRunComplete(t *testing.T, c *cluster.Cluster, from, to string) journal.Run {
	t.Helper()
	rs := runs(t, c)
	if len(rs) == 0 {
		t.Fatal("journal has no runs")
	}
	r := rs[len(rs)-1]
	if r.From != from || r.To != to || r.Outcome != journal.Succeeded || r.Ended.IsZero() {
		t.Errorf("last run %d: %s -> %s %s, want %s -> %s done", r.ID, r.From, r.To, r.Outcome, from, to)
	}
	for _, stage := range upgradeStages() {
		st, ok := r.StageState(stage)
		if !ok || st != journal.Done && st != journal.Skipped {
			t.Errorf("run %d: stage %s is %q, want done or skipped", r.ID, stage, st)
		}
	}
	if code := sh(t, c, c.Master, "test -e /var/lib/cutover/intent.json").ExitCode; code == 0 {
		t.Errorf("intent left after a finished run")
	}
	return r
}

// checkBackup asserts that the master holds a root-only backup of the from -> to run.
func checkBackup(t *testing.T, c *cluster.Cluster, from, to string) {
	t.Helper()
	out := must(t, c, c.Master, fmt.Sprintf("stat -c '%%a %%n' /var/lib/cutover/backups/demoapp-%s-to-%s-*.tar.gz", from, to))
	if !strings.HasPrefix(out, "600 ") {
		t.Errorf("backup %q: want mode 600", out)
	}
	if list := must(t, c, c.Master, fmt.Sprintf("tar -tzf /var/lib/cutover/backups/demoapp-%s-to-%s-*.tar.gz", from, to)); !strings.Contains(list, "cutover-manifest.json") || !strings.Contains(list, "var/lib/demoapp/config.json") {
		t.Errorf("backup lacks the manifest or the config:\n%s", list)
	}
}
