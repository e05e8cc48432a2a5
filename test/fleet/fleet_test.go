package fleet

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/cutover/cutover/test/cluster"
	"github.com/cutover/cutover/test/demoapp"
)

// fleet is the three clusters of the tests and what Ansible needs to reach them.
type fleet struct {
	clusters map[string]*cluster.Cluster // inventory host -> cluster
	order    []string                    // c1 (the canary), c2, c3
	dir      string                      // inventory, operator key, known_hosts, summaries
	ansible  string                      // the repository's ansible/ directory
}

// summary is what the callback cutover.fleet.fleet_summary writes.
type summary struct {
	CheckMode bool           `json:"check_mode"`
	Counts    map[string]int `json:"counts"`
	Clusters  []struct {
		Cluster  string  `json:"cluster"`
		State    string  `json:"state"`
		From     string  `json:"from"`
		To       string  `json:"to"`
		RC       *int    `json:"rc"`
		Run      int     `json:"run"`
		Downtime float64 `json:"downtime"`
		Outage   float64 `json:"outage"`
		Rolling  bool    `json:"rolling"`
		Message  string  `json:"message"`
		Task     string  `json:"task"`
	} `json:"clusters"`
}

// states returns each cluster's state.
func (s summary) states() map[string]string {
	m := map[string]string{}
	for _, c := range s.Clusters {
		m[c.Cluster] = c.State
	}
	return m
}

// playbookRun is one ansible-playbook run's outcome.
type playbookRun struct {
	exit    int
	output  string
	summary summary
	recap   map[string]map[string]int // host -> ok, changed, unreachable, failed, ...
}

// require skips the test, or fails it under CI=true, when what is missing is needed.
func require(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	if ok {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (run test/setup.sh)", msg)
	}
	t.Skipf("%s (run test/setup.sh; with CI=true this is a failure)", msg)
}

func ansibleDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../ansible")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func collectionFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(ansibleDir(t), "ansible_collections/cutover/fleet/plugins/*/*.py"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the collection's Python files: %v (found %d)", err, len(files))
	}
	return files
}

// TestPythonCompiles compiles every Python file of the collection with each python3 of this
// machine (ansible-core 2.14 runs on 3.9 to 3.11, its modules on the managed host's python3).
func TestPythonCompiles(t *testing.T) {
	pythons := map[string]string{}
	for _, name := range []string{"python3", "/usr/bin/python3", "python3.9", "python3.10", "python3.11", "python3.12", "python3.13"} {
		path, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		out, err := exec.Command(path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])").Output()
		if err == nil {
			pythons[strings.TrimSpace(string(out))] = path
		}
	}
	require(t, len(pythons) > 0, "no python3 on this machine")
	cache := t.TempDir()
	for version, python := range pythons {
		args := append([]string{"-m", "py_compile"}, collectionFiles(t)...)
		cmd := exec.Command(python, args...)
		cmd.Env = append(os.Environ(), "PYTHONPYCACHEPREFIX="+cache)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("python %s (%s) -m py_compile: %v\n%s", version, python, err, out)
		}
	}
	t.Logf("compiled with python %v", keys(pythons))
}

// TestAnsibleDoc renders every module and the callback with ansible-doc.
func TestAnsibleDoc(t *testing.T) {
	_, err := exec.LookPath("ansible-doc")
	require(t, err == nil, "ansible-doc is not installed (Debian's ansible-core)")
	plugins := map[string]string{}
	for _, f := range collectionFiles(t) {
		kind := filepath.Base(filepath.Dir(f))
		if kind == "module_utils" {
			continue
		}
		plugins["cutover.fleet."+strings.TrimSuffix(filepath.Base(f), ".py")] = strings.TrimSuffix(kind, "s")
	}
	for name, kind := range plugins {
		cmd := exec.Command("ansible-doc", "-t", kind, name)
		cmd.Dir = ansibleDir(t)
		cmd.Env = append(os.Environ(), "ANSIBLE_CONFIG="+filepath.Join(ansibleDir(t), "ansible.cfg"))
		out, err := cmd.CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte(strings.ToUpper(name))) || bytes.Contains(out, []byte("WARNING")) {
			t.Errorf("ansible-doc -t %s %s: %v\n%s", kind, name, err, out)
			continue
		}
		for _, want := range []string{"OPTIONS", "EXAMPLES", "RETURN VALUES"} {
			if kind == "module" && !bytes.Contains(out, []byte(want)) {
				t.Errorf("ansible-doc %s renders no %s", name, want)
			}
		}
	}
}

// TestFleet runs the fleet playbook against three clusters, c1 the canary, through scenarios in
// sequence, each starting where the last one left the fleet.
func TestFleet(t *testing.T) {
	f := newFleet(t)
	ctx := context.Background()

	t.Run("check mode changes nothing", func(t *testing.T) {
		r := f.playbook(t, "--check", "-e", "cutover_version=1.1.0")
		if r.exit != 0 {
			t.Fatalf("ansible-playbook --check exited %d\n%s", r.exit, r.output)
		}
		if got := r.summary.states(); got["c1"] != "would-upgrade" || got["c2"] != "would-upgrade" || got["c3"] != "would-upgrade" {
			t.Errorf("check mode summary = %v, want every cluster would-upgrade", got)
		}
		f.wantVersions(t, ctx, "1.0.0", "1.0.0", "1.0.0")
	})

	t.Run("upgrade", func(t *testing.T) {
		r := f.playbook(t, "-e", "cutover_version=1.1.0")
		if r.exit != 0 {
			t.Fatalf("ansible-playbook exited %d\n%s", r.exit, r.output)
		}
		f.wantVersions(t, ctx, "1.1.0", "1.1.0", "1.1.0")
		for _, c := range r.summary.Clusters {
			if c.State != "upgraded" || c.From != "1.0.0" || c.To != "1.1.0" || c.Downtime <= 0 || c.Outage != c.Downtime || c.Rolling || c.Run == 0 {
				t.Errorf("summary of %s = %+v, want upgraded 1.0.0 -> 1.1.0 with its downtime and run", c.Cluster, c)
			}
		}
		t.Logf("summary:\n%s", summaryText(r.output))
	})

	t.Run("a second run changes nothing", func(t *testing.T) {
		r := f.playbook(t, "-e", "cutover_version=1.1.0")
		if r.exit != 0 {
			t.Fatalf("ansible-playbook exited %d\n%s", r.exit, r.output)
		}
		for _, host := range f.order {
			if r.recap[host]["changed"] != 0 || r.recap[host]["failed"] != 0 {
				t.Errorf("recap of %s = %v, want changed=0 failed=0", host, r.recap[host])
			}
		}
		if got := r.summary.Counts["at-target"]; got != 3 {
			t.Errorf("summary counts = %v, want 3 at-target", r.summary.Counts)
		}
	})

	t.Run("downgrade", func(t *testing.T) {
		r := f.playbook(t, "-e", "cutover_version=1.0.0")
		if r.exit != 0 {
			t.Fatalf("ansible-playbook exited %d\n%s", r.exit, r.output)
		}
		f.wantVersions(t, ctx, "1.0.0", "1.0.0", "1.0.0")
		// A downgrade is called one: the summary's state and line, the module's message.
		if got := r.summary.Counts["downgraded"]; got != 3 {
			t.Errorf("summary counts = %v, want 3 downgraded", r.summary.Counts)
		}
		if text := summaryText(r.output); !strings.Contains(text, "downgraded") || strings.Contains(text, "upgraded") {
			t.Errorf("summary of a downgrade:\n%s\nwant every cluster downgraded, none upgraded", text)
		}
		for _, c := range r.summary.Clusters {
			if c.State != "downgraded" || !strings.Contains(c.Message, "downgraded 1.1.0 -> 1.0.0 in run") {
				t.Errorf("summary of %s = %+v, want downgraded, and the module's message saying so", c.Cluster, c)
			}
		}
	})

	t.Run("a failed canary stops the fleet", func(t *testing.T) {
		// The canary's node2 daemon stops: cutover's health gate refuses the run (exit 1).
		c1 := f.clusters["c1"]
		mustShell(t, ctx, c1, "node2", "/usr/lib/demoapp/default/usr/sbin/demoapp daemon stop")
		defer mustShell(t, ctx, c1, "node2", "/usr/lib/demoapp/default/usr/sbin/demoapp daemon start")
		r := f.playbook(t, "-e", "cutover_version=1.1.0")
		if r.exit == 0 {
			t.Fatalf("ansible-playbook exited 0 with an unhealthy canary\n%s", r.output)
		}
		got := r.summary.states()
		if got["c1"] != "failed" || got["c2"] != "untouched" || got["c3"] != "untouched" {
			t.Errorf("summary = %v, want c1 failed, c2 and c3 untouched\n%s", got, r.output)
		}
		for _, c := range r.summary.Clusters {
			if c.Cluster == "c1" && (c.RC == nil || *c.RC != 1) {
				t.Errorf("c1's summary = %+v, want cutover's exit code 1 (rolled back)", c)
			}
		}
		// The failed task's output is a few lines: cutover's message and bounded fields,
		// neither the plan nor the run's events.
		for _, line := range strings.Split(r.output, "\n") {
			if !strings.Contains(line, "fatal: [c1]") {
				continue
			}
			if len(line) > 6000 || strings.Contains(line, `"checks"`) || strings.Contains(line, `"stages"`) {
				t.Errorf("the failed task's output is %d bytes (plan or events in it: %v), want a short one:\n%.2000s",
					len(line), strings.Contains(line, `"checks"`), line)
			}
		}
		f.wantVersions(t, ctx, "1.0.0", "1.0.0", "1.0.0")
	})

	t.Run("an unreachable cluster counts against max_fail_percentage", func(t *testing.T) {
		// No canary this time: c1 and c2 form the first wave, c3 the second. c2 cannot be
		// reached: one failure of two is over 40%, so the second wave never starts.
		c2 := f.clusters["c2"]
		if err := c2.Cut(ctx, c2.Master); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := c2.Heal(ctx, c2.Master); err != nil {
				t.Fatal(err)
			}
		}()
		r := f.playbook(t, "-e", "cutover_version=1.1.0",
			"-e", `{"cutover_canary_group": "no_canary", "cutover_serial": [2, 1], "cutover_max_fail_percentage": 40}`)
		if r.exit == 0 {
			t.Fatalf("ansible-playbook exited 0 with a wave over max_fail_percentage\n%s", r.output)
		}
		if got := r.summary.states(); got["c1"] != "upgraded" || got["c2"] != "failed" || got["c3"] != "untouched" {
			t.Errorf("summary = %v, want c1 upgraded, c2 failed (unreachable), c3 untouched\n%s", got, r.output)
		}
		f.wantVersions(t, ctx, "1.1.0", "1.0.0", "1.0.0")
	})

	t.Run("a pending run is resumed", func(t *testing.T) {
		// c3's master reboots in the middle of a run, without its @reboot resume: the run is
		// left pending until the next playbook run, which also upgrades c2. The run's drain
		// waits for a job of 15 s, long enough for a loaded machine to see the run pending and
		// reboot the master before the run ends (a job of 3 s was not); the job is run again
		// after the boot, and the resumed drain waits for it once more.
		c3 := f.clusters["c3"]
		mustShell(t, ctx, c3, "node1", "rm -f /etc/cron.d/cutover && /usr/lib/demoapp/default/usr/sbin/demoapp job submit --seconds 15 >/dev/null")
		upgrade := exec.Command("docker", "exec", c3.Nodes[0].Container, "/usr/sbin/cutover", "upgrade", "--to=1.1.0", "--yes")
		if err := upgrade.Start(); err != nil {
			t.Fatal(err)
		}
		defer upgrade.Wait()
		pending := f.waitPending(t, ctx, c3)
		if err := c3.Reboot(ctx, c3.Master); err != nil {
			t.Fatal(err)
		}
		if st := f.status(t, ctx, c3); st.Pending == nil {
			t.Fatalf("after the reboot c3 has no pending run (status %+v)", st)
		}
		r := f.playbook(t, "-e", "cutover_version=1.1.0")
		if r.exit != 0 {
			t.Fatalf("ansible-playbook exited %d\n%s", r.exit, r.output)
		}
		f.wantVersions(t, ctx, "1.1.0", "1.1.0", "1.1.0")
		for _, c := range r.summary.Clusters {
			if c.Cluster == "c3" && (c.State != "upgraded" || c.Run != pending) {
				t.Errorf("c3's summary = %+v, want run %d resumed to 1.1.0", c, pending)
			}
		}
		if st := f.status(t, ctx, c3); st.Pending != nil {
			t.Errorf("c3 still has a pending run: %+v", st.Pending)
		}
	})

	t.Run("pre-cache refuses another build of an installed version", func(t *testing.T) {
		// Every node of every cluster lists 1.2.0 as installed (the image's copy, never staged
		// by cutover). The pre-cache play stages the release all the same: cutover stage
		// compares each node's copy with it, refuses another build of 1.2.0 (exit 1) and
		// leaves the same build alone.
		release, other := f.releases(t, ctx, "1.2.0")
		const stageTask = "Stage the version on every node"
		r := f.playbook(t, "--tags", "precache", "-e", "cutover_version=1.2.0", "-e", "cutover_release="+other)
		if r.exit == 0 {
			t.Fatalf("ansible-playbook exited 0 pre-caching another build of 1.2.0 than the nodes hold\n%s", r.output)
		}
		for _, c := range r.summary.Clusters {
			if c.State != "failed" || c.Task != stageTask || c.RC == nil || *c.RC != 1 || !strings.Contains(c.Message, "differs from what is to be staged") {
				t.Errorf("summary of %s = %+v, want failed at %q with cutover's refusal (exit 1)", c.Cluster, c, stageTask)
			}
		}
		for _, host := range f.order {
			c := f.clusters[host]
			for _, n := range c.Nodes {
				if data, err := c.ReadFile(ctx, n.Name, "/usr/share/demoapp/1.2.0/VERSION"); err != nil || string(data) != "1.2.0\n" {
					t.Errorf("%s %s: 1.2.0's VERSION is %q (%v), want the installed build's", host, n.Name, data, err)
				}
			}
		}

		// The same build: the tarball is copied (changed), the stage finds it on every node.
		r = f.playbook(t, "--tags", "precache", "-e", "cutover_version=1.2.0", "-e", "cutover_release="+release)
		if r.exit != 0 {
			t.Fatalf("ansible-playbook exited %d pre-caching the build the nodes hold\n%s", r.exit, r.output)
		}
		for _, host := range f.order {
			if r.recap[host]["changed"] != 1 || r.recap[host]["failed"] != 0 {
				t.Errorf("recap of %s = %v, want changed=1 (the tarball's copy; the stage unchanged) failed=0", host, r.recap[host])
			}
		}
		r = f.playbook(t, "--tags", "precache", "-e", "cutover_version=1.2.0", "-e", "cutover_release="+release)
		if r.exit != 0 {
			t.Fatalf("ansible-playbook exited %d pre-caching the build the nodes hold again\n%s", r.exit, r.output)
		}
		for _, host := range f.order {
			if r.recap[host]["changed"] != 0 || r.recap[host]["failed"] != 0 {
				t.Errorf("recap of %s = %v, want changed=0 failed=0", host, r.recap[host])
			}
		}
		f.wantVersions(t, ctx, "1.1.0", "1.1.0", "1.1.0")
	})

	t.Run("check mode counts on the pre-cache, which then stages", func(t *testing.T) {
		// c1's nodes lack 1.2.0. Check mode stages nothing, but the pre-cache would stage
		// 1.2.0 before the canary's upgrade: the canary is no refusal, and every cluster's
		// check is shown.
		release, _ := f.releases(t, ctx, "1.2.0")
		c1 := f.clusters["c1"]
		for _, n := range c1.Nodes {
			mustShell(t, ctx, c1, n.Name, "rm -rf /usr/lib/demoapp/1.2.0 /usr/share/demoapp/1.2.0 /var/cache/cutover")
		}
		r := f.playbook(t, "--check", "-e", "cutover_version=1.2.0", "-e", "cutover_release="+release)
		if r.exit != 0 {
			t.Fatalf("ansible-playbook --check exited %d with a canary the pre-cache would stage on\n%s", r.exit, r.output)
		}
		if got := r.summary.states(); got["c1"] != "would-upgrade" || got["c2"] != "would-upgrade" || got["c3"] != "would-upgrade" {
			t.Errorf("check mode summary = %v, want every cluster would-upgrade\n%s", got, r.output)
		}
		for _, n := range c1.Nodes {
			if _, err := c1.ReadFile(ctx, n.Name, "/usr/share/demoapp/1.2.0/VERSION"); err == nil {
				t.Errorf("c1 %s holds 1.2.0 after a check run", n.Name)
			}
		}

		// The pre-cache alone: c1 has 1.2.0 staged, c2 and c3 hold it already; none is
		// untouched.
		r = f.playbook(t, "--tags", "precache", "-e", "cutover_version=1.2.0", "-e", "cutover_release="+release)
		if r.exit != 0 {
			t.Fatalf("ansible-playbook --tags precache exited %d\n%s", r.exit, r.output)
		}
		if got := r.summary.states(); got["c1"] != "staged" || got["c2"] != "staged" || got["c3"] != "staged" {
			t.Errorf("pre-cache summary = %v, want every cluster staged\n%s", got, r.output)
		}
		for _, n := range c1.Nodes {
			if data, err := c1.ReadFile(ctx, n.Name, "/usr/share/demoapp/1.2.0/VERSION"); err != nil || string(data) != "1.2.0\n" {
				t.Errorf("c1 %s: 1.2.0's VERSION is %q (%v) after the pre-cache", n.Name, data, err)
			}
		}
		f.wantVersions(t, ctx, "1.1.0", "1.1.0", "1.1.0")
	})

	t.Run("the canary's watch comes before the waves", func(t *testing.T) {
		// c1, the canary, watches for 12 s after its finish ([policy] watch): its task returns
		// only once the watch passed, and no wave's cluster starts its run before that.
		const toml = "/etc/cutover/cutover.toml"
		c1 := f.clusters["c1"]
		mustShell(t, ctx, c1, "node1", `cp `+toml+` /root/cutover.toml.saved && sed -i 's/^\[policy\]$/[policy]\nwatch = "12s"\nwatch_interval = "3s"/' `+toml+` && grep -q '^watch = "12s"$' `+toml)
		defer mustShell(t, ctx, c1, "node1", "cp /root/cutover.toml.saved "+toml)
		r := f.playbook(t, "-e", "cutover_version=1.2.0")
		if r.exit != 0 {
			t.Fatalf("ansible-playbook exited %d\n%s", r.exit, r.output)
		}
		f.wantVersions(t, ctx, "1.2.0", "1.2.0", "1.2.0")
		canary := f.lastRun(t, ctx, f.clusters["c1"])
		if canary.Watch == nil || canary.Watch.State != "passed" || canary.Ended.Sub(canary.Watch.Started) < 12*time.Second {
			t.Fatalf("c1's run %d: %+v, want it ended after a watch of 12 s that passed", canary.ID, canary)
		}
		for _, host := range []string{"c2", "c3"} {
			run := f.lastRun(t, ctx, f.clusters[host])
			if !run.Started.After(canary.Ended) {
				t.Errorf("%s's run %d started at %s, before the canary's run ended with its watch at %s", host, run.ID, run.Started, canary.Ended)
			}
			if run.Watch != nil {
				t.Errorf("%s's run %d watched (%+v), want no watch: its config has none", host, run.ID, run.Watch)
			}
		}
	})
}

// journalRun is a run as `cutover --output json journal` lists it.
type journalRun struct {
	ID      int       `json:"id"`
	To      string    `json:"to"`
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended"`
	Watch   *struct {
		State   string    `json:"state"`
		Started time.Time `json:"started"`
	} `json:"watch"`
}

// lastRun returns the last run of c's journal.
func (f *fleet) lastRun(t *testing.T, ctx context.Context, c *cluster.Cluster) journalRun {
	t.Helper()
	res, err := c.Cutover(ctx, "--output", "json", "journal")
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Runs []journalRun `json:"runs"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &j); err != nil || len(j.Runs) == 0 {
		t.Fatalf("%s: cutover journal: %d runs, %v (exit %d, %s)", c.Name, len(j.Runs), err, res.ExitCode, res.Stderr)
	}
	return j.Runs[len(j.Runs)-1]
}

// releases writes version's release tarball (the build every node of the clusters holds) into
// f.dir, and another build of it: the same trees but for other bytes in the share tree's
// VERSION file. It returns both paths.
func (f *fleet) releases(t *testing.T, ctx context.Context, version string) (same, other string) {
	t.Helper()
	bins, err := demoapp.Build(ctx, filepath.Join(f.dir, "demoapp-bin"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := demoapp.Release(&buf, bins, version); err != nil {
		t.Fatal(err)
	}
	same = filepath.Join(f.dir, "demoapp-"+version+".tar.gz")
	if err := os.WriteFile(same, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	tr, tw := tar.NewReader(zr), tar.NewWriter(zw)
	altered := false
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimPrefix(h.Name, "./") == "usr/share/demoapp/"+version+"/VERSION" {
			data = []byte(version + "\nanother build\n")
			h.Size = int64(len(data))
			altered = true
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if !altered {
		t.Fatalf("the %s release has no usr/share/demoapp/%s/VERSION", version, version)
	}
	other = filepath.Join(f.dir, "demoapp-"+version+"-other-build.tar.gz")
	if err := os.WriteFile(other, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return same, other
}

// status is the part of cutover's Status document the tests read.
type status struct {
	Version string `json:"version"`
	Pending *struct {
		Run   int    `json:"run"`
		Stage string `json:"stage"`
	} `json:"pending"`
}

func (f *fleet) status(t *testing.T, ctx context.Context, c *cluster.Cluster) status {
	t.Helper()
	res, err := c.Cutover(ctx, "--output", "json", "status")
	if err != nil {
		t.Fatal(err)
	}
	var st status
	if err := json.Unmarshal([]byte(res.Stdout), &st); err != nil {
		t.Fatalf("%s: cutover status: %v (exit %d, %s)", c.Name, err, res.ExitCode, res.Stderr)
	}
	return st
}

// waitPending returns the run id once c has a run pending.
func (f *fleet) waitPending(t *testing.T, ctx context.Context, c *cluster.Cluster) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if st := f.status(t, ctx, c); st.Pending != nil && st.Pending.Stage != "" {
			return st.Pending.Run
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: no run pending after 30s", c.Name)
	return 0
}

// wantVersions checks the version each cluster runs, c1 first.
func (f *fleet) wantVersions(t *testing.T, ctx context.Context, want ...string) {
	t.Helper()
	for i, host := range f.order {
		if got := f.status(t, ctx, f.clusters[host]).Version; got != want[i] {
			t.Errorf("%s runs %q, want %q", host, got, want[i])
		}
	}
}

// playbookTimeout bounds one ansible-playbook run of the tests.
const playbookTimeout = 3 * time.Minute

var recapLine = regexp.MustCompile(`(?m)^(\S+)\s+:\s+((?:\w+=\d+\s*)+)$`)

// playbook runs the fleet playbook with args and returns its outcome.
func (f *fleet) playbook(t *testing.T, args ...string) playbookRun {
	t.Helper()
	sum := filepath.Join(f.dir, fmt.Sprintf("summary-%d.json", time.Now().UnixNano()))
	argv := append([]string{"-i", filepath.Join(f.dir, "inventory.yml"), "playbooks/fleet-upgrade.yml",
		"-e", "cutover_poll=1"}, args...)
	// A run that hangs is ended with its process group (the forked workers and their ssh).
	ctx, cancel := context.WithTimeout(context.Background(), playbookTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ansible-playbook", argv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	cmd.Dir = f.ansible
	cmd.Env = append(os.Environ(),
		"ANSIBLE_CONFIG="+filepath.Join(f.ansible, "ansible.cfg"),
		"ANSIBLE_NOCOLOR=1",
		"ANSIBLE_LOCAL_TEMP="+filepath.Join(f.dir, "ansible-tmp"),
		"CUTOVER_FLEET_SUMMARY="+sum)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	r := playbookRun{output: string(out), recap: map[string]map[string]int{}}
	if err != nil {
		exit, ok := err.(*exec.ExitError)
		if ctx.Err() != nil {
			t.Fatalf("ansible-playbook did not end within %s\n%s", playbookTimeout, out)
		}
		if !ok {
			t.Fatalf("ansible-playbook: %v", err)
		}
		r.exit = exit.ExitCode()
	}
	t.Logf("ansible-playbook %s: exit %d in %s", strings.Join(args, " "), r.exit, time.Since(start).Round(100*time.Millisecond))
	data, err := os.ReadFile(sum)
	if err != nil {
		t.Fatalf("the fleet summary: %v\n%s", err, out)
	}
	if err := json.Unmarshal(data, &r.summary); err != nil {
		t.Fatalf("the fleet summary: %v\n%s", err, data)
	}
	recap := r.output[strings.LastIndex(r.output, "PLAY RECAP"):]
	for _, m := range recapLine.FindAllStringSubmatch(recap, -1) {
		counts := map[string]int{}
		for _, kv := range strings.Fields(m[2]) {
			k, v, _ := strings.Cut(kv, "=")
			var n int
			fmt.Sscan(v, &n)
			counts[k] = n
		}
		r.recap[m[1]] = counts
	}
	return r
}

// newFleet starts the three clusters, each a master and a node at 1.0.0, gives each master
// Python and the operator's key, and writes the inventory: c1 the canary, c2 and c3 the waves.
func newFleet(t *testing.T) *fleet {
	t.Helper()
	_, err := exec.LookPath("ansible-playbook")
	require(t, err == nil, "ansible-playbook is not installed (Debian's ansible-core)")
	debsDir := os.Getenv("CUTOVER_PYTHON_DEBS")
	if debsDir == "" {
		debsDir = DebsDir
	}
	debs, _ := filepath.Glob(filepath.Join(debsDir, "*.deb"))
	require(t, len(debs) > 0, "no python3 packages for the masters in %s", debsDir)
	_, err = exec.LookPath("docker")
	require(t, err == nil, "docker is not installed")
	require(t, exec.Command("docker", "version").Run() == nil, "the Docker daemon does not answer")

	f := &fleet{clusters: map[string]*cluster.Cluster{}, order: []string{"c1", "c2", "c3"}, dir: t.TempDir(), ansible: ansibleDir(t)}
	python := unpackDebs(t, debs)
	pub := f.operatorKey(t)

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	wd, _ := os.Getwd()
	h := fnv.New32a()
	h.Write([]byte(wd))
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	for _, host := range f.order {
		name := fmt.Sprintf("ct-fleet-%s-%06x", host, h.Sum32()&0xffffff)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if c, err := cluster.Attach(ctx, name); err == nil {
				if err := c.Down(ctx); err != nil {
					t.Errorf("cluster %s: %v", name, err)
				}
			}
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := cluster.Start(ctx, cluster.Options{Name: name, Nodes: 2, Logf: t.Logf})
			if err == nil {
				err = provisionMaster(ctx, c, python, pub)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", host, err))
				return
			}
			f.clusters[host] = c
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("starting the fleet: %v", errs)
	}
	f.writeInventory(t, ctx)
	return f
}

// unpackDebs unpacks Debian's python3 packages into a directory tree and returns it.
func unpackDebs(t *testing.T, debs []string) string {
	t.Helper()
	root := t.TempDir()
	for _, deb := range debs {
		if out, err := exec.Command("dpkg-deb", "-x", deb, root).CombinedOutput(); err != nil {
			t.Fatalf("dpkg-deb -x %s: %v\n%s", deb, err, out)
		}
	}
	return root
}

// provisionMaster gives c's master python3 (the unpacked tree at root) and authorizes the
// operator's key pub for root, as an operator's workstation is.
func provisionMaster(ctx context.Context, c *cluster.Cluster, root, pub string) error {
	tar := exec.CommandContext(ctx, "tar", "-C", root, "-c", ".")
	untar := exec.CommandContext(ctx, "docker", "exec", "-i", c.Nodes[0].Container, "tar", "-x", "-C", "/", "--keep-directory-symlink")
	pipe, err := tar.StdoutPipe()
	if err != nil {
		return err
	}
	untar.Stdin = pipe
	var stderr bytes.Buffer
	untar.Stderr = &stderr
	if err := tar.Start(); err != nil {
		return err
	}
	if err := untar.Run(); err != nil {
		return fmt.Errorf("unpack python3 on the master: %v: %s", err, stderr.String())
	}
	if err := tar.Wait(); err != nil {
		return fmt.Errorf("tar python3: %v", err)
	}
	res, err := c.Shell(ctx, c.Master, "python3 -c 'import json, zipfile' && printf '%s\\n' '"+strings.TrimSpace(pub)+"' >> /root/.ssh/authorized_keys")
	if err == nil {
		err = res.Err()
	}
	return err
}

// operatorKey writes the operator's SSH key into f.dir and returns its public half.
func (f *fleet) operatorKey(t *testing.T) string {
	t.Helper()
	pubKey, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "fleet-operator")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "id_ed25519"), pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pubKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(ssh.MarshalAuthorizedKey(sshPub))
}

// writeInventory writes known_hosts with every master's host key and the inventory.
func (f *fleet) writeInventory(t *testing.T, ctx context.Context) {
	t.Helper()
	var known, hosts strings.Builder
	for _, host := range f.order {
		c := f.clusters[host]
		key, err := c.ReadFile(ctx, c.Master, "/etc/ssh/ssh_host_ed25519_key.pub")
		if err != nil {
			t.Fatal(err)
		}
		fields := strings.Fields(string(key))
		fmt.Fprintf(&known, "%s %s %s\n", c.Nodes[0].Address, fields[0], fields[1])
		fmt.Fprintf(&hosts, "        %s: {ansible_host: %s}\n", host, c.Nodes[0].Address)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "known_hosts"), []byte(known.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(hosts.String(), "\n"), "\n")
	inventory := fmt.Sprintf(`cutover_fleet:
  vars:
    ansible_user: root
    ansible_ssh_private_key_file: %[1]s/id_ed25519
    ansible_ssh_common_args: -o UserKnownHostsFile=%[1]s/known_hosts -o StrictHostKeyChecking=yes -o ConnectTimeout=5
    ansible_python_interpreter: /usr/bin/python3
  children:
    cutover_canary:
      hosts:
%[2]s
    waves:
      hosts:
%[3]s
`, f.dir, lines[0], strings.Join(lines[1:], "\n"))
	if err := os.WriteFile(filepath.Join(f.dir, "inventory.yml"), []byte(inventory), 0o600); err != nil {
		t.Fatal(err)
	}
}

func mustShell(t *testing.T, ctx context.Context, c *cluster.Cluster, node, script string) {
	t.Helper()
	res, err := c.Shell(ctx, node, script)
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		t.Fatalf("%s: %s: %v", node, script, err)
	}
}

// summaryText returns the summary the callback printed.
func summaryText(output string) string {
	if i := strings.LastIndex(output, "CUTOVER FLEET SUMMARY"); i >= 0 {
		return output[i:]
	}
	return ""
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
