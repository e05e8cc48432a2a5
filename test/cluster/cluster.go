package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Docker labels that mark a cluster's containers and network, so that [Attach] and
// [Cluster.Down] find them again from another process.
const (
	labelCluster = "cutover.cluster"
	labelNode    = "cutover.node"
	labelAddress = "cutover.address"
	labelMaster  = "cutover.master"
	labelSubnet  = "cutover.subnet"
)

// Paths on the nodes.
const (
	cutoverPath = "/usr/sbin/cutover"
	debPath     = "/var/cache/cutover.deb" // the package, staged on the master until dpkg -i installs it
	demoappPath = "/usr/lib/demoapp/default/usr/sbin/demoapp"
	hostKeyPub  = "/etc/ssh/ssh_host_ed25519_key.pub"
	knownHosts  = "/root/.ssh/known_hosts"
)

// Node is one machine of a cluster.
type Node struct {
	Name      string // nodeK
	Address   string // 10.77.N.(10+K)
	Container string // the Docker container, <cluster>-nodeK
}

// Cluster is a running set of nodes. Its methods are safe for concurrent use.
type Cluster struct {
	Name   string // the cluster's name, also its Docker network
	Master string // the master node's name (node1)
	Subnet string // the network's subnet, 10.77.N.0/24
	Nodes  []Node // every node, master first

	logf    func(format string, args ...any)
	release func() // drops this process's hold on built binaries; nil when there is none
	once    sync.Once
}

// Result is the outcome of a command run on a node.
type Result struct {
	Stdout   string
	Stderr   string
	ExitCode int
}

// Err returns nil when the command exited 0, and otherwise an error with its exit code and
// the last line of its stderr.
func (r Result) Err() error {
	if r.ExitCode == 0 {
		return nil
	}
	return fmt.Errorf("exit code %d: %s", r.ExitCode, lastLine(r.Stderr))
}

// errNotFound marks a cluster name with no containers.
var errNotFound = errors.New("no such cluster")

// IsNotFound reports whether err says that no cluster of that name runs on this machine.
func IsNotFound(err error) bool { return errors.Is(err, errNotFound) }

// Start starts a cluster: the node image (built once, then cached), a network, one container
// per node with the demo application staged before its first boot (none when opts.Bare), root's
// SSH key on the master and known_hosts for every node, and cutover's package installed on the
// master with dpkg -i. It returns when every node's sshd accepts the master's key and every
// demo daemon runs. Leftovers of an earlier
// cluster of the same name are removed first; on failure, Start removes what it made.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	opts, err = opts.withDefaults()
	if err != nil {
		return nil, err
	}
	logf := opts.Logf
	begin := time.Now()

	// The image and the binaries do not depend on each other: make them at the same time.
	var (
		image string
		art   *artifacts
		wg    sync.WaitGroup
		ierr  error
		aerr  error
		c     = &Cluster{Name: opts.Name, Master: nodeName(1), logf: logf}
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		t := time.Now()
		image, ierr = ensureImage(ctx)
		if ierr == nil {
			logf("cluster %s: image %s ready in %s", opts.Name, image, since(t))
		}
	}()
	go func() {
		defer wg.Done()
		t := time.Now()
		art, c.release, aerr = acquireArtifacts(ctx, opts.Package, !opts.Bare)
		if aerr == nil {
			logf("cluster %s: binaries ready in %s", opts.Name, since(t))
		}
	}()
	wg.Wait()
	if err := errors.Join(ierr, aerr); err != nil {
		if c.release != nil {
			c.release()
		}
		return nil, fmt.Errorf("cluster %s: %w", opts.Name, err)
	}
	defer func() {
		if err != nil {
			derr := c.Down(context.WithoutCancel(ctx))
			err = errors.Join(err, derr)
		}
	}()

	t := time.Now()
	if err := removeCluster(ctx, opts.Name); err != nil {
		return nil, err
	}
	subnet, prefix, err := createNetwork(ctx, opts.Name)
	if err != nil {
		return nil, err
	}
	c.Subnet = subnet
	for k := 1; k <= opts.Nodes; k++ {
		c.Nodes = append(c.Nodes, Node{
			Name:      nodeName(k),
			Address:   fmt.Sprintf("%s.%d", prefix, 10+k),
			Container: fmt.Sprintf("%s-%s", opts.Name, nodeName(k)),
		})
	}
	logf("cluster %s: network %s on %s in %s", opts.Name, opts.Name, subnet, since(t))

	t = time.Now()
	key, err := newMasterKey("root@" + c.Master)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", opts.Name, err)
	}
	specs := opts.specs(c.Nodes)
	err = forEach(c.Nodes, func(i int, n Node) error {
		if err := c.create(ctx, image, n); err != nil {
			return err
		}
		return c.stage(ctx, n, art, specs[i], key)
	})
	if err != nil {
		return nil, err
	}
	logf("cluster %s: %d containers created and staged in %s", opts.Name, len(c.Nodes), since(t))

	t = time.Now()
	names := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		names[i] = n.Container
	}
	if _, err := docker(ctx, nil, append([]string{"start"}, names...)...); err != nil {
		return nil, fmt.Errorf("cluster %s: start containers: %w", opts.Name, err)
	}
	if err := c.writeKnownHosts(ctx); err != nil {
		return nil, err
	}
	err = forEach(c.Nodes, func(_ int, n Node) error { return c.WaitSSH(ctx, n.Name) })
	if err != nil {
		return nil, err
	}
	logf("cluster %s: %d nodes booted, sshd answers, in %s", opts.Name, len(c.Nodes), since(t))

	t = time.Now()
	if err := c.installPackage(ctx); err != nil {
		return nil, err
	}
	logf("cluster %s: cutover's package installed on %s in %s", opts.Name, c.Master, since(t))

	if opts.Bare {
		logf("cluster %s: bare, without an application; cluster up in %s", opts.Name, since(begin))
		return c, nil
	}
	t = time.Now()
	err = forEach(c.Nodes, func(_ int, n Node) error { return c.WaitDaemon(ctx, n.Name) })
	if err != nil {
		return nil, err
	}
	logf("cluster %s: demo daemons running in %s; cluster up in %s", opts.Name, since(t), since(begin))
	return c, nil
}

