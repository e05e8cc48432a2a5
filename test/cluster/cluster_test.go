package cluster_test

import (
	"context"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/test/cluster"
	"github.com/cutover/cutover/test/demoapp"
)

const demoappBin = "/usr/lib/demoapp/default/usr/sbin/demoapp"

// strictSSH are the master's OpenSSH client options in these tests: keys only, strict host-key
// checking, a short connect timeout.
const strictSSH = "ssh -o BatchMode=yes -o StrictHostKeyChecking=yes -o ConnectTimeout=2 "

// shell runs script on node and fails the test when Docker fails; the command's result is
// returned whatever its exit code.
func shell(t *testing.T, c *cluster.Cluster, node, script string) cluster.Result {
	t.Helper()
	res, err := c.Shell(t.Context(), node, script)
	if err != nil {
		t.Fatalf("%s: %s: %v", node, script, err)
	}
	return res
}

// mustShell runs script on node and fails the test unless it exits 0.
func mustShell(t *testing.T, c *cluster.Cluster, node, script string) string {
	t.Helper()
	res := shell(t, c, node, script)
	if res.ExitCode != 0 {
		t.Fatalf("%s: %s: exit code %d, stderr %q", node, script, res.ExitCode, res.Stderr)
	}
	return res.Stdout
}

// eventually retries cond, paced by a Poll, until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var poll cluster.Poll
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		poll.Wait()
	}
}

