package ganeti

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The cluster's names, as ganeti-cluster creates them.
const (
	domain = "ganeti.test"
	master = "node1"
)

// nodeNames are the cluster's nodes, the master first.
var nodeNames = []string{"node1", "node2", "node3"}

// cluster is a running Ganeti test cluster.
type cluster struct {
	name string
}

// result is the outcome of a command run on a node.
type result struct {
	stdout, stderr string
	code           int
}

// output is stdout and stderr together, for failure messages.
func (r result) output() string { return r.stdout + r.stderr }

// startCluster starts the cluster for a test and removes it when the test ends. Without Docker
// or debootstrap (when the image is not built yet) the test is skipped, unless CI is "true":
// then it fails.
func startCluster(t testing.TB) *cluster {
	t.Helper()
	if err := prerequisites(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("ganeti test cluster: %v", err)
		}
		t.Skipf("ganeti test cluster: %v (with CI=true this is a failure)", err)
	}
	wd, _ := os.Getwd()
	h := fnv.New32a()
	h.Write([]byte(wd))
	c := &cluster{name: fmt.Sprintf("ct-ganeti-%06x", h.Sum32()&0xffffff)}
	dir := t.TempDir()
	bin := filepath.Join(dir, "cutover")
	build := exec.Command("go", "build", "-o", bin, "./cmd/cutover")
	build.Dir = "../.."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build cutover: %v\n%s", err, out)
	}
	config := filepath.Join(dir, "cutover.toml")
	if err := os.WriteFile(config, testConfig(t), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.logNodes(t)
		}
		if _, err := c.script("down"); err != nil {
			t.Errorf("ganeti test cluster: %v", err)
		}
	})
	start := time.Now()
	if out, err := c.script("up", bin, config); err != nil {
		t.Fatalf("ganeti test cluster: up: %v\n%s", err, out)
	}
	t.Logf("cluster %s up in %s", c.name, time.Since(start).Round(time.Second))
	start = time.Now()
	if out, err := c.script("snapshot"); err != nil {
		t.Fatalf("ganeti test cluster: snapshot: %v\n%s", err, out)
	}
	t.Logf("snapshot in %s", time.Since(start).Round(time.Second))
	return c
}

// verifyCommand is gnt-cluster verify as the test cluster runs it: it ignores ENODESETUP,
// which every container reports (this kernel has no /proc/sysrq-trigger), and it is tried
// again, up to three times in all, when it failed only because one of Ganeti's own internal
// timeouts ran out on a starved machine: its only errors are RPCs to a noded that timed out
// ("Communication failure ... SSL connection timeout": a noded forks a Python child per
// request, which must finish the TLS handshake within Ganeti's 5 s connect timeout), or its
// job never started ("Timeout in reading a response": luxid gives the job process it forks
// 30 s to report). On a shared 2-core machine under a load of 60 both happened, each once in
// three runs. Any other error fails at once, as the stock verify does. A failure repeats its
// ERROR lines last, where the tail of the output that cutover's message quotes shows them.
const verifyCommand = `i=1; while :; do ` +
	`out=$(/usr/sbin/gnt-cluster verify --ignore-errors=ENODESETUP 2>&1) && { printf '%s\n' "$out"; exit 0; }; ` +
	`printf '%s\n' "$out" >&2; errs=$(printf '%s\n' "$out" | grep -e '- ERROR:'); ` +
	`fail() { printf 'verify failed (attempt %s of 3): %s\n' $i "${errs:-no ERROR line}" >&2; exit 1; }; ` +
	`if [ -n "$errs" ]; then printf '%s\n' "$errs" | grep -qv 'Communication failure' && fail; ` +
	`else printf '%s\n' "$out" | grep -q 'failed to start: .*Timeout in reading a response' || fail; fi; ` +
	`[ $i -lt 3 ] || fail; ` +
	`echo "verify: only a Ganeti timeout (attempt $i of 3): again in 10 s" >&2; i=$((i + 1)); sleep 10; done`

// testConfig is docs/examples/ganeti.toml, the drop-in config, with one change: verify is
// verifyCommand.
func testConfig(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile("../../docs/examples/ganeti.toml")
	if err != nil {
		t.Fatal(err)
	}
	const stock = `verify = "/usr/sbin/gnt-cluster verify"`
	if !bytes.Contains(data, []byte(stock)) {
		t.Fatalf("docs/examples/ganeti.toml has no line %s", stock)
	}
	return bytes.Replace(data, []byte(stock), []byte("verify = '''"+verifyCommand+"'''"), 1)
}

