package upgrade_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/nodes/sshdtest"
)

// BenchmarkStageRun runs the cutover binary's `cutover stage` of a version of 41 MB in 400
// files of 100 KB (20 directories of 20 files) on the master and stageRunNodes sshd nodes, each
// node with trees of its own (sshdtest.Bind over the cluster's version bases), from a
// directory and from a .tar.gz of it:
//
//	go test -run '^$' -bench StageRun -benchtime 1x ./upgrade/
//
// One op is, turn about so that both meet the same state of this host's disk and memory, the
// floor and the stage. The floor (s/floor) is the plain copy that a stage is measured
// against: `pdcp -r` of the tree to every sshd node (s/pdcp), then `cp -a` of it on the master
// (s/cp), then `sync` (s/sync), since a stage is on disk before it is recorded. The stage
// (s/stage) is a first `cutover stage`, with no stamps of the source cached; x-of-floor is the
// one against the other. The restage (s/restage) is the same command again, the version
// installed everywhere and the source unchanged, against the first stage (restage-x-of-stage);
// its floor is one round of SSH connections to the sshd nodes (s/dial-round, dialRound),
// against the first stage too (dial-x-of-stage), and above it the round that a restage cannot
// go below, since it reads every node once: those connections with one command each, in a
// session of its own, and one on the master (s/read-round, readRound; read-x-of-stage), which
// restage-x-of-read sets the restage against.
// Every timed copy starts with no dirty pages left by the one before (settle).
func BenchmarkStageRun(b *testing.B) {
	for _, source := range []string{"dir", "tgz"} {
		b.Run(fmt.Sprintf("source=%s/nodes=%d", source, stageRunNodes+1), func(b *testing.B) {
			benchStageRun(b, source == "tgz")
		})
	}
}

// stageRunNodes is how many sshd nodes BenchmarkStageRun stages to besides the master.
const stageRunNodes = 7

func benchStageRun(b *testing.B, tarball bool) {
	requireCommands(b, "pdcp", "ssh")
	bin := buildCutover(b)
	c := sshdtest.Start(b, stageRunNodes, sshdtest.WithOwnProcesses())
	sc := newSSHCluster(b, c, benchParallel)
	libs := c.Bind(b, sc.path("usr/lib/app"))
	shares := c.Bind(b, sc.path("usr/share/app"))
	src := stageRunSource(b, sc)
	source := src
	if tarball {
		source = filepath.Join(b.TempDir(), "app-1.2.0.tar.gz")
		out, err := exec.Command("tar", "-czf", source, "-C", src, ".").CombinedOutput()
		if err != nil {
			b.Fatalf("tar: %v: %s", err, out)
		}
	}
	var names []string
	for i := range c.Servers {
		names = append(names, fmt.Sprintf("node%d", i+2))
	}
	pdcpEnv := append(cutoverEnv(), "PDSH_SSH_ARGS=-F "+c.OpenSSHConfig(b, names)+" -oBatchMode=yes %h")
	lib := filepath.Join(src, sc.tree("lib", "1.2.0"))
	// The trees and manifests a stage or a copy left, on the master and every node.
	clean := func() {
		for _, d := range append(append([]string{sc.path("usr/lib/app"), sc.path("usr/share/app")}, libs...), shares...) {
			for _, n := range []string{"1.2.0", ".1.2.0.cutover-manifest"} {
				if err := os.RemoveAll(filepath.Join(d, n)); err != nil {
					b.Fatal(err)
				}
			}
		}
		// The first stage reads the source whole: no stamps of it are kept from before.
		for _, n := range []string{"source-stamps", "source-stamps.json"} {
			os.Remove(sc.path("state/" + n))
		}
	}
	dial := dialRound(b, c, benchParallel)
	read := readRound(b, c, benchParallel)
	ctx := context.Background()
	var pdcp, cp, flush, stage, restage, restageCPU time.Duration
	var firstStages, restages stageTimes
	for b.Loop() {
		settle(b)
		start := time.Now()
		cmd := exec.Command("pdcp", "-R", "ssh", "-f", strconv.Itoa(benchParallel), "-w", strings.Join(names, ","), "-r", lib, sc.path("usr/lib/app"))
		cmd.Env = pdcpEnv
		if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
			b.Fatalf("pdcp: %v\n%s", err, out)
		}
		pdcp += time.Since(start)
		start = time.Now()
		if out, err := exec.Command("cp", "-a", lib, sc.tree("lib", "1.2.0")).CombinedOutput(); err != nil {
			b.Fatalf("cp -a: %v\n%s", err, out)
		}
		cp += time.Since(start)
		start = time.Now()
		syscall.Sync()
		flush += time.Since(start)
		b.StopTimer()
		for _, d := range libs {
			if _, err := os.Stat(filepath.Join(d, "1.2.0/mod19/f019")); err != nil {
				b.Fatalf("pdcp left no copy: %v", err)
			}
		}
		clean()
		b.StartTimer()

		settle(b)
		run := sc.cutover(ctx, b, bin, "stage", "--version=1.2.0", source)
		if run.code != 0 || !strings.Contains(run.stdout, "sent") {
			b.Fatalf("first stage: %v", run)
		}
		stage += run.wall
		firstStages.add(sc.lastRun(ctx, b))
		run = sc.cutover(ctx, b, bin, "stage", "--version=1.2.0", source)
		if run.code != 0 || !strings.Contains(run.stdout, fmt.Sprintf("already staged on %d nodes", stageRunNodes+1)) {
			b.Fatalf("restage: %v", run)
		}
		restage += run.wall
		restages.add(sc.lastRun(ctx, b))
		restageCPU += run.cpu
		b.StopTimer()
		for _, d := range append(libs, sc.path("usr/lib/app")) {
			if _, err := os.Stat(filepath.Join(d, "1.2.0/mod19/f019")); err != nil {
				b.Fatalf("the stage left no tree: %v", err)
			}
		}
		clean()
		b.StartTimer()
	}
	b.Logf("the stages of a first stage: %v; of a restage: %v, with %.3fs of cutover's CPU", &firstStages, &restages, restageCPU.Seconds()/float64(b.N))
	per := func(d time.Duration) float64 { return d.Seconds() / float64(b.N) }
	floor := pdcp + cp + flush
	b.ReportMetric(per(pdcp), "s/pdcp")
	b.ReportMetric(per(cp), "s/cp")
	b.ReportMetric(per(flush), "s/sync")
	b.ReportMetric(per(floor), "s/floor")
	b.ReportMetric(per(stage), "s/stage")
	b.ReportMetric(per(restage), "s/restage")
	b.ReportMetric(float64(stage)/float64(floor), "x-of-floor")
	b.ReportMetric(float64(restage)/float64(stage), "restage-x-of-stage")
	// The floor of a restage: one round of SSH connections to the sshd nodes, which any
	// command on them needs, against the first stage.
	b.ReportMetric(dial.Seconds(), "s/dial-round")
	b.ReportMetric(float64(dial)/float64(stage/time.Duration(b.N)), "dial-x-of-stage")
	b.ReportMetric(read.Seconds(), "s/read-round")
	b.ReportMetric(float64(read)/float64(stage/time.Duration(b.N)), "read-x-of-stage")
	b.ReportMetric(float64(restage/time.Duration(b.N))/float64(read), "restage-x-of-read")
}

