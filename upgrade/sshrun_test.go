package upgrade_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/nodes/sshdtest"
	"github.com/cutover/cutover/upgrade/upgradetest"
)

// sshCluster is a cluster whose master is this host, reached locally, and whose other nodes
// are real sshd servers on 127.0.0.1 (node2, node3, ...). Every node shares this machine's
// file system, so they all see one side-by-side installation of the application "app" in
// versions 1.0.0 and 1.1.0 under one directory; the nodes switch its links over SFTP as the
// sshd login.
type sshCluster struct {
	root string   // the installation's root; every configured path lies under it
	cfg  string   // the cutover.toml
	env  []string // variables every cutover run gets besides the test's own (NAME=value)
}

// newSSHCluster installs the application under a directory owned by the servers' login and
// writes a cutover.toml for the master and every server, worked on parallel at a time. All
// application commands are no-ops.
//
// The nodes share one set of links, so with parallel > 1 they switch the same links at
// once, which no real cluster does; layout's switch copes with it.
func newSSHCluster(tb testing.TB, c *sshdtest.Cluster, parallel int) *sshCluster {
	tb.Helper()
	// The nodes write the tree as the login, so the tree lives in a directory it can reach.
	root := c.UserDir(tb)
	sc := &sshCluster{root: root, cfg: filepath.Join(root, "cutover.toml")}
	for _, v := range []string{"1.0.0", "1.1.0"} {
		sc.mkdir(tb, "usr/lib/app/"+v+"/usr/sbin")
		sc.mkdir(tb, "usr/share/app/"+v+"/cutover/migrations")
		sc.write(tb, "usr/share/app/"+v+"/VERSION", v+"\n")
	}
	// 1.1 renames /name to /title; the 1.1.0 tree ships the step.
	sc.write(tb, "usr/share/app/1.1.0/cutover/migrations/1.0-1.1.json",
		`{"from":"1.0","to":"1.1","up":[{"op":"move","from":"/name","path":"/title"}],"down":[{"op":"move","from":"/title","path":"/name"}]}`)
	sc.mkdir(tb, "etc/app")
	for _, link := range []string{"lib", "share"} {
		if err := os.Symlink(sc.tree(link, "1.0.0"), sc.path("etc/app/"+link)); err != nil {
			tb.Fatal(err)
		}
	}
	sc.mkdir(tb, "var/lib/app")
	sc.write(tb, "var/lib/app/config.json", "{\n  \"name\": \"demo\",\n  \"version\": \"1.0.0\"\n}\n")
	chownTree(tb, root, c.User)
	// The version trees are the package manager's: root's, as cutover requires of the
	// migration files it trusts. The nodes only read them.
	if err := filepath.WalkDir(filepath.Join(root, "usr"), func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 0, 0)
	}); err != nil {
		tb.Fatal(err)
	}

	host, err := os.Hostname()
	if err != nil {
		tb.Fatal(err)
	}
	conf := upgradetest.TOML{Root: root, Master: host,
		SSH: &upgradetest.TOMLSSH{User: c.User, IdentityFile: c.IdentityFile, KnownHosts: c.KnownHosts, Parallel: parallel}}
	for i, s := range c.Servers {
		conf.Nodes = append(conf.Nodes, upgradetest.TOMLNode{Name: fmt.Sprintf("node%d", i+2), Address: s.Addr, Port: s.Port})
	}
	for _, k := range []string{"daemons_stop", "daemons_start", "queue_drain", "queue_undrain", "queue_busy", "reconciler_pause",
		"reconciler_continue", "ensure_dirs", "post_upgrade", "verify"} {
		command := "true"
		if k == "queue_busy" {
			command = "echo 0"
		}
		conf.Commands = append(conf.Commands, [2]string{k, command})
	}
	config := conf.Render()
	if err := os.WriteFile(sc.cfg, []byte(config), 0o600); err != nil {
		tb.Fatal(err)
	}
	return sc
}

func (sc *sshCluster) path(rel string) string { return filepath.Join(sc.root, rel) }

// tree is the root-prefixed directory of one version's lib or share tree: what the link of
// that name points to while the version is live.
func (sc *sshCluster) tree(link, version string) string {
	return sc.path("usr/" + link + "/app/" + version)
}

