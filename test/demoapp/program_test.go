package demoapp

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestDaemonStartStopStatus(t *testing.T) {
	t.Parallel()
	n := singleNode(t, "1.1.0")
	if out, _, code := n.run("daemon", "status"); code != 3 || out != "stopped\n" {
		t.Fatalf("status before start = %q, exit %d; want \"stopped\", exit 3", out, code)
	}
	n.must("daemon", "start")
	pid := n.pid()
	if pid == 0 || !processAlive(pid) {
		t.Fatalf("after start, pid file names %d, alive %v", pid, processAlive(pid))
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name: state ppid pgrp session.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if fields[3] != strconv.Itoa(pid) {
		t.Errorf("daemon pid %d runs in session %s, want its own session (setsid)", pid, fields[3])
	}
	if out := n.must("daemon", "status"); out != "running 1.1.0\n" {
		t.Errorf("status = %q, want \"running 1.1.0\"", out)
	}
	port := strings.TrimPrefix(n.env[len(n.env)-1], "DEMOAPP_PORT=")
	resp, err := http.Get("http://127.0.0.1:" + port + "/status")
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]string
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"node": "node1", "version": "1.1.0", "config_version": "1.1.0"}
	for k, v := range want {
		if st[k] != v {
			t.Errorf("GET /status %s = %q, want %q", k, st[k], v)
		}
	}

	n.must("daemon", "start")
	if again := n.pid(); again != pid {
		t.Errorf("second start replaced daemon %d with %d, want it left alone", pid, again)
	}
	n.must("daemon", "stop")
	if processAlive(pid) {
		t.Errorf("daemon %d still alive after stop", pid)
	}
	if _, err := os.Stat(n.path("run/demoapp/demoapp.pid")); err == nil {
		t.Error("pid file left after stop")
	}
	if out, _, code := n.run("daemon", "status"); code != 3 || out != "stopped\n" {
		t.Errorf("status after stop = %q, exit %d; want \"stopped\", exit 3", out, code)
	}
	n.must("daemon", "stop")
	log, err := os.ReadFile(n.path("var/log/demoapp/daemon.log"))
	if err != nil || !strings.Contains(string(log), "demoapp 1.1.0 serving") || !strings.Contains(string(log), "stopped") {
		t.Errorf("daemon log (err %v):\n%s", err, log)
	}
}

// TestDaemonConfigVersion starts each version's daemon on each version's config: only the
// same MAJOR.MINOR may start, and 1.2 on 1.1's config (it runs beside 1.1).
func TestDaemonConfigVersion(t *testing.T) {
	t.Parallel()
	for _, cfg := range Versions {
		for _, bin := range Versions {
			t.Run("config "+cfg+" daemon "+bin, func(t *testing.T) {
				t.Parallel()
				n := singleNode(t, cfg)
				out, errOut, code := n.runVersion(bin, "daemon", "start")
				if cfg == bin || cfg == "1.1.0" && bin == "1.2.0" {
					if code != 0 {
						t.Fatalf("start = exit %d, stderr %q; want success", code, errOut)
					}
					if got := n.must("daemon", "status"); got != "running "+bin+"\n" {
						t.Errorf("status = %q", got)
					}
					return
				}
				want := "demoapp: config version " + cfg + " does not match daemon version " + bin + "\n"
				if code != 1 || errOut != want {
					t.Errorf("start = exit %d, stdout %q, stderr %q; want exit 1, %q", code, out, errOut, want)
				}
				if got, _, code := n.run("daemon", "status"); code != 3 {
					t.Errorf("status after refusal = %q, exit %d; want stopped", got, code)
				}
			})
		}
	}
}

// TestDaemonConfigSchema gives daemons a config whose version is theirs but whose content
// is another schema's: they must refuse it.
func TestDaemonConfigSchema(t *testing.T) {
	t.Parallel()
	tests := []struct{ content, label, wantErr string }{
		{"1.0.0", "1.1.0", "/cluster/master_address is missing"},
		{"1.1.0", "1.2.0", "/cluster/verify_timeout is missing"},
		{"1.2.0", "1.1.0", "unknown key /cluster/verify_timeout"},
		{"1.1.0", "1.0.0", "/cluster/master_ip is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.content+" labelled "+tt.label, func(t *testing.T) {
			t.Parallel()
			n := singleNode(t, tt.label)
			var cfg map[string]any
			data, err := os.ReadFile(filepath.Join("testdata", "config-"+tt.content+".json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, &cfg); err != nil {
				t.Fatal(err)
			}
			cfg["version"] = tt.label
			writeJSON(t, n.path("var/lib/demoapp/config.json"), cfg)
			_, errOut, code := n.run("daemon", "start")
			minor := minorOf(tt.label)
			if code != 1 || !strings.Contains(errOut, "does not follow the "+minor+" schema") || !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("start = exit %d, stderr %q; want a refusal naming %q", code, errOut, tt.wantErr)
			}
		})
	}
}

