package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/upgrade/upgradetest"
)

// localCluster is a one-node cluster in a temporary directory: the master alone, reached
// locally, with a demo application installed side by side in three versions. It runs the
// whole stage machine without SSH, so the command line can be tested end to end in seconds.
type localCluster struct {
	t    *testing.T
	root string
	cfg  string
}

// newLocalCluster installs versions under a temp root and writes a cutover.toml whose
// commands record what they are asked to do in root/calls.
func newLocalCluster(t *testing.T, live string, versions ...string) *localCluster {
	t.Helper()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	// The cluster is the fake cluster of the stage machine's tests with this host as its one
	// node, rooted: cutover reads the master's own files at the paths its config names.
	w := upgradetest.New(t, upgradetest.Options{App: "app", Nodes: []string{host}, Versions: versions, Live: live, Rooted: true})
	root := filepath.Join(w.Dir, host)
	lc := &localCluster{t: t, root: root, cfg: filepath.Join(root, "cutover.toml")}
	for _, v := range versions {
		lc.mkdir("usr/share/app/" + v + "/cutover/migrations")
		lc.write("usr/share/app/"+v+"/VERSION", v+"\n")
	}
	// 1.1 renames /name to /title; the newer trees ship the step.
	for _, v := range versions {
		if v >= "1.1" {
			w.Migration(t, v, "1.0-1.1.json",
				`{"from":"1.0","to":"1.1","up":[{"op":"move","from":"/name","path":"/title"}],"down":[{"op":"move","from":"/title","path":"/name"}]}`)
		}
	}
	field := "name"
	if live >= "1.1" {
		field = "title"
	}
	_ = os.Remove(lc.path("var/lib/app/config.json")) // the World's own: this one is 0644
	lc.write("var/lib/app/config.json", fmt.Sprintf("{\n  %q: \"demo\",\n  \"version\": %q\n}\n", field, live))
	calls := filepath.Join(root, "calls")
	rec := func(what string) string { return fmt.Sprintf("echo %s >> %s", what, calls) }
	conf := w.TOML()
	conf.Commands = [][2]string{{"daemons_stop", rec("stop")}, {"daemons_start", rec("start")}, {"queue_drain", rec("drain")},
		{"queue_undrain", rec("undrain")}, {"queue_busy", "echo 0"}, {"ensure_dirs", rec("ensure-dirs")},
		{"post_upgrade", rec("post-upgrade {from}")}, {"verify", rec("verify")}}
	lc.writeConfig(conf.Render())
	return lc
}

func (lc *localCluster) path(rel string) string { return filepath.Join(lc.root, rel) }

func (lc *localCluster) mkdir(rel string) {
	lc.t.Helper()
	if err := os.MkdirAll(lc.path(rel), 0o755); err != nil {
		lc.t.Fatal(err)
	}
}

func (lc *localCluster) write(rel, data string) {
	lc.t.Helper()
	if err := os.WriteFile(lc.path(rel), []byte(data), 0o644); err != nil {
		lc.t.Fatal(err)
	}
}

// symlink creates a link whose target is inside the temp root: links are read and written
// root-less by the layout, so the tests point them at the root-prefixed trees.
func (lc *localCluster) symlink(target, rel string) {
	lc.t.Helper()
	if err := os.Symlink(lc.root+target, lc.path(rel)); err != nil {
		lc.t.Fatal(err)
	}
}

func (lc *localCluster) writeConfig(text string) {
	lc.t.Helper()
	if err := os.WriteFile(lc.cfg, []byte(text), 0o600); err != nil {
		lc.t.Fatal(err)
	}
}

// setCommand replaces one [commands] entry of the config.
func (lc *localCluster) setCommand(key, command string) {
	lc.t.Helper()
	var lines []string
	for _, l := range strings.Split(lc.read("cutover.toml"), "\n") {
		if strings.HasPrefix(l, key+" = ") {
			l = fmt.Sprintf("%s = %q", key, command)
		}
		lines = append(lines, l)
	}
	lc.writeConfig(strings.Join(lines, "\n"))
}

func (lc *localCluster) readlink(rel string) string {
	lc.t.Helper()
	target, err := os.Readlink(lc.path(rel))
	if err != nil {
		lc.t.Fatal(err)
	}
	return strings.TrimPrefix(target, lc.root)
}