func (sc *sshCluster) mkdir(tb testing.TB, rel string) {
	tb.Helper()
	if err := os.MkdirAll(sc.path(rel), 0o755); err != nil {
		tb.Fatal(err)
	}
}

func (sc *sshCluster) write(tb testing.TB, rel, data string) {
	tb.Helper()
	if err := os.WriteFile(sc.path(rel), []byte(data), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// ownLinks gives every node of c, whose servers run WithOwnProcesses, a links directory of its
// own holding the links at 1.0.0, as the nodes of a real cluster have; the master keeps this
// host's. Nodes that share one links directory switch the same links at once, and one node's
// switch may remove the temporary link of another's that it takes for a dead run's leftover,
// failing the other's rename: a benchmark's 64 or 256 nodes do that now and then.
func (sc *sshCluster) ownLinks(tb testing.TB, c *sshdtest.Cluster) {
	tb.Helper()
	for _, d := range c.Bind(tb, sc.path("etc/app")) {
		for _, link := range []string{"lib", "share"} {
			if err := os.Symlink(sc.tree(link, "1.0.0"), filepath.Join(d, link)); err != nil {
				tb.Fatal(err)
			}
		}
		chownTree(tb, d, c.User)
	}
}

// chownTree gives root and everything below it to the user called name.
func chownTree(tb testing.TB, root, name string) {
	tb.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		tb.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	err = filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// checkAt returns an error unless both links point at version's trees and the application's
// config is at version, with the field the version names it by.
func (sc *sshCluster) checkAt(version string) error {
	var problems []string
	for _, link := range []string{"lib", "share"} {
		got, err := os.Readlink(sc.path("etc/app/" + link))
		if want := sc.tree(link, version); err != nil || got != want {
			problems = append(problems, fmt.Sprintf("link %s -> %q (%v), want %q", link, got, err, want))
		}
	}
	data, err := os.ReadFile(sc.path("var/lib/app/config.json"))
	var conf map[string]any
	if err == nil {
		err = json.Unmarshal(data, &conf)
	}
	field := map[string]string{"1.0.0": "name", "1.1.0": "title"}[version]
	if err != nil || conf["version"] != version || conf[field] != "demo" {
		problems = append(problems, fmt.Sprintf("config = %s (%v), want version %s with %q", data, err, version, field))
	}
	if len(problems) > 0 {
		return fmt.Errorf("cluster not at %s: %s", version, strings.Join(problems, "; "))
	}
	return nil
}

// buildCutover builds the cutover binary into a temporary directory and returns its path.
func buildCutover(tb testing.TB) string {
	tb.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("the go command is needed to build cutover: %v", err)
		}
		tb.Skipf("the go command is needed to build cutover: %v", err)
	}
	bin := filepath.Join(tb.TempDir(), "cutover")
	out, err := exec.Command(gobin, "build", "-o", bin, "github.com/cutover/cutover/cmd/cutover").CombinedOutput()
	if err != nil {
		tb.Fatalf("go build cutover: %v\n%s", err, out)
	}
	return bin
}

// cutoverRun is one finished cutover process.
type cutoverRun struct {
	args           []string
	code           int
	stdout, stderr string
	wall           time.Duration
	maxRSS         int64         // peak resident set size in bytes
	cpu            time.Duration // user and system CPU time
}

// String describes the run for a failure message.
func (r cutoverRun) String() string {
	return fmt.Sprintf("cutover %s: exit %d after %v\nstdout:\n%s\nstderr:\n%s",
		strings.Join(r.args, " "), r.code, r.wall.Round(time.Millisecond), r.stdout, r.stderr)
}

// cutover runs the binary bin on the cluster's config, without a terminal or an ssh-agent, and
// measures its wall time and peak memory.
func (sc *sshCluster) cutover(ctx context.Context, tb testing.TB, bin string, args ...string) cutoverRun {
	tb.Helper()
	args = append([]string{"--config", sc.cfg}, args...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(cutoverEnv(), sc.env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	run := cutoverRun{args: args, wall: time.Since(start), stdout: stdout.String(), stderr: stderr.String()}
	if cmd.ProcessState == nil {
		tb.Fatalf("cutover %s: %v", strings.Join(args, " "), err)
	}
	run.code = cmd.ProcessState.ExitCode()
	run.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		run.maxRSS = ru.Maxrss * 1024 // KiB on Linux
	}
	return run
}

// cutoverEnv is this process's environment without an ssh-agent or cutover's own variables,
// for a cutover child that should see neither.
func cutoverEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "SSH_AUTH_SOCK=") || strings.HasPrefix(kv, "CUTOVER_")
	})
}