func TestQueue(t *testing.T) {
	t.Parallel()
	n := singleNode(t, "1.0.0")
	n.must("daemon", "start")
	for i, want := range []string{"1\n", "2\n"} {
		if got := n.must("job", "submit", "--seconds", "1"); got != want {
			t.Fatalf("submit %d printed %q, want %q", i+1, got, want)
		}
	}
	if got := n.must("queue", "busy"); got != "2\n" {
		t.Errorf("busy after two submissions = %q, want 2", got)
	}
	if out, _, code := n.run("queue", "drained"); code != 1 || out != "not drained\n" {
		t.Errorf("drained before drain = %q, exit %d; want \"not drained\", exit 1", out, code)
	}
	n.must("queue", "drain")
	n.must("queue", "drain")
	if out, _, code := n.run("queue", "drained"); code != 0 || out != "drained\n" {
		t.Errorf("drained after drain = %q, exit %d; want \"drained\", exit 0", out, code)
	}
	if _, errOut, code := n.run("job", "submit", "--seconds", "1"); code != 1 || !strings.Contains(errOut, "drained") {
		t.Errorf("submit while drained = exit %d, stderr %q; want a refusal", code, errOut)
	}
	start := time.Now()
	waitFor(t, "the queue to empty", 10*time.Second, func() bool { return n.must("queue", "busy") == "0\n" })
	if got, want := n.jobs(), []string{"1:done", "2:done"}; !slices.Equal(got, want) {
		t.Errorf("jobs = %v, want %v", got, want)
	}
	t.Logf("two 1-second jobs drained in %s", time.Since(start).Round(time.Millisecond))
	n.must("queue", "undrain")
	if got := n.must("job", "submit", "--seconds", "0"); got != "3\n" {
		t.Errorf("submit after undrain = %q, want 3", got)
	}
	for _, bad := range [][]string{{"job", "submit"}, {"job", "submit", "--seconds", "x"}, {"job", "submit", "--seconds", "-1"}} {
		if _, _, code := n.run(bad...); code != 2 {
			t.Errorf("%v = exit %d, want 2", bad, code)
		}
	}
}