// Attach finds the running (or stopped) cluster called name through its Docker labels. The
// returned Cluster holds nothing of this process: Down on it removes the cluster all the same.
func Attach(ctx context.Context, name string) (*Cluster, error) {
	format := strings.Join([]string{
		"{{.Names}}",
		`{{.Label "` + labelNode + `"}}`,
		`{{.Label "` + labelAddress + `"}}`,
		`{{.Label "` + labelMaster + `"}}`,
		`{{.Label "` + labelSubnet + `"}}`,
	}, "\t")
	out, err := docker(ctx, nil, "ps", "-a", "--filter", "label="+labelCluster+"="+name, "--format", format)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: list containers: %w", name, err)
	}
	c := &Cluster{Name: name, logf: func(string, ...any) {}}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 5 {
			continue
		}
		c.Nodes = append(c.Nodes, Node{Name: f[1], Address: f[2], Container: f[0]})
		c.Master, c.Subnet = f[3], f[4]
	}
	if len(c.Nodes) == 0 {
		return nil, fmt.Errorf("cluster %s: %w", name, errNotFound)
	}
	sort.Slice(c.Nodes, func(i, j int) bool {
		a, _ := nodeNumber(c.Nodes[i].Name)
		b, _ := nodeNumber(c.Nodes[j].Name)
		return a < b
	})
	return c, nil
}

// Down removes the cluster's containers and network and what this process built for it. It
// is idempotent: a cluster already gone is no error.
func (c *Cluster) Down(ctx context.Context) error {
	c.once.Do(func() {
		if c.release != nil {
			c.release()
		}
	})
	t := time.Now()
	if err := removeCluster(ctx, c.Name); err != nil {
		return err
	}
	c.logf("cluster %s: down in %s", c.Name, since(t))
	return nil
}

// Detach releases what this process holds for the cluster (its temporary build directory) and
// leaves the cluster running, for a tool that starts a cluster and exits.
func (c *Cluster) Detach() {
	c.once.Do(func() {
		if c.release != nil {
			c.release()
		}
	})
}

// Node returns the node called name.
func (c *Cluster) Node(name string) (Node, error) {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n, nil
		}
	}
	return Node{}, fmt.Errorf("cluster %s: no node %q", c.Name, name)
}

// Exec runs argv on node through docker exec. The error reports a failure of Docker itself
// (no such node, container not running, context ended); the command's exit code is in the
// Result.
func (c *Cluster) Exec(ctx context.Context, node string, argv ...string) (Result, error) {
	return c.execInput(ctx, node, nil, argv...)
}

// Shell runs script with sh -c on node, like [Cluster.Exec].
func (c *Cluster) Shell(ctx context.Context, node, script string) (Result, error) {
	return c.Exec(ctx, node, "sh", "-c", script)
}

// Cutover runs /usr/sbin/cutover with args on the master, like [Cluster.Exec].
func (c *Cluster) Cutover(ctx context.Context, args ...string) (Result, error) {
	return c.Exec(ctx, c.Master, append([]string{cutoverPath}, args...)...)
}

