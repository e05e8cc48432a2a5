package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/test/cluster"
)

// guideStep matches a shell block of docs/guide.md marked as a step of "Trying it in
// containers": <!-- example: containers STEP -->.
var guideStep = regexp.MustCompile("(?s)<!-- example: containers ([a-z]+) -->\n```sh\n(.*?)```")

// guideSteps are the chapter's steps, in the order the guide gives them.
var guideSteps = []string{"up", "build", "config", "install", "upgrade", "downgrade", "down"}

// guideName is the line of the guide's first step that names the cluster; the test gives its
// cluster a name of its own instead, so that it never touches a cluster of the reader's.
const guideName = "export NAME=shop\n"

// TestGuideContainers runs the guide's "Trying it in containers" as written, through the
// Makefile's targets: a bare cluster of two nodes, shop 2.3.1 installed by hand, 2.4.0 staged and
// switched to by cutover; then checks the outcome (both nodes' links at 2.4.0, the config
// migrated, shopd 2.4.0 serving, no demo application anywhere, the run done in the journal);
// runs the downgrade step and checks the same at 2.3.1; and runs the last step, which removes
// the cluster and the work directory.
func TestGuideContainers(t *testing.T) {
	t.Parallel()
	cluster.Require(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "docs/guide.md"))
	if err != nil {
		t.Fatal(err)
	}
	steps := map[string]string{}
	var order []string
	for _, m := range guideStep.FindAllStringSubmatch(string(data), -1) {
		steps[m[1]] = m[2]
		order = append(order, m[1])
	}
	if !slices.Equal(order, guideSteps) {
		t.Fatalf("docs/guide.md has the container steps %q, want %q", order, guideSteps)
	}
	name := cluster.Name(t.Name())
	if strings.Count(steps["up"], guideName) != 1 {
		t.Fatalf("the guide's first container step does not name the cluster with %q:\n%s", guideName, steps["up"])
	}
	steps["up"] = strings.Replace(steps["up"], guideName, "export NAME="+name+"\n", 1)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if c, err := cluster.Attach(ctx, name); err == nil {
			if err := c.Down(ctx); err != nil {
				t.Errorf("remove cluster %s: %v", name, err)
			}
		}
	})

	tmp := t.TempDir()
	var script []string
	for _, step := range guideSteps[:len(guideSteps)-2] {
		script = append(script, steps[step])
	}
	out := runGuide(t, root, tmp, nil, strings.Join(script, "\n"))
	for _, want := range []string{"would proceed", "done: shop 2.4.0 on 2 nodes"} {
		if !strings.Contains(out, want) {
			t.Errorf("the guide's steps printed no %q", want)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := cluster.Attach(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Nodes) != 2 {
		t.Errorf("the guide's cluster has %d nodes, want 2", len(c.Nodes))
	}
	for _, n := range c.Nodes {
		checkShopNode(t, c, n.Name, "2.4.0")
	}
	checkRunComplete(t, c, "2.3.1", "2.4.0")

	out = runGuide(t, root, tmp, []string{"NAME=" + name}, steps["downgrade"])
	if !strings.Contains(out, "done: shop 2.3.1 on 2 nodes") {
		t.Errorf("the guide's downgrade step printed no done: shop 2.3.1 on 2 nodes")
	}
	for _, n := range c.Nodes {
		checkShopNode(t, c, n.Name, "2.3.1")
	}
	checkRunComplete(t, c, "2.4.0", "2.3.1")

	// The last step removes the cluster and $work, which the test hands on as the reader's
	// shell would: the one directory mktemp made (tmp.XXXXXXXXXX; go run's are go-build*).
	works, err := filepath.Glob(filepath.Join(tmp, "tmp.*"))
	if err != nil || len(works) != 1 {
		t.Fatalf("the guide's steps made the directories %q in $TMPDIR (%v), want $work alone", works, err)
	}
	work := works[0]
	runGuide(t, root, tmp, []string{"NAME=" + name, "work=" + work}, steps["down"])
	if _, err := cluster.Attach(ctx, name); !cluster.IsNotFound(err) {
		t.Errorf("after the guide's last step, cluster %s: %v, want it removed", name, err)
	}
	if _, err := os.Stat(work); !os.IsNotExist(err) {
		t.Errorf("after the guide's last step, %s: %v, want it removed", work, err)
	}
}

// checkShopNode checks that node runs shop version (2.3.1 or 2.4.0) as the guide says it
// will: links, config in the version's schema, daemon, and nothing of the demo application.
func checkShopNode(t *testing.T, c *cluster.Cluster, node, version string) {
	t.Helper()
	if got, want := must(t, c, node, "readlink /etc/shop/lib /etc/shop/share"), "/usr/lib/shop/"+version+"\n/usr/share/shop/"+version; got != want {
		t.Errorf("%s: the links point to %q, want %q", node, got, want)
	}
	var config struct {
		Version  string  `json:"version"`
		QueueDir *string `json:"queue_dir"`
		Queue    struct {
			Path string `json:"path"`
		} `json:"queue"`
	}
	text := must(t, c, node, "cat /var/lib/shop/config.json")
	if err := json.Unmarshal([]byte(text), &config); err != nil {
		t.Fatalf("%s: shop's config: %v\n%s", node, err, text)
	}
	const queue = "/var/lib/shop/queue"
	migrated := config.Queue.Path == queue && config.QueueDir == nil
	if version == "2.3.1" {
		migrated = config.Queue.Path == "" && config.QueueDir != nil && *config.QueueDir == queue
	}
	if config.Version != version || !migrated {
		t.Errorf("%s: shop's config is %s, want version %s in its schema (2.4: queue.path, 2.3: queue_dir)", node, text, version)
	}
	if res := sh(t, c, node, "/usr/lib/shop/default/usr/sbin/shopctl ready"); res.ExitCode != 0 {
		t.Errorf("%s: shopctl ready: exit %d, want shopd running", node, res.ExitCode)
	}
	if got, want := must(t, c, node, "tail -n 1 /var/log/shop.log"), "shopd "+version+" serving"; got != want {
		t.Errorf("%s: shop's log ends with %q, want %q", node, got, want)
	}
	if res := sh(t, c, node, "ls -d /usr/lib/demoapp /etc/demoapp /etc/boot.d/demoapp"); res.ExitCode == 0 {
		t.Errorf("%s: a bare cluster's node holds the demo application:\n%s", node, res.Stdout)
	}
}

// runGuide runs script with bash -eu in the source tree root, as a reader's shell would, with
// $TMPDIR at tmp and env added, and fails the test unless it exits 0. It returns the output.
func runGuide(t *testing.T, root, tmp string, env []string, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-eu", "-c", script)
	cmd.Dir = root
	cmd.WaitDelay = 5 * time.Second
	// Not make's variables of a make test around this one: the guide's make runs on its own.
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains([]string{"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "NAME", "work", "TMPDIR"}, k) {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(append(cmd.Env, "TMPDIR="+tmp), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("the guide's steps, in %s:\n%s", time.Since(start).Round(time.Millisecond), out.String())
	if err != nil {
		t.Fatalf("the guide's steps: %v", err)
	}
	return out.String()
}