func TestQueueMaxJobs(t *testing.T) {
	t.Parallel()
	n := singleNode(t, "1.1.0")
	var cfg map[string]any
	data, err := os.ReadFile(n.path("var/lib/demoapp/config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["queue"].(map[string]any)["max_jobs"] = 2
	writeJSON(t, n.path("var/lib/demoapp/config.json"), cfg)
	n.must("job", "submit", "--seconds", "5")
	n.must("job", "submit", "--seconds", "5")
	if _, errOut, code := n.run("job", "submit", "--seconds", "5"); code != 1 || !strings.Contains(errOut, "max_jobs is 2") {
		t.Errorf("third submit = exit %d, stderr %q; want refused, queue full", code, errOut)
	}
}

func TestQueueMasterOnly(t *testing.T) {
	t.Parallel()
	spec := NodeSpec{Name: "node2", Master: "node1", Nodes: []NodeAddr{{"node1", "127.0.0.1"}, {"node2", "127.0.0.2"}}}
	n := newTestNode(t, spec, "127.0.0.2", freePort(t, "127.0.0.2"))
	for _, args := range [][]string{{"job", "submit", "--seconds", "1"}, {"job", "list"}, {"queue", "drain"}, {"queue", "busy"}} {
		if _, errOut, code := n.run(args...); code != 1 || !strings.Contains(errOut, "runs on the master node1, not on node2") {
			t.Errorf("%v on node2 = exit %d, stderr %q; want a refusal", args, code, errOut)
		}
	}
}

// TestQueueRequeue stops the master's daemon during a job: the job stays in running/ and
// goes back to waiting/ when the daemon starts again, then completes.
func TestQueueRequeue(t *testing.T) {
	t.Parallel()
	n := singleNode(t, "1.0.0")
	n.must("job", "submit", "--seconds", "2")
	n.must("job", "submit", "--seconds", "1")
	n.must("daemon", "start")
	waitFor(t, "job 1 to run", 5*time.Second, func() bool { return slices.Contains(n.jobs(), "1:running") })
	n.must("daemon", "stop")
	if got, want := n.jobs(), []string{"1:running", "2:waiting"}; !slices.Equal(got, want) {
		t.Fatalf("jobs after stopping during job 1 = %v, want %v", got, want)
	}
	if got := n.must("queue", "busy"); got != "2\n" {
		t.Errorf("busy with the daemon stopped = %q, want 2", got)
	}
	n.must("daemon", "start")
	waitFor(t, "every job to complete", 10*time.Second, func() bool { return n.must("queue", "busy") == "0\n" })
	if got, want := n.jobs(), []string{"1:done", "2:done"}; !slices.Equal(got, want) {
		t.Errorf("jobs = %v, want %v", got, want)
	}
	log, _ := os.ReadFile(n.path("var/log/demoapp/daemon.log"))
	if !strings.Contains(string(log), "interrupted job 1 back in waiting/") {
		t.Errorf("daemon log does not record the requeue:\n%s", log)
	}
}

// TestVerify runs verify on the master of a two-node cluster (127.0.0.1 and 127.0.0.2).
func TestVerify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		node2Live string
		node2Up   bool
		offline   bool
		wantCode  int
		wantLines []string
		wantErr   string
	}{
		{"all up", "1.0.0", true, false, 0, []string{"node1 ok 1.0.0 (config 1.0.0)", "node2 ok 1.0.0 (config 1.0.0)"}, ""},
		{"node2 down", "1.0.0", false, false, 1, []string{"node1 ok 1.0.0 (config 1.0.0)", "node2 FAILED unreachable at 127.0.0.2:"}, "demoapp: verify failed on 1 of 2 online nodes\n"},
		{"node2 other version", "1.1.0", true, false, 1, []string{"node1 ok 1.0.0 (config 1.0.0)", "node2 FAILED version 1.1.0, want 1.0.0"}, "demoapp: verify failed on 1 of 2 online nodes\n"},
		{"node2 offline", "1.0.0", false, true, 0, []string{"node1 ok 1.0.0 (config 1.0.0)", "node2 offline, skipped"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			nodes := []NodeAddr{{"node1", "127.0.0.1"}, {"node2", "127.0.0.2"}}
			port := freePort(t, "127.0.0.1", "127.0.0.2")
			node1 := newTestNode(t, NodeSpec{Name: "node1", Master: "node1", Nodes: nodes}, "127.0.0.1", port)
			node2 := newTestNode(t, NodeSpec{Name: "node2", Master: "node1", Nodes: nodes, Live: tt.node2Live}, "127.0.0.2", port)
			node1.must("daemon", "start")
			if tt.node2Up {
				node2.must("daemon", "start")
			}
			if tt.offline {
				var cfg map[string]any
				data, _ := os.ReadFile(node1.path("var/lib/demoapp/config.json"))
				if err := json.Unmarshal(data, &cfg); err != nil {
					t.Fatal(err)
				}
				cfg["nodes"].(map[string]any)["node2"].(map[string]any)["offline"] = true
				writeJSON(t, node1.path("var/lib/demoapp/config.json"), cfg)
			}
			out, errOut, code := node1.run("verify")
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if code != tt.wantCode || errOut != tt.wantErr || len(lines) != len(tt.wantLines) {
				t.Fatalf("verify = exit %d, stdout %q, stderr %q; want exit %d, stderr %q, lines %q", code, out, errOut, tt.wantCode, tt.wantErr, tt.wantLines)
			}
			for i, want := range tt.wantLines {
				if !strings.HasPrefix(lines[i], want) {
					t.Errorf("verify line %d = %q, want %q...", i+1, lines[i], want)
				}
			}
		})
	}
}