// TestCluster checks on one cluster, step by step, everything the end-to-end tests rely on.
// Each step leaves the cluster as it found it.
func TestCluster(t *testing.T) {
	start := time.Now()
	c := cluster.New(t, cluster.Options{Missing: map[string][]string{"node3": {"1.2.0"}}})
	t.Logf("4-node cluster up in %s", time.Since(start).Round(10*time.Millisecond))
	others := c.Nodes[1:]

	t.Run("strict ssh from the master", func(t *testing.T) {
		for _, n := range others {
			for _, host := range []string{n.Name, n.Address} {
				out := mustShell(t, c, c.Master, strictSSH+host+" hostname")
				if got := strings.TrimSpace(out); got != n.Name {
					t.Errorf("ssh %s hostname = %q, want %q", host, got, n.Name)
				}
			}
		}
		// A name known_hosts does not list is refused, not learned.
		res := shell(t, c, c.Master, strictSSH+"-o HostKeyAlias=stranger node2 hostname")
		if res.ExitCode != 255 || !strings.Contains(res.Stderr, "Host key verification failed") {
			t.Errorf("ssh to a name not in known_hosts: exit %d, stderr %q; want 255 and a host key verification failure", res.ExitCode, res.Stderr)
		}
		if out := mustShell(t, c, c.Master, "cat /root/.ssh/known_hosts"); strings.Contains(out, "stranger") {
			t.Errorf("known_hosts learned a key for stranger:\n%s", out)
		}
	})

	t.Run("demo app installed", func(t *testing.T) {
		script := `for l in /etc/demoapp/lib /etc/demoapp/share /usr/lib/demoapp/default /usr/share/demoapp/default; do
			echo "link $l $(readlink $l)"; done
		for v in ` + strings.Join(demoapp.Versions, " ") + `; do
			[ -d /usr/lib/demoapp/$v/usr/sbin ] && [ -f /usr/share/demoapp/$v/VERSION ] && echo "installed $v"; done
		echo "version $(` + demoappBin + ` --version)"
		echo "config $(sha256sum </var/lib/demoapp/config.json | cut -c1-16)"
		echo "master $(cat /var/lib/demoapp/master)"
		echo "authorized_keys $(stat -c %a /root/.ssh/authorized_keys)"
		[ -x /usr/sbin/cutover ] && [ "$(dpkg-query -W -f '${Status}' cutover 2>/dev/null)" = "install ok installed" ] &&
			echo "cutover $(/usr/sbin/cutover version)"
		[ -f /etc/cutover/cutover.toml ] && echo "cutover.toml"
		grep -q '^PATH=' /etc/cron.d/cutover 2>/dev/null &&
			grep -q '^@reboot root .*/usr/sbin/cutover upgrade --resume' /etc/cron.d/cutover && echo "resume-at-boot"
		true`
		configs := map[string]bool{}
		for _, n := range c.Nodes {
			got := map[string]string{}
			for _, line := range strings.Split(strings.TrimSpace(mustShell(t, c, n.Name, script)), "\n") {
				k, v, _ := strings.Cut(line, " ")
				if k == "link" || k == "installed" {
					path, target, _ := strings.Cut(v, " ")
					k, v = k+" "+path, target
				}
				got[k] = v
			}
			want := map[string]string{
				"link /etc/demoapp/lib":           "/usr/lib/demoapp/1.0.0",
				"link /etc/demoapp/share":         "/usr/share/demoapp/1.0.0",
				"link /usr/lib/demoapp/default":   "/etc/demoapp/lib",
				"link /usr/share/demoapp/default": "/etc/demoapp/share",
				"master":                          "node1",
				"authorized_keys":                 "600",
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s: %s = %q, want %q", n.Name, k, got[k], v)
				}
			}
			if !strings.Contains(got["version"], "1.0.0") {
				t.Errorf("%s: demoapp --version = %q, want 1.0.0", n.Name, got["version"])
			}
			for _, v := range demoapp.Versions {
				_, has := got["installed "+v]
				if want := !(n.Name == "node3" && v == "1.2.0"); has != want {
					t.Errorf("%s: version %s installed = %v, want %v", n.Name, v, has, want)
				}
			}
			_, hasCutover := got["cutover"]
			_, hasTOML := got["cutover.toml"]
			_, hasResume := got["resume-at-boot"]
			if master := n.Name == c.Master; hasCutover != master || hasTOML != master || hasResume != master {
				t.Errorf("%s: cutover package installed %v, cutover.toml %v, @reboot resume %v; want all %v", n.Name, hasCutover, hasTOML, hasResume, master)
			}
			configs[got["config"]] = true
		}
		if len(configs) != 1 {
			t.Errorf("config.json differs between nodes: %d distinct checksums", len(configs))
		}
	})

	t.Run("demo daemons run 1.0.0", func(t *testing.T) {
		for _, n := range c.Nodes {
			if out := mustShell(t, c, n.Name, demoappBin+" daemon status"); strings.TrimSpace(out) != "running 1.0.0" {
				t.Errorf("%s: daemon status = %q, want \"running 1.0.0\"", n.Name, out)
			}
		}
		// The master's verifier asks every daemon over the network.
		mustShell(t, c, c.Master, demoappBin+" verify")
	})

	t.Run("cut node is unreachable until healed", func(t *testing.T) {
		ctx := t.Context()
		if err := c.Cut(ctx, "node2"); err != nil {
			t.Fatal(err)
		}
		res := shell(t, c, c.Master, strictSSH+"node2 true")
		if res.ExitCode == 0 {
			t.Errorf("ssh to a cut node2 succeeded, want a failure")
		}
		if out := mustShell(t, c, "node2", "hostname"); strings.TrimSpace(out) != "node2" {
			t.Errorf("cut node2 does not run: hostname = %q", out)
		}
		if err := c.Heal(ctx, "node2"); err != nil {
			t.Fatal(err)
		}
		mustShell(t, c, c.Master, strictSSH+"node2 true")
	})

	t.Run("rebooted master runs its @reboot lines", func(t *testing.T) {
		ctx := t.Context()
		mustShell(t, c, c.Master, `printf '%s\n' '@reboot root date +\%s >> /var/log/boot-marker' >/etc/cron.d/boot-marker
			chmod 0644 /etc/cron.d/boot-marker; rm -f /var/log/cutover-resume.log`)
		defer shell(t, c, c.Master, "rm -f /etc/cron.d/boot-marker /var/log/boot-marker")
		lines := func() int {
			n, _ := strconv.Atoi(strings.TrimSpace(shell(t, c, c.Master, "cat /var/log/boot-marker 2>/dev/null | wc -l").Stdout))
			return n
		}
		before := lines()
		if err := c.Reboot(ctx, c.Master); err != nil {
			t.Fatal(err)
		}
		eventually(t, 15*time.Second, "boot marker written", func() bool { return lines() > before })
		eventually(t, 15*time.Second, "cutover resume log written", func() bool {
			return shell(t, c, c.Master, "test -f /var/log/cutover-resume.log").ExitCode == 0
		})
		if got := lines(); got != before+1 {
			t.Errorf("boot marker has %d lines after one reboot, want %d", got, before+1)
		}
		if err := c.WaitDaemon(ctx, c.Master); err != nil {
			t.Errorf("boot hook did not start the daemon again: %v", err)
		}
	})

	t.Run("crashed node is down until powered on", func(t *testing.T) {
		ctx := t.Context()
		if err := c.Crash(ctx, "node4"); err != nil {
			t.Fatal(err)
		}
		if res := shell(t, c, c.Master, strictSSH+"node4 true"); res.ExitCode == 0 {
			t.Errorf("ssh to a crashed node4 succeeded, want a failure")
		}
		if _, err := c.Exec(ctx, "node4", "true"); err == nil {
			t.Errorf("exec on a crashed node4 succeeded, want a Docker error")
		}
		time.Sleep(time.Second)
		if res := shell(t, c, c.Master, strictSSH+"node4 true"); res.ExitCode == 0 {
			t.Errorf("crashed node4 came back by itself")
		}
		if err := c.PowerOn(ctx, "node4"); err != nil {
			t.Fatal(err)
		}
		if out := mustShell(t, c, c.Master, strictSSH+"node4 hostname"); strings.TrimSpace(out) != "node4" {
			t.Errorf("ssh node4 hostname after power-on = %q", out)
		}
		if err := c.WaitDaemon(ctx, "node4"); err != nil {
			t.Errorf("boot hook did not start the daemon again: %v", err)
		}
	})

	t.Run("power-off breaks an in-flight session", func(t *testing.T) {
		ctx := t.Context()
		type outcome struct {
			res cluster.Result
			err error
			at  time.Time
		}
		done := make(chan outcome, 1)
		go func() {
			res, err := c.Shell(ctx, c.Master, "ssh -o BatchMode=yes -o ServerAliveInterval=1 -o ServerAliveCountMax=3 node3 sleep 60")
			done <- outcome{res, err, time.Now()}
		}()
		eventually(t, 10*time.Second, "session running on node3", func() bool {
			return shell(t, c, "node3", "pgrep -x sleep").ExitCode == 0
		})
		off := time.Now()
		if err := c.PowerOff(ctx, "node3"); err != nil {
			t.Fatal(err)
		}
		select {
		case o := <-done:
			elapsed := o.at.Sub(off)
			t.Logf("in-flight session failed %s after power-off began", elapsed.Round(10*time.Millisecond))
			if o.err != nil || o.res.ExitCode == 0 {
				t.Errorf("in-flight session ended with %v, exit %d; want an ssh failure", o.err, o.res.ExitCode)
			}
			if elapsed > 15*time.Second {
				t.Errorf("in-flight session failed %s after power-off, want under 15s", elapsed)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("in-flight session still hangs 30s after power-off")
		}
		if err := c.PowerOn(ctx, "node3"); err != nil {
			t.Fatal(err)
		}
		mustShell(t, c, c.Master, strictSSH+"node3 true")
	})

	t.Run("attach finds the cluster", func(t *testing.T) {
		got, err := cluster.Attach(t.Context(), c.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Nodes, c.Nodes) || got.Master != c.Master || got.Subnet != c.Subnet {
			t.Errorf("Attach(%s) = %+v master %s subnet %s, want %+v master %s subnet %s",
				c.Name, got.Nodes, got.Master, got.Subnet, c.Nodes, c.Master, c.Subnet)
		}
		if _, err := cluster.Attach(t.Context(), c.Name+"-none"); !cluster.IsNotFound(err) {
			t.Errorf("Attach(unknown) error = %v, want IsNotFound", err)
		}
	})

	t.Run("down leaves nothing", func(t *testing.T) {
		ctx := t.Context()
		if err := c.Down(ctx); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"ps", "-aq", "--filter", "label=cutover.cluster=" + c.Name},
			{"network", "ls", "-q", "--filter", "label=cutover.cluster=" + c.Name},
		} {
			out, err := exec.CommandContext(ctx, "docker", args...).Output()
			if err != nil {
				t.Fatalf("docker %s: %v", strings.Join(args, " "), err)
			}
			if s := strings.TrimSpace(string(out)); s != "" {
				t.Errorf("docker %s after Down = %q, want nothing", strings.Join(args, " "), s)
			}
		}
		if err := c.Down(ctx); err != nil {
			t.Errorf("second Down = %v, want nil", err)
		}
	})
}

// TestStartRefusesBadOptions checks that bad options are refused before anything is made.
func TestStartRefusesBadOptions(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, opts := range []cluster.Options{
		{},
		{Name: "Bad Name"},
		{Name: "ok", Missing: map[string][]string{"node9": {"1.2.0"}}},
	} {
		if c, err := cluster.Start(ctx, opts); err == nil {
			c.Down(ctx)
			t.Errorf("Start(%+v) = nil error, want a refusal", opts)
		}
	}
}
