package cluster

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// imageFiles are the inputs of the node image; build.sh hashes them into the image's tag.
//
//go:embed image/build.sh image/cutover-node-init
var imageFiles embed.FS

// runOpts are the docker create options every node gets besides its name and addresses: /run
// is a fresh tmpfs at every start (so cron runs @reboot lines again), DNS points nowhere (names
// come from /etc/hosts), and nothing restarts a node behind a test's back.
var runOpts = []string{
	"--tmpfs", "/run:rw,nosuid,nodev,exec,mode=0755,size=64m",
	"--dns", "127.0.0.1",
	"--restart", "no",
}

// dockerRun runs the docker CLI. The error reports a failure of Docker itself; a non-zero exit
// of a command run inside a container is only a Result.
func dockerRun(ctx context.Context, stdin []byte, args ...string) (Result, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.WaitDelay = 5 * time.Second
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := Result{Stdout: stdout.String(), Stderr: stderr.String()}
	if err == nil {
		return res, nil
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() >= 0 {
		res.ExitCode = exit.ExitCode()
		if !dockerFailed(res.Stderr) {
			return res, nil
		}
		return res, errors.New(lastLine(res.Stderr))
	}
	return res, err
}

// dockerFailed reports whether stderr of docker exec says that Docker, not the command, failed.
func dockerFailed(stderr string) bool {
	return strings.HasPrefix(stderr, "Error response from daemon:") ||
		strings.HasPrefix(stderr, "Error: No such container") ||
		strings.Contains(stderr, "Cannot connect to the Docker daemon")
}

// docker runs a docker CLI command that must succeed and returns its stdout.
func docker(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.WaitDelay = 5 * time.Second
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("docker %s: %w", args[0], ctx.Err())
		}
		return "", fmt.Errorf("docker %s: %w: %s", args[0], err, lastLine(stderr.String()))
	}
	return stdout.String(), nil
}

// dockerCombined runs a docker CLI command that must succeed and returns stdout and stderr
// interleaved.
func dockerCombined(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("docker %s: %w", args[0], err)
	}
	return string(out), nil
}

// imageScripts writes the embedded image inputs into a new temporary directory and returns it.
func imageScripts() (string, error) {
	dir, err := os.MkdirTemp("", "cutover-node-image-")
	if err != nil {
		return "", fmt.Errorf("node image: %w", err)
	}
	for _, name := range []string{"build.sh", "cutover-node-init"} {
		data, err := imageFiles.ReadFile("image/" + name)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name), data, 0o755)
		}
		if err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("node image: write %s: %w", name, err)
		}
	}
	return dir, nil
}

// runImageScript runs build.sh with args and returns the last line of its stdout.
func runImageScript(ctx context.Context, args ...string) (string, error) {
	dir, err := imageScripts()
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	// Run by bash rather than exec'd: a child forked by another goroutine while the script was
	// being written may still hold it open for writing, and exec would fail (text file busy).
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(dir, "build.sh")}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("node image: build.sh: %w: %s", err, tail(stderr.String(), 8))
	}
	image := lastLine(stdout.String())
	if !strings.HasPrefix(image, "cutover-node:") {
		return "", fmt.Errorf("node image: build.sh printed %q, want cutover-node:<hash>", image)
	}
	return image, nil
}

// ensureImage builds the node image unless it is cached and returns its name.
func ensureImage(ctx context.Context) (string, error) {
	return runImageScript(ctx)
}

// imageTag returns the name the node image has (or will have) without building it.
func imageTag(ctx context.Context) (string, error) {
	return runImageScript(ctx, "--tag")
}

// subnetIndex derives the third octet of a cluster's subnet from its name.
func subnetIndex(name string) int {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int(h.Sum32()%254) + 1
}

// createNetwork creates the cluster's network on the first free 10.77.N.0/24, starting at the N
// its name hashes to, and returns the subnet and its first three octets. The network is
// internal: nodes reach each other and nothing else.
func createNetwork(ctx context.Context, name string) (subnet, prefix string, err error) {
	start := subnetIndex(name)
	for i := 0; i < 254; i++ {
		n := (start-1+i)%254 + 1
		prefix = fmt.Sprintf("10.77.%d", n)
		subnet = prefix + ".0/24"
		_, err = docker(ctx, nil, "network", "create", "--driver", "bridge", "--internal",
			"--subnet", subnet, "--gateway", prefix+".1", "--label", labelCluster+"="+name, name)
		if err == nil {
			return subnet, prefix, nil
		}
		if !strings.Contains(err.Error(), "overlap") {
			return "", "", fmt.Errorf("cluster %s: create network: %w", name, err)
		}
	}
	return "", "", fmt.Errorf("cluster %s: create network: every 10.77.N.0/24 is taken", name)
}

// removeCluster removes every container and network labelled with the cluster's name.
func removeCluster(ctx context.Context, name string) error {
	filter := "label=" + labelCluster + "=" + name
	out, err := docker(ctx, nil, "ps", "-aq", "--filter", filter)
	if err != nil {
		return fmt.Errorf("cluster %s: list containers: %w", name, err)
	}
	if ids := strings.Fields(out); len(ids) > 0 {
		if _, err := docker(ctx, nil, append([]string{"rm", "-f", "-v"}, ids...)...); err != nil {
			return fmt.Errorf("cluster %s: remove containers: %w", name, err)
		}
	}
	out, err = docker(ctx, nil, "network", "ls", "-q", "--filter", filter)
	if err != nil {
		return fmt.Errorf("cluster %s: list networks: %w", name, err)
	}
	if ids := strings.Fields(out); len(ids) > 0 {
		if _, err := docker(ctx, nil, append([]string{"network", "rm"}, ids...)...); err != nil {
			return fmt.Errorf("cluster %s: remove network: %w", name, err)
		}
	}
	return nil
}

// create creates node n's container without starting it.
func (c *Cluster) create(ctx context.Context, image string, n Node) error {
	args := []string{"create", "--name", n.Container, "--hostname", n.Name,
		"--network", c.Name, "--ip", n.Address,
		"--label", labelCluster + "=" + c.Name,
		"--label", labelNode + "=" + n.Name,
		"--label", labelAddress + "=" + n.Address,
		"--label", labelMaster + "=" + c.Master,
		"--label", labelSubnet + "=" + c.Subnet,
	}
	args = append(args, runOpts...)
	for _, o := range c.Nodes {
		if o.Name != n.Name {
			args = append(args, "--add-host", o.Name+":"+o.Address)
		}
	}
	if _, err := docker(ctx, nil, append(args, image)...); err != nil {
		return fmt.Errorf("%s: create container: %w", n.Name, err)
	}
	return nil
}

// running reports whether node n's container runs.
func (c *Cluster) running(ctx context.Context, n Node) (bool, error) {
	out, err := docker(ctx, nil, "inspect", "--format", "{{.State.Running}}", n.Container)
	if err != nil {
		return false, fmt.Errorf("%s: inspect: %w", n.Name, err)
	}
	return strings.TrimSpace(out) == "true", nil
}