// readRound returns the time it takes to connect to every node of c, parallel at a time, and
// run one command on each in a session of its own, with one on the master besides: the least
// a restage does, which reads every node once. It is the best of three rounds, each dialing
// anew.
func readRound(tb testing.TB, c *sshdtest.Cluster, parallel int) time.Duration {
	tb.Helper()
	list, newPool := serverPools(tb, c)
	list = append(list, nodes.Node{Name: "master"})
	best := time.Duration(math.MaxInt64)
	for range 3 {
		p := newPool()
		start := time.Now()
		_, err := nodes.Each(context.Background(), list, parallel, "", func(ctx context.Context, n nodes.Node) error {
			conn, err := p.Conn(ctx, n.Name)
			if err != nil {
				return err
			}
			_, err = conn.RunOutputOwnSession(ctx, io.Discard, "true")
			return err
		})
		best = min(best, time.Since(start))
		p.Close()
		if err != nil {
			tb.Fatal(err)
		}
	}
	return best
}

// stageRunSource writes the source of BenchmarkStageRun: the trees of version 1.2.0 of sc's
// application, its lib tree 400 files of 102,400 random bytes in 20 directories.
func stageRunSource(b *testing.B, sc *sshCluster) string {
	b.Helper()
	src := b.TempDir()
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 102_400)
	for d := range 20 {
		dir := filepath.Join(src, sc.tree("lib", "1.2.0"), fmt.Sprintf("mod%02d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 20 {
			for i := range buf {
				buf[i] = byte(r.Uint32())
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", f)), buf, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	share := filepath.Join(src, sc.tree("share", "1.2.0"))
	if err := os.MkdirAll(share, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(share, "VERSION"), []byte("1.2.0\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	return src
}

// settle writes every dirty page to disk, off the clock, before a timed copy.
func settle(b *testing.B) {
	b.StopTimer()
	syscall.Sync()
	b.StartTimer()
}