// ReadFile returns the contents of the file at path on node.
func (c *Cluster) ReadFile(ctx context.Context, node, path string) ([]byte, error) {
	res, err := c.Exec(ctx, node, "cat", "--", path)
	if err != nil {
		return nil, err
	}
	if err := res.Err(); err != nil {
		return nil, fmt.Errorf("%s: read %s: %w", node, path, err)
	}
	return []byte(res.Stdout), nil
}

// WriteFile writes data to the file at path on node (a new file gets mode 0600; the
// directory must exist).
func (c *Cluster) WriteFile(ctx context.Context, node, path string, data []byte) error {
	res, err := c.execInput(ctx, node, data, "sh", "-c", `umask 077 && cat > "$1"`, "write", path)
	if err != nil {
		return err
	}
	if err := res.Err(); err != nil {
		return fmt.Errorf("%s: write %s: %w", node, path, err)
	}
	return nil
}

// Logs returns the console output of node's init and sshd since the container was created.
func (c *Cluster) Logs(ctx context.Context, node string) (string, error) {
	n, err := c.Node(node)
	if err != nil {
		return "", err
	}
	out, err := dockerCombined(ctx, "logs", n.Container)
	if err != nil {
		return "", fmt.Errorf("%s: logs: %w", node, err)
	}
	return out, nil
}

// WaitDaemon returns when the demo daemon on node reports that it runs.
func (c *Cluster) WaitDaemon(ctx context.Context, node string) error {
	ctx, cancel := withDefaultTimeout(ctx, 60*time.Second)
	defer cancel()
	var last Result
	var poll Poll
	for {
		res, err := c.Exec(ctx, node, demoappPath, "daemon", "status")
		if err == nil && res.ExitCode == 0 {
			return nil
		}
		if err == nil {
			last = res
		}
		if err := poll.WaitContext(ctx); err != nil {
			boot, _ := c.ReadFile(context.WithoutCancel(ctx), node, "/var/log/boot.log")
			return fmt.Errorf("%s: wait for the demo daemon: %w (status: %s %s; boot.log: %s)",
				node, err, strings.TrimSpace(last.Stdout), lastLine(last.Stderr), tail(string(boot), 5))
		}
	}
}

// execInput is Exec with stdin.
func (c *Cluster) execInput(ctx context.Context, node string, stdin []byte, argv ...string) (Result, error) {
	n, err := c.Node(node)
	if err != nil {
		return Result{}, err
	}
	if len(argv) == 0 {
		return Result{}, fmt.Errorf("%s: exec: no command", node)
	}
	args := []string{"exec"}
	if stdin != nil {
		args = append(args, "-i")
	}
	args = append(append(args, n.Container), argv...)
	res, err := dockerRun(ctx, stdin, args...)
	if err != nil {
		return res, fmt.Errorf("%s: exec %s: %w", node, argv[0], err)
	}
	return res, nil
}

// forEach runs fn for every node at once and joins the errors.
func forEach(nodes []Node, fn func(i int, n Node) error) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(i, n)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// withDefaultTimeout bounds ctx by d unless it already has a deadline.
func withDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// since formats the time elapsed since t for the step logs.
func since(t time.Time) time.Duration { return time.Since(t).Round(10 * time.Millisecond) }

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// tail returns the last n lines of s on one line.
func tail(s string, n int) string {
	return strings.ReplaceAll(lastLines(s, n), "\n", " | ")
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// installPackage installs the cutover package staged on the master, as an operator does.
func (c *Cluster) installPackage(ctx context.Context) error {
	res, err := c.Exec(ctx, c.Master, "sh", "-c", "dpkg -i "+debPath+" && rm -f "+debPath)
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		return fmt.Errorf("cluster %s: dpkg -i cutover on %s: %w\n%s%s", c.Name, c.Master, err, res.Stdout, res.Stderr)
	}
	return nil
}

// Poll paces a loop that polls a node for a state that lasts once reached (a hold, a file, a
// daemon that answers): 100 ms before the second try, then twice as long before each next
// one, up to 2 s. Each try is a docker exec, which costs about a quarter of a second of CPU
// (the Docker daemon, containerd and runc); a fixed short interval over a long wait kept a
// core busy on a 2-core machine while the tests beside it starved. The zero Poll is ready.
type Poll struct{ d time.Duration }

// next returns the pause before the next try.
func (p *Poll) next() time.Duration {
	if p.d == 0 {
		p.d = 100 * time.Millisecond
	} else {
		p.d = min(2*p.d, 2*time.Second)
	}
	return p.d
}

// Wait sleeps before the next try.
func (p *Poll) Wait() { time.Sleep(p.next()) }

// WaitContext sleeps before the next try, or returns ctx's error once it is done.
func (p *Poll) WaitContext(ctx context.Context) error { return sleep(ctx, p.next()) }