func (lc *localCluster) read(rel string) string {
	lc.t.Helper()
	data, err := os.ReadFile(lc.path(rel))
	if err != nil && !os.IsNotExist(err) {
		lc.t.Fatal(err)
	}
	return string(data)
}

// cutover runs the command line in-process and returns its exit code and output.
func (lc *localCluster) cutover(args ...string) (int, string, string) {
	lc.t.Helper()
	var stdout, stderr bytes.Buffer
	full := append([]string{"cutover", "--config", lc.cfg}, args...)
	code := run(context.Background(), full, strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// snapshot is everything a refused run must leave unchanged: the links, the config and the
// commands that change something (verify only reads).
func (lc *localCluster) snapshot() string {
	lc.t.Helper()
	var calls []string
	for _, c := range strings.Split(lc.read("calls"), "\n") {
		if c != "verify" {
			calls = append(calls, c)
		}
	}
	return strings.Join([]string{lc.readlink("etc/app/lib"), lc.readlink("etc/app/share"), lc.read("var/lib/app/config.json"), strings.Join(calls, "\n")}, "\n")
}

func TestUpgradeLocal(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	code, out, errOut := lc.cutover("upgrade", "--to=1.1.0", "--yes")
	if code != 0 {
		t.Fatalf("upgrade exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	t.Logf("upgrade output:\n%s", out)
	if got := lc.readlink("etc/app/lib"); got != "/usr/lib/app/1.1.0" {
		t.Errorf("lib link -> %s, want /usr/lib/app/1.1.0", got)
	}
	if got := lc.readlink("etc/app/share"); got != "/usr/share/app/1.1.0" {
		t.Errorf("share link -> %s, want /usr/share/app/1.1.0", got)
	}
	var conf map[string]any
	if err := json.Unmarshal([]byte(lc.read("var/lib/app/config.json")), &conf); err != nil {
		t.Fatal(err)
	}
	if conf["version"] != "1.1.0" || conf["title"] != "demo" || conf["name"] != nil {
		t.Errorf("config after upgrade = %v, want version 1.1.0 with /name moved to /title", conf)
	}
	wantCalls := "verify\ndrain\nstop\nensure-dirs\nstart\nundrain\npost-upgrade 1.0.0\nverify\n"
	if got := lc.read("calls"); got != wantCalls {
		t.Errorf("commands ran in order:\n%s\nwant:\n%s", got, wantCalls)
	}
	if _, err := os.Stat(lc.path("state/intent.json")); !os.IsNotExist(err) {
		t.Errorf("intent after a finished run: %v, want none", err)
	}
	backups, _ := filepath.Glob(lc.path("state/backups/app-1.0.0-to-1.1.0-*.tar.gz"))
	if len(backups) != 1 {
		t.Fatalf("backups = %v, want one", backups)
	}
	if info, _ := os.Stat(backups[0]); info.Mode().Perm() != 0o600 {
		t.Errorf("backup mode = %v, want 0600", info.Mode().Perm())
	}
	if !strings.Contains(out, "done: app 1.1.0 on 1 node") || !strings.Contains(out, "point of no return") {
		t.Errorf("output lacks the done line or the PONR mark:\n%s", out)
	}
	// The whole run's text, as the operator sees it.
	golden(t, "output/upgrade-local-run.text", []byte(normalizeOutput(lc, out)))
	runs, err := journal.NewStore(lc.path("state/journal.db")).Runs(context.Background())
	if err != nil || len(runs) != 1 {
		t.Fatalf("journal runs = %v, %v; want one", runs, err)
	}
	if r := runs[0]; r.Outcome != journal.Succeeded || r.From != "1.0.0" || r.To != "1.1.0" {
		t.Errorf("journal run = %+v", r)
	}
	for _, stage := range []string{"preflight", "intent", "switch", "config-upgrade", "finish"} {
		if st, ok := runs[0].StageState(stage); !ok || st != journal.Done {
			t.Errorf("journal stage %s = %q, want done", stage, st)
		}
	}
	if st, _ := runs[0].StageState("config-downgrade"); st != journal.Skipped {
		t.Errorf("config-downgrade = %q, want skipped in an upgrade", st)
	}

	// And back down to the previous minor: the newer tree's down migration runs first.
	code, out, errOut = lc.cutover("upgrade", "--to=1.0.0", "--yes")
	if code != 0 {
		t.Fatalf("downgrade exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if got := lc.readlink("etc/app/lib"); got != "/usr/lib/app/1.0.0" {
		t.Errorf("lib link after downgrade -> %s", got)
	}
	if got := lc.read("var/lib/app/config.json"); !strings.Contains(got, `"name": "demo"`) || !strings.Contains(got, `"version": "1.0.0"`) {
		t.Errorf("config after downgrade = %s", got)
	}
}

func TestUpgradeRefusals(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(lc *localCluster)
		args     []string
		wantCode int
		wantErr  string
	}{
		{"no --to", nil, []string{"upgrade", "--yes"}, exitUsage, "needs exactly one of --to=VERSION"},
		{"--to with --resume", nil, []string{"upgrade", "--to=1.1.0", "--resume"}, exitUsage, "needs exactly one of"},
		{"malformed version", nil, []string{"upgrade", "--to=1.x", "--yes"}, exitUsage, "--to"},
		{"hostile version", nil, []string{"upgrade", "--to=1.1.0; touch /tmp/pwned", "--yes"}, exitUsage, "--to"},
		{"path in version", nil, []string{"upgrade", "--to=../../1.1.0", "--yes"}, exitUsage, "--to"},
		{"huge version number", nil, []string{"upgrade", "--to=99999999999999999999.1.0", "--yes"}, exitUsage, "at most 9 digits"},
		{"a minor where full versions are named", nil, []string{"upgrade", "--to=1.1", "--yes"}, exitUsage, "such as 1.1.0"},
		{"unknown force", nil, []string{"upgrade", "--to=1.1.0", "--yes", "--force=everything"}, exitUsage, "not a check that can be forced"},
		{"no terminal, no --yes", nil, []string{"upgrade", "--to=1.1.0"}, exitUsage, "--yes"},
		{"unknown config key", func(lc *localCluster) {
			lc.writeConfig(strings.Replace(lc.read("cutover.toml"), "[commands]", "[commands]\nfrobnicate = \"x\"", 1))
		}, []string{"upgrade", "--to=1.1.0", "--yes"}, exitUsage, `unknown key "commands.frobnicate"`},
		{"missing config", func(lc *localCluster) { os.Remove(lc.cfg) }, []string{"upgrade", "--to=1.1.0", "--yes"}, exitUsage, "read config"},
		{"not the master", func(lc *localCluster) {
			text := lc.read("cutover.toml")
			host, _ := os.Hostname()
			lc.writeConfig(strings.ReplaceAll(text, fmt.Sprintf("%q", host), `"elsewhere"`))
		}, []string{"upgrade", "--to=1.1.0", "--yes"}, exitNotMaster, "not the cluster's master"},
		{"target not installed", nil, []string{"upgrade", "--to=1.2.0", "--yes"}, exitFailed, "1.2.0"},
		{"corrupt application config", func(lc *localCluster) { lc.write("var/lib/app/config.json", "{not json") }, []string{"upgrade", "--to=1.1.0", "--yes"}, exitFailed, "config"},
		{"config at an unknown version", func(lc *localCluster) {
			lc.write("var/lib/app/config.json", `{"name": "demo", "version": "0.9.0"}`)
		}, []string{"upgrade", "--to=1.1.0", "--yes"}, exitFailed, "0.9.0"},
		{"unknown command", nil, []string{"frobnicate"}, exitUsage, "unknown command"},
		{"unknown flag", nil, []string{"upgrade", "--to=1.1.0", "--yes", "--bogus"}, exitUsage, "bogus"},
		{"unknown global flag", nil, []string{"--bogus", "upgrade"}, exitUsage, "bogus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
			if tt.setup != nil {
				tt.setup(lc)
			}
			before := lc.snapshot()
			code, out, errOut := lc.cutover(tt.args...)
			if code != tt.wantCode || !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q\nstdout:\n%s", code, errOut, tt.wantCode, tt.wantErr, out)
			}
			if !strings.HasPrefix(errOut, "cutover: ") || strings.Count(strings.TrimSpace(errOut), "\n") > 0 && !strings.Contains(errOut, "\n") {
				t.Errorf("stderr %q is not one cutover: line", errOut)
			}
			if strings.Contains(errOut, "goroutine ") || strings.Contains(errOut, "panic") {
				t.Errorf("stderr has a stack trace: %s", errOut)
			}
			if after := lc.snapshot(); after != before {
				t.Errorf("a refused run changed the cluster:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if _, err := os.Stat(lc.path("state/intent.json")); !os.IsNotExist(err) {
				t.Errorf("a refused run left an intent: %v", err)
			}
		})
	}
}

func TestUpgradeLocked(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	if err := os.MkdirAll(lc.path("state"), 0o700); err != nil {
		t.Fatal(err)
	}
	lock, err := journal.AcquireLock(lc.path("state/lock"), journal.Holder{Host: "node9", PID: 4242})
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	code, _, errOut := lc.cutover("upgrade", "--to=1.1.0", "--yes")
	if code != exitLocked || !strings.Contains(errOut, "4242") || !strings.Contains(errOut, "node9") {
		t.Errorf("exit %d, stderr %q; want %d naming pid 4242 on node9", code, errOut, exitLocked)
	}
}

func TestUpgradeFailureRollsBack(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	// The daemons refuse to stop: everything done so far is undone and the exit code is 1.
	lc.setCommand("daemons_stop", "echo cannot stop >&2; exit 7")
	before := lc.snapshot()
	code, out, errOut := lc.cutover("upgrade", "--to=1.1.0", "--yes")
	if code != exitFailed {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitFailed, out, errOut)
	}
	if !strings.Contains(out, "cannot stop") {
		t.Errorf("output does not show the node's stderr:\n%s", out)
	}
	// The drain was undone (undrain ran), the master was started again; links and config as before.
	after := lc.snapshot()
	if want := before + "drain\nstart\nundrain\n"; after != want {
		t.Errorf("after a rolled-back run:\n%s\nwant:\n%s", after, want)
	}
}

func TestUpgradeJSONEvents(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	code, out, errOut := lc.cutover("--output", "json", "upgrade", "--to=1.1.0", "--yes")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var sawPONR, sawNode bool
	for i, line := range lines {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("line %d is not JSON: %q", i+1, line)
		}
		if e["ponr"] == true && e["stage"] == "config-upgrade" {
			sawPONR = true
		}
		if nodes, ok := e["nodes"].([]any); ok && len(nodes) > 0 {
			n := nodes[0].(map[string]any)
			if _, ok := n["node"]; !ok {
				t.Errorf("node result without a \"node\" field: %v", n)
			}
			if _, ok := n["exit_code"]; ok {
				sawNode = true
			}
		}
	}
	last := map[string]any{}
	_ = json.Unmarshal([]byte(lines[len(lines)-1]), &last)
	if last["type"] != "done" || last["exit"] != float64(0) || last["to"] != "1.1.0" {
		t.Errorf("last event = %v, want done with exit 0", last)
	}
	if d, _ := last["downtime_ns"].(float64); d <= 0 {
		t.Errorf("done event downtime_ns = %v, want the daemons' downtime window", last["downtime_ns"])
	}
	if last["outage_ns"] != last["downtime_ns"] || last["direction"] != "upgrade" || last["rolling"] != nil {
		t.Errorf("done event outage_ns %v, direction %v, rolling %v; want an all-at-once upgrade's outage, its downtime", last["outage_ns"], last["direction"], last["rolling"])
	}
	if !sawPONR || !sawNode {
		t.Errorf("events lack the PONR mark (%v) or node results (%v)", sawPONR, sawNode)
	}
}

func TestVersion(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"cutover", "version"}, "cutover " + version + "\n"},
		{[]string{"cutover", "--output", "json", "version"}, "{\n  \"apiVersion\": \"cutover/v1\",\n  \"kind\": \"Version\",\n  \"version\": \"" + version + "\"\n}\n"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), tt.args, strings.NewReader(""), &stdout, &stderr); code != 0 || stdout.String() != tt.want {
			t.Errorf("%v: exit %d, %q %q; want %q", tt.args, code, stdout.String(), stderr.String(), tt.want)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"cutover", "version", "extra"}, strings.NewReader(""), &stdout, &stderr); code != exitUsage {
		t.Errorf("version extra: exit %d, want %d", code, exitUsage)
	}
}
