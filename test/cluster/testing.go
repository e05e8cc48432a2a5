package cluster

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// New starts a cluster for a test and removes it when the test ends, passed or failed. Without a
// usable Docker or debootstrap the test is skipped, unless the environment variable CI is "true":
// then it fails. The cluster's name defaults to one derived from the test's name; every step is
// logged with its duration. When the test failed, the nodes' logs are logged before tear-down.
func New(t testing.TB, opts Options) *Cluster {
	t.Helper()
	Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if opts.Name == "" {
		opts.Name = nameFor(t.Name())
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	var c *Cluster
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if c == nil {
			// Start failed and removed what it made; make sure nothing of the name is left.
			if err := removeCluster(ctx, opts.Name); err != nil {
				t.Errorf("test cluster: %v", err)
			}
			return
		}
		if t.Failed() {
			c.logNodes(ctx, t)
		}
		if err := c.Down(ctx); err != nil {
			t.Errorf("test cluster: %v", err)
		}
	})
	var err error
	c, err = Start(ctx, opts)
	if err != nil {
		t.Fatalf("test cluster: %v", err)
	}
	return c
}

// Require skips the test when this machine cannot run a cluster (no usable Docker or
// debootstrap), or fails it when the environment variable CI is "true", for a test that starts
// its cluster by other means than [New] (clusterctl, the Makefile's targets).
func Require(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := prerequisites(ctx); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("test cluster: %v", err)
		}
		t.Skipf("test cluster: %v (with CI=true this is a failure)", err)
	}
}

// Name returns the name [New] gives the cluster of the test called testName.
func Name(testName string) string { return nameFor(testName) }

// prerequisites checks that this machine can run a cluster: Docker answers, iproute2 is there,
// dpkg-deb is there to build cutover's package unless $CUTOVER_TEST_DEB names one, and debootstrap
// is there unless the node image is already built.
func prerequisites(ctx context.Context) error {
	if _, err := exec.LookPath("docker"); err != nil {
		return errors.New("docker is not installed")
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		return fmt.Errorf("the Docker daemon does not answer: %s", lastLine(string(out)))
	}
	if _, err := ipCommand(); err != nil {
		return err
	}
	if _, err := exec.LookPath("dpkg-deb"); err != nil && os.Getenv("CUTOVER_TEST_DEB") == "" {
		return errors.New("dpkg-deb is not installed: it builds cutover's package for the master (run test/setup.sh)")
	}
	image, err := imageTag(ctx)
	if err != nil {
		return err
	}
	if _, err := docker(ctx, nil, "image", "inspect", image); err == nil {
		return nil
	}
	if _, err := exec.LookPath("debootstrap"); err == nil {
		return nil
	}
	if _, err := os.Stat("/usr/sbin/debootstrap"); err == nil {
		return nil
	}
	return fmt.Errorf("debootstrap is not installed and the node image %s is not built (run test/setup.sh)", image)
}

var nameUnsafe = regexp.MustCompile(`[^a-z0-9]+`)

// nameFor derives a cluster name from a test's name: readable, and unique across packages
// (the working directory of a test is its package's directory).
func nameFor(testName string) string {
	wd, _ := os.Getwd()
	h := fnv.New32a()
	h.Write([]byte(wd + "\x00" + testName))
	base := strings.Trim(nameUnsafe.ReplaceAllString(strings.ToLower(testName), "-"), "-")
	if len(base) > 28 {
		base = strings.TrimRight(base[:28], "-")
	}
	return fmt.Sprintf("ct-%s-%06x", base, h.Sum32()&0xffffff)
}

// logNodes logs what each node said, to explain a failed test.
func (c *Cluster) logNodes(ctx context.Context, t testing.TB) {
	t.Helper()
	for _, n := range c.Nodes {
		if out, err := c.Logs(ctx, n.Name); err == nil {
			t.Logf("%s console:\n%s", n.Name, lastLines(out, 20))
		}
		res, err := c.Shell(ctx, n.Name, "tail -n 20 /var/log/boot.log /var/log/demoapp/daemon.log 2>&1")
		if err == nil {
			t.Logf("%s logs:\n%s", n.Name, res.Stdout)
		}
	}
}