// TestVerifyTimeout checks that a node that accepts connections but never answers fails
// verify within its 2-second timeout.
func TestVerifyTimeout(t *testing.T) {
	t.Parallel()
	nodes := []NodeAddr{{"node1", "127.0.0.1"}, {"node2", "127.0.0.2"}}
	port := freePort(t, "127.0.0.1", "127.0.0.2")
	node1 := newTestNode(t, NodeSpec{Name: "node1", Master: "node1", Nodes: nodes, Live: "1.2.0"}, "127.0.0.1", port)
	node1.must("daemon", "start")
	silent, err := net.Listen("tcp", net.JoinHostPort("127.0.0.2", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	start := time.Now()
	out, _, code := node1.run("verify")
	elapsed := time.Since(start)
	if code != 1 || !strings.Contains(out, "node2 FAILED unreachable") {
		t.Errorf("verify = exit %d, stdout %q; want node2 failed", code, out)
	}
	if elapsed < 2*time.Second || elapsed > 8*time.Second {
		t.Errorf("verify took %s, want the 2 s timeout", elapsed)
	}
}

func TestFaults(t *testing.T) {
	t.Parallel()
	n := singleNode(t, "1.0.0")
	touch := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(n.path(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(n.path(p), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// hold: the command waits, after recording that it was reached, until the hold goes.
	touch("run/demoapp/hold/queue-drain")
	cmd := n.command("1.0.0", "queue", "drain")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	waitFor(t, "queue-drain to be reached", 5*time.Second, func() bool {
		_, err := os.Stat(n.path("run/demoapp/reached/queue-drain"))
		return err == nil
	})
	select {
	case err := <-exited:
		t.Fatalf("queue drain exited (%v) while held", err)
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := os.Stat(n.path("var/lib/demoapp/queue/drained")); err == nil {
		t.Fatal("queue drained while the command was held")
	}
	if err := os.Remove(n.path("run/demoapp/hold/queue-drain")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("queue drain after release: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("queue drain still held after the hold was removed")
	}
	if _, err := os.Stat(n.path("var/lib/demoapp/queue/drained")); err != nil {
		t.Errorf("queue not drained after the released command: %v", err)
	}

	// fail: the command fails without doing anything.
	touch("run/demoapp/fail/daemon-start")
	_, errOut, code := n.run("daemon", "start")
	if code != 1 || errOut != "demoapp: daemon-start failed on demand\n" {
		t.Errorf("daemon start with a fail file = exit %d, stderr %q", code, errOut)
	}
	if _, _, code := n.run("daemon", "status"); code != 3 {
		t.Errorf("daemon runs after a start that failed on demand")
	}

	// reached: one line per invocation.
	for range 2 {
		n.run("watcher", "paused")
	}
	reached, err := os.ReadFile(n.path("run/demoapp/reached/watcher-paused"))
	if err != nil || strings.Count(string(reached), "\n") != 2 {
		t.Errorf("reached/watcher-paused = %q (err %v), want 2 lines", reached, err)
	}
}

func TestMaintenanceCommands(t *testing.T) {
	t.Parallel()
	n := singleNode(t, "1.1.0")

	if out, _, code := n.run("watcher", "paused"); code != 1 || out != "not paused\n" {
		t.Errorf("watcher paused = %q, exit %d; want \"not paused\", 1", out, code)
	}
	n.must("watcher", "pause")
	if out, _, code := n.run("watcher", "paused"); code != 0 || out != "paused\n" {
		t.Errorf("watcher paused after pause = %q, exit %d", out, code)
	}
	n.must("watcher", "continue")
	n.must("watcher", "continue")
	if _, _, code := n.run("watcher", "paused"); code != 1 {
		t.Errorf("watcher still paused after continue")
	}

	n.must("post-upgrade", "--from", "1.0.0")
	if _, _, code := n.runVersion("1.2.0", "post-upgrade", "--from", "1.1.0"); code != 0 {
		t.Fatal("post-upgrade with 1.2.0 failed")
	}
	log, err := os.ReadFile(n.path("var/lib/demoapp/post-upgrade.log"))
	if want := "from 1.0.0 to 1.1.0\nfrom 1.1.0 to 1.2.0\n"; err != nil || string(log) != want {
		t.Errorf("post-upgrade.log = %q (err %v), want %q", log, err, want)
	}
	for _, bad := range [][]string{{"post-upgrade"}, {"post-upgrade", "--from", "1.0"}, {"post-upgrade", "--from", "1.0.0; true"}} {
		if _, _, code := n.run(bad...); code != 2 {
			t.Errorf("%v = exit %d, want 2", bad, code)
		}
	}

	if err := os.Chmod(n.path("var/lib/demoapp/queue"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(n.path("var/lib/demoapp/config.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(n.path("var/lib/demoapp/queue/done")); err != nil {
		t.Fatal(err)
	}
	n.must("ensure-dirs")
	for p, want := range map[string]os.FileMode{
		"/var/lib/demoapp/queue":       0o700,
		"/var/lib/demoapp/queue/done":  0o700,
		"/var/lib/demoapp/config.json": 0o600,
		"/run/demoapp":                 0o755,
		"/var/log/demoapp":             0o750,
	} {
		if got := mode(t, n.root, p); got != want {
			t.Errorf("after ensure-dirs, mode of %s = %o, want %o", p, got, want)
		}
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	n := singleNode(t, "1.0.0")
	for _, args := range [][]string{{}, {"frobnicate"}, {"daemon"}, {"daemon", "restart"}, {"verify", "extra"}} {
		out, errOut, code := n.run(args...)
		if code != 2 || out != "" || !strings.HasPrefix(errOut, "demoapp: ") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("demoapp %v = exit %d, stdout %q, stderr %q; want exit 2 and one demoapp: line", args, code, out, errOut)
		}
	}
	out, err := exec.Command(testBins.Paths["1.2.0"], "--version").Output()
	if err != nil || string(out) != "1.2.0\n" {
		t.Errorf("--version = %q (%v)", out, err)
	}
}

// writeJSON writes v as the JSON file path, mode 0600.
func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
}