// prerequisites checks that this machine can run the cluster.
func prerequisites() error {
	if _, err := exec.LookPath("docker"); err != nil {
		return errors.New("docker is not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		return fmt.Errorf("the Docker daemon does not answer: %s", strings.TrimSpace(string(out)))
	}
	tag, err := exec.Command("image/build.sh", "--tag").Output()
	if err != nil {
		return fmt.Errorf("image/build.sh --tag: %w", err)
	}
	if exec.Command("docker", "image", "inspect", strings.TrimSpace(string(tag))).Run() == nil {
		return nil
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		if _, err := os.Stat("/usr/sbin/debootstrap"); err != nil {
			return errors.New("debootstrap is not installed (make deps)")
		}
	}
	return nil
}

// script runs ganeti-cluster with the cluster's name and args.
func (c *cluster) script(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "./ganeti-cluster", append([]string{c.name}, args...)...).CombinedOutput()
	return string(out), err
}

// restore puts the cluster back to the snapshot startCluster took.
func (c *cluster) restore(t testing.TB) {
	t.Helper()
	start := time.Now()
	if out, err := c.script("restore"); err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	t.Logf("restored in %s", time.Since(start).Round(time.Second))
}

// run runs a shell command on a node. Only a failure of Docker itself is fatal.
func (c *cluster) run(t testing.TB, node, command string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", "exec", c.name+"-"+node, "sh", "-c", command)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	if errors.As(err, &exit) && !strings.HasPrefix(res.stderr, "Error response from daemon") {
		res.code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: docker exec: %v: %s", node, err, res.stderr)
	}
	return res
}

// must runs a shell command on a node that must exit 0 and returns its stdout.
func (c *cluster) must(t testing.TB, node, command string) string {
	t.Helper()
	res := c.run(t, node, command)
	if res.code != 0 {
		t.Fatalf("%s: %s: exit %d\n%s", node, command, res.code, res.output())
	}
	return res.stdout
}

// waitFor waits until command exits 0 on the master.
func (c *cluster) waitFor(t testing.TB, command string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for c.run(t, master, command).code != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %s", command, limit)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// waitHeld waits until the cutover run started in the background (its output in
// /tmp/upgrade.log, its exit status written to /tmp/upgrade.rc) is held as stage starts. A run
// that exits before it gets there fails the test at once, with what it said.
func (c *cluster) waitHeld(t testing.TB, stage string) {
	t.Helper()
	const limit = 20 * time.Minute
	deadline := time.Now().Add(limit)
	pause := 250 * time.Millisecond
	for c.run(t, master, "test -e /tmp/hold/reached/"+stage).code != 0 {
		if c.run(t, master, "test -s /tmp/upgrade.rc").code == 0 {
			// It may have reached the hold between the two looks, then failed.
			if c.run(t, master, "test -e /tmp/hold/reached/"+stage).code == 0 {
				return
			}
			rc := strings.TrimSpace(c.must(t, master, "cat /tmp/upgrade.rc"))
			t.Fatalf("cutover exited %s before it was held at %s:\n%s", rc, stage, c.must(t, master, "cat /tmp/upgrade.log"))
		}
		if time.Now().After(deadline) {
			t.Fatalf("cutover not held at %s after %s", stage, limit)
		}
		// Each look is a docker exec, about a quarter of a second of CPU: the pause grows
		// to 2 s over a long wait, so that the wait does not starve the cluster it waits for.
		time.Sleep(pause)
		pause = min(2*pause, 2*time.Second)
	}
}

// reboot restarts a node's container at once, as a power cycle does.
func (c *cluster) reboot(t testing.TB, node string) {
	t.Helper()
	if out, err := c.script("reboot", node); err != nil {
		t.Fatalf("reboot %s: %v\n%s", node, err, out)
	}
}

// logNodes logs what the master said, to explain a failure.
func (c *cluster) logNodes(t testing.TB) {
	res := c.run(t, master, "tail -n 40 /var/log/cutover-resume.log /var/log/boot.log 2>/dev/null; "+
		"/usr/sbin/cutover journal 2>&1 | tail -n 5; tail -n 60 $(ls -t /var/lib/cutover/log/* 2>/dev/null | head -n 1) 2>/dev/null")
	t.Logf("master:\n%s", res.output())
}
