package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/upgrade"
)

// assertNothingWritten fails unless cutover's state directory is still absent: no journal, no
// lock file, no intent, no log.
func assertNothingWritten(t *testing.T, lc *localCluster) {
	t.Helper()
	if _, err := os.Stat(lc.path("state")); !os.IsNotExist(err) {
		entries, _ := os.ReadDir(lc.path("state"))
		t.Errorf("the state directory exists (%v): %v", err, entries)
	}
}

// addUnreachableNode adds node9 to the local cluster's config, at a port of 127.0.0.1 where
// nothing listens, with an SSH key and an empty known_hosts so that the connection pool can
// be built.
func addUnreachableNode(t *testing.T, lc *localCluster) {
	t.Helper()
	t.Setenv("SSH_AUTH_SOCK", "")
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(key, "")
	if err != nil {
		t.Fatal(err)
	}
	lc.write("id_ed25519", string(pem.EncodeToMemory(block)))
	if err := os.Chmod(lc.path("id_ed25519"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	// A host key is known for the address, so the client dials and finds nobody there.
	hostKey, err := ssh.NewPublicKey(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	lc.write("known_hosts", knownhosts.Line([]string{net.JoinHostPort("127.0.0.1", fmt.Sprint(port))}, hostKey)+"\n")
	lc.writeConfig(lc.read("cutover.toml") + fmt.Sprintf(`
[[cluster.node]]
name = "node9"
address = "127.0.0.1"
port = %d

[ssh]
user = "root"
identity_files = [%q]
known_hosts = [%q]
connect_timeout = "2s"
`, port, lc.path("id_ed25519"), lc.path("known_hosts")))
}

func TestPlanLocal(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	before := lc.snapshot()
	code, out, errOut := lc.cutover("plan", "--to=1.1.0")
	if code != exitOK {
		t.Fatalf("plan exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"plan: app 1.0.0 -> 1.1.0 (upgrade) on 1 node", "would proceed", "[12/19]", "config-upgrade", "<- point of no return"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "REFUSED") {
		t.Errorf("a healthy plan shows a refusal:\n%s", out)
	}
	if after := lc.snapshot(); after != before {
		t.Errorf("plan changed the cluster:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if calls := lc.read("calls"); calls != "verify\n" {
		t.Errorf("plan ran %q, want only the health gate's verify", calls)
	}
	assertNothingWritten(t, lc)
}

// TestPlanJSON checks the JSON document of a real plan against a golden file, with the
// host name, the temporary root and the free disk space normalised.
func TestPlanJSON(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	code, out, errOut := lc.cutover("--output", "json", "plan", "--to=1.1.0")
	if code != exitOK {
		t.Fatalf("plan exit %d\nstderr:\n%s", code, errOut)
	}
	var doc planDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("plan --output json is not one JSON document: %v\n%s", err, out)
	}
	if len(doc.Stages) != 19 || !doc.Stages[11].PONR || doc.Stages[11].Name != "config-upgrade" || !doc.Proceed {
		t.Errorf("plan document: %d stages, stage 12 %+v, proceed %v; want 19, config-upgrade the PONR, proceed", len(doc.Stages), doc.Stages[11], doc.Proceed)
	}
	golden(t, "plan-local.json.golden", normalize(t, lc, out))
	assertNothingWritten(t, lc)
}

// normalize replaces what differs between machines and runs in a JSON document: the host name
// (as a whole string), the temporary root and disk space figures.
func normalize(t *testing.T, lc *localCluster, out string) []byte {
	t.Helper()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	out = strings.ReplaceAll(out, lc.root, "ROOT")
	out = strings.ReplaceAll(out, fmt.Sprintf("%q", host), `"HOST"`)
	out = regexp.MustCompile(`\d+ MiB`).ReplaceAllString(out, "N MiB")
	return []byte(out)
}

func TestPlanRefusals(t *testing.T) {
	tests := []struct {
		name     string
		versions []string
		setup    func(t *testing.T, lc *localCluster)
		args     []string
		wantCode int
		want     []string // in stdout (plan) or stderr (errors)
	}{
		{"target not installed", []string{"1.0.0", "1.1.0"}, nil, []string{"plan", "--to=1.2.0"}, exitFailed,
			[]string{"REFUSED  verify-installed", "app 1.2.0 is not installed"}},
		{"skipped minor and not installed: both listed", []string{"1.0.0", "1.1.0"}, func(t *testing.T, lc *localCluster) {
			lc.writeConfig(lc.read("cutover.toml") + "[policy]\nallow_minor_jump = false\n")
		}, []string{"plan", "--to=1.2.0"}, exitFailed,
			[]string{"skips a minor version", "app 1.2.0 is not installed", "refused: 2 refusals"}},
		{"major hop", []string{"1.0.0", "1.1.0"}, nil, []string{"plan", "--to=2.0.0"}, exitFailed,
			[]string{"changes the major version", "app 2.0.0 is not installed"}},
		{"unhealthy", []string{"1.0.0", "1.1.0"}, func(t *testing.T, lc *localCluster) {
			lc.setCommand("verify", "echo node3 is down >&2; exit 1")
		}, []string{"plan", "--to=1.1.0"}, exitFailed,
			[]string{"REFUSED  health", "node3 is down", "--force=unhealthy"}},
		{"unhealthy, forced", []string{"1.0.0", "1.1.0"}, func(t *testing.T, lc *localCluster) {
			lc.setCommand("verify", "echo node3 is down >&2; exit 1")
		}, []string{"plan", "--to=1.1.0", "--force=unhealthy"}, exitOK,
			[]string{"warning  health", "would proceed"}},
		{"locked", []string{"1.0.0", "1.1.0"}, func(t *testing.T, lc *localCluster) {
			lc.mkdir("state")
			lock, err := journal.AcquireLock(lc.path("state/lock"), journal.Holder{Host: "node9", PID: 4242})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { lock.Release() })
		}, []string{"plan", "--to=1.1.0"}, exitFailed,
			[]string{"REFUSED  lock", "pid 4242 on node9"}},
		{"pending run", []string{"1.0.0", "1.1.0"}, func(t *testing.T, lc *localCluster) {
			if err := journal.WriteIntent(lc.path("state/intent.json"), journal.Intent{RunID: 3, From: "1.0.0", To: "1.1.0"}); err != nil {
				t.Fatal(err)
			}
		}, []string{"plan", "--to=1.1.0"}, exitFailed,
			[]string{"REFUSED  pending", "run 3 (1.0.0 -> 1.1.0) is pending", "--resume"}},
		{"unreachable node", []string{"1.0.0", "1.1.0"}, addUnreachableNode, []string{"plan", "--to=1.1.0"}, exitFailed,
			[]string{"REFUSED  verify-installed  node9", "node9:"}},
		{"no --to", nil, nil, []string{"plan"}, exitUsage, []string{"plan needs --to=VERSION"}},
		{"hostile version", nil, nil, []string{"plan", "--to=1.1.0; touch /tmp/pwned"}, exitUsage, []string{"--to"}},
		{"unknown force", nil, nil, []string{"plan", "--to=1.1.0", "--force=everything"}, exitUsage, []string{"not a check that can be forced"}},
		{"argument", nil, nil, []string{"plan", "--to=1.1.0", "extra"}, exitUsage, []string{"takes no arguments"}},
		{"not the master", nil, func(t *testing.T, lc *localCluster) {
			host, _ := os.Hostname()
			lc.writeConfig(strings.ReplaceAll(lc.read("cutover.toml"), fmt.Sprintf("%q", host), `"elsewhere"`))
		}, []string{"plan", "--to=1.1.0"}, exitNotMaster, []string{"not the cluster's master"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			versions := tt.versions
			if versions == nil {
				versions = []string{"1.0.0", "1.1.0"}
			}
			lc := newLocalCluster(t, "1.0.0", versions...)
			if tt.setup != nil {
				tt.setup(t, lc)
			}
			before := treeSnapshot(t, lc.root)
			code, out, errOut := lc.cutover(tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, out, errOut)
			}
			for _, want := range tt.want {
				if !strings.Contains(out+errOut, want) {
					t.Errorf("output lacks %q\nstdout:\n%s\nstderr:\n%s", want, out, errOut)
				}
			}
			if tt.wantCode == exitFailed && !strings.Contains(errOut, "would be refused") {
				t.Errorf("stderr %q does not say the switch would be refused", errOut)
			}
			if after := treeSnapshot(t, lc.root); after != before {
				t.Errorf("plan wrote something:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if calls := lc.read("calls"); strings.Trim(calls, "verify\n") != "" {
				t.Errorf("plan ran %q, want at most verify", calls)
			}
		})
	}
}

// treeSnapshot describes every file under the local cluster's root but the root itself and
// the calls file its commands write: path, mode, size, modification time and link target.
// Two equal snapshots mean nothing else was written.
func treeSnapshot(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root || p == filepath.Join(root, "calls") {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		target, _ := os.Readlink(p)
		fmt.Fprintf(&b, "%s %s %d %s %s\n", strings.TrimPrefix(p, root), info.Mode(), info.Size(), info.ModTime().Format(time.RFC3339Nano), target)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// samplePlan is a plan of a four-node cluster with one node offline, a warning and two
// refusals, for the printers' golden files.
func samplePlan(refused bool) *upgrade.PlanReport {
	p := &upgrade.PlanReport{
		App: "demoapp", From: "1.0.0", To: "1.2.0", Direction: upgrade.Up, Master: "node1",
		Nodes: []string{"node1", "node2", "node3"}, Offline: []string{"node4"},
		Checks: []upgrade.Check{
			{Name: "lock", OK: true, Message: "no other run holds the lock"},
			{Name: "pending", OK: true, Message: "no run is pending"},
			{Name: "live-version", Node: "node1", OK: true, Message: "demoapp runs 1.0.0"},
			{Name: "upgrade-path", OK: true, Message: "1.0.0 -> 1.2.0 (upgrade) is allowed"},
			{Name: "app-config", Node: "node1", OK: true, Message: "/var/lib/demoapp/config.json is at 1.0.0"},
			{Name: "disk-space", Node: "node1", OK: true, Message: "16 MiB needed for the backup, 9000 MiB free in /var/lib/cutover"},
			{Name: "offline", Node: "node4", OK: true, Warning: true, Message: "node4 is offline: it is skipped and stays at 1.0.0; run 'cutover sync node4' when it is back"},
			{Name: "clock", Node: "node2", OK: true, Message: "within 2s of the master's"},
			{Name: "clock", Node: "node3", OK: true, Warning: true, Message: "node3's clock is 7s ahead of the master's; keep the nodes' clocks in sync (NTP)"},
			{Name: "health", Node: "node1", OK: true, Message: "verify passed"},
			{Name: "verify-installed", Node: "node1", OK: true, Message: "1.2.0 installed, links at 1.0.0"},
			{Name: "verify-installed", Node: "node2", OK: true, Message: "1.2.0 installed, links at 1.0.0"},
			{Name: "verify-installed", Node: "node3", OK: true, Message: "1.2.0 installed, links at 1.0.0"},
		},
		Proceed: true,
	}
	if refused {
		p.Checks[3] = upgrade.Check{Name: "upgrade-path", Message: "1.0.0 -> 1.2.0 skips a minor version; the policy allows only 1.1 (allow_minor_jump = false)"}
		p.Checks[12] = upgrade.Check{Name: "verify-installed", Node: "node3", Message: "demoapp 1.2.0 is not installed: missing /usr/lib/demoapp/1.2.0 and /usr/share/demoapp/1.2.0"}
		p.Refusals = []string{p.Checks[3].Message, "node3: " + p.Checks[12].Message}
		p.Proceed = false
	}
	for i, name := range []string{"preflight", "verify-installed", "intent", "drain", "pause-reconciler", "stop-master", "reverify",
		"stop-nodes", "backup", "config-downgrade", "switch", "config-upgrade", "ensure-dirs", "start", "redist-conf",
		"restart", "undrain", "post-upgrade", "finish"} {
		s := upgrade.PlannedStage{Index: i + 1, Name: name, Where: "master", Nodes: []string{"node1"}}
		switch name {
		case "verify-installed", "reverify", "switch", "ensure-dirs", "start", "restart":
			s.Where, s.Nodes = "all", p.Nodes
		case "stop-nodes":
			s.Where, s.Nodes = "others", p.Nodes[1:]
		case "config-downgrade", "redist-conf":
			s.Skipped, s.Nodes = true, nil
		case "config-upgrade":
			s.PONR = true
		}
		p.Stages = append(p.Stages, s)
	}
	return p
}

func TestNodeList(t *testing.T) {
	many := []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"}
	for _, tt := range []struct {
		names   []string
		verbose bool
		want    string
	}{
		{nil, false, ""},
		{many[:6], false, "n1, n2, n3, n4, n5, n6"},
		{many, false, "n1, n2, n3, n4, n5, ... (8 nodes)"},
		{many, true, "n1, n2, n3, n4, n5, n6, n7, n8"},
	} {
		if got := nodeList(tt.names, tt.verbose); got != tt.want {
			t.Errorf("nodeList(%v, %v) = %q, want %q", tt.names, tt.verbose, got, tt.want)
		}
	}
}

// TestPlanDoesNotWaitForTheLock runs plan while another process holds the run lock: it answers
// at once with the holder as a refusal.
func TestPlanDoesNotWaitForTheLock(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	lc.mkdir("state")
	lock, err := journal.AcquireLock(lc.path("state/lock"), journal.Holder{Host: "node1", PID: 777})
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	start := time.Now()
	code, out, _ := lc.cutover("plan", "--to=1.1.0")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("plan took %s with the lock held", d)
	}
	if code != exitFailed || !strings.Contains(out, "pid 777 on node1") {
		t.Errorf("exit %d, output:\n%s\nwant 1 naming the holder", code, out)
	}
	// The lock is still held by its holder, not dropped by plan's look at it.
	if _, err := journal.AcquireLock(lc.path("state/lock"), journal.Holder{}); !journal.IsLocked(err) {
		t.Errorf("after plan the lock is not held: %v", err)
	}
}

// TestPlanMarksNotInstalled: in the Plan document, a refusal because the target is not
// installed on a node says so (not_installed), so that a caller that stages the version first
// (the fleet playbook's pre-cache) can tell it from every other refusal.
func TestPlanMarksNotInstalled(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	code, out, errOut := lc.cutover("--output", "json", "plan", "--to=1.2.0")
	if code != exitFailed {
		t.Fatalf("plan --to=1.2.0: exit %d, want %d\n%s\n%s", code, exitFailed, out, errOut)
	}
	var doc struct {
		Checks []struct {
			Name         string
			OK           bool
			NotInstalled bool `json:"not_installed"`
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	marked := 0
	for _, c := range doc.Checks {
		if c.NotInstalled {
			marked++
			if c.OK || c.Name != "verify-installed" {
				t.Errorf("check %+v is marked not_installed", c)
			}
		} else if !c.OK {
			t.Errorf("the refusal %+v is not marked not_installed: the target's absence is the only refusal here", c)
		}
	}
	if marked == 0 {
		t.Errorf("no check is marked not_installed:\n%s", out)
	}
}