// TestUpgradeOverSSH runs the real binary through the whole stage machine on the master and
// three sshd nodes: up to 1.1.0 and back down to 1.0.0, each run switching the links over
// SFTP, migrating the config and copying it to the nodes; then the same with nodes whose sshd
// has no SFTP subsystem, where the file operations go over plain commands.
func TestUpgradeOverSSH(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		name string
		opts []sshdtest.Option
	}{
		{"sftp", nil},
		{"without-sftp", []sshdtest.Option{sshdtest.WithoutSFTP()}},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			testUpgradeOverSSH(t, sshdtest.Start(t, 3, v.opts...))
		})
	}
}

func testUpgradeOverSSH(t *testing.T, c *sshdtest.Cluster) {
	// All nodes at once, as a real run: they share their links (see newSSHCluster), which
	// also proves that concurrent switches of one directory do not trip over each other.
	sc := newSSHCluster(t, c, 32)
	bin := buildCutover(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	steps := []struct {
		to, from string
		dir      string
	}{
		{to: "1.1.0", from: "1.0.0", dir: "upgrade"},
		{to: "1.0.0", from: "1.1.0", dir: "downgrade"},
	}
	for _, step := range steps {
		run := sc.cutover(ctx, t, bin, "upgrade", "--to="+step.to, "--yes")
		if run.code != 0 {
			t.Fatalf("%s: exit %d, want 0\n%v", step.dir, run.code, run)
		}
		t.Logf("%s took %v, peak RSS %.1f MB", step.dir, run.wall.Round(time.Millisecond), float64(run.maxRSS)/1e6)
		if err := sc.checkAt(step.to); err != nil {
			t.Fatalf("after the %s: %v\n%v", step.dir, err, run)
		}
		if want := "done: app " + step.to + " on 4 nodes"; !strings.Contains(run.stdout, want) {
			t.Errorf("%s output lacks %q:\n%s", step.dir, want, run.stdout)
		}
	}
	if _, err := os.Stat(sc.path("state/intent.json")); !os.IsNotExist(err) {
		t.Errorf("intent after two finished runs: %v, want none", err)
	}

	runs, err := journal.NewStore(sc.path("state/journal.db")).Runs(ctx)
	if err != nil {
		t.Fatalf("journal runs: %v", err)
	}
	if len(runs) != len(steps) {
		t.Fatalf("journal has %d runs, want %d: %+v", len(runs), len(steps), runs)
	}
	host, _ := os.Hostname()
	wantNodes := []string{host, "node2", "node3", "node4"}
	slices.Sort(wantNodes)
	// Every node is this host: each stop records its boot identity, the one the stop ran in
	// (read by the node's command shell, or from the files on the master).
	id, err1 := os.ReadFile("/proc/sys/kernel/random/boot_id")
	stat, err2 := os.ReadFile("/proc/1/stat")
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	wantBoot := strings.TrimSpace(string(id)) + "/" + strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))[19]
	for i, step := range steps {
		r := runs[i]
		for _, n := range wantNodes {
			if got := r.Facts["boot."+n]; got != wantBoot {
				t.Errorf("run %d: boot identity of %s = %q, want %q", r.ID, n, got, wantBoot)
			}
		}
		if r.Outcome != journal.Succeeded || r.From != step.from || r.To != step.to || r.Direction != step.dir {
			t.Errorf("journal run %d = %s %s -> %s, outcome %q; want %s %s -> %s, outcome %q",
				r.ID, r.Direction, r.From, r.To, r.Outcome, step.dir, step.from, step.to, journal.Succeeded)
		}
		ev, ok := r.LastEvent("switch")
		if !ok || ev.State != journal.Done {
			t.Errorf("run %d: switch stage = %+v, want done", r.ID, ev)
			continue
		}
		var switched []string
		for _, nr := range ev.Nodes {
			if nr.OK {
				switched = append(switched, nr.Node)
			}
		}
		slices.Sort(switched)
		if !slices.Equal(switched, wantNodes) {
			t.Errorf("run %d: switch succeeded on %v, want %v", r.ID, switched, wantNodes)
		}
	}
}
