package staging_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/nodes/sshdtest"
	"github.com/cutover/cutover/upgrade/staging"
)

// The benchmark stages two trees of about 41 MB to 8 and 32 real sshd nodes, and copies the
// same tree with pdsh's `pdcp -r` in the same op, turn about, so that both meet the same state
// of this host's disk and memory:
//
//	go test -run '^$' -bench . -benchtime 3x ./upgrade/staging/
//
// The trees are shape=large, few large files (400 files of 102,400 bytes in 20 directories),
// and shape=small, many small ones (4,000 files of 10,240 bytes in 40 directories).
//
// BenchmarkStage reports, per op, pdcp's copy of the tree to every node (s/pdcp), the first
// stage of the tree on every node (s/stage: what `cutover stage` does, the tree encoded once
// as one tar stream, then on every node the check of the final place, send and place), the
// restage of the unchanged tree (s/restage: every node's copy checked, nothing sent), both as
// a fraction of pdcp's time (x-of-pdcp, restage-x-of-pdcp), and the process's peak resident
// memory (MB-peak-rss). It also reports the floor of a stage with cutover's own transport
// (s/bare, bare-x-of-pdcp): the same encoded stream extracted by tar on every node, without
// the stage's checks, renames and syncs, which is all pdcp does; and that transfer followed on
// every node by the work a stage owes besides (s/bare-checked, checked-x-of-pdcp): every
// file read for its checksum while the tree is flushed to disk. The nodes share this host's
// disk; each writes a directory of its own, and every timed copy starts with no dirty pages
// left by the one before (settle).

var benchNodes = []int{8, 32}

// benchShape is a tree of the benchmark: files of size bytes, perDir of them in each of dirs
// directories.
type benchShape struct {
	name               string
	dirs, perDir, size int
}

var benchShapes = []benchShape{
	{name: "large", dirs: 20, perDir: 20, size: 102_400},
	{name: "small", dirs: 40, perDir: 100, size: 10_240},
}

// benchTrees holds the trees written so far, one per shape, for the process.
var benchTrees sync.Map

// benchTree writes the tree of shape s once per process and returns its root.
func benchTree(s benchShape) (string, error) {
	if dir, ok := benchTrees.Load(s.name); ok {
		return dir.(string), nil
	}
	dir, err := os.MkdirTemp("", "cutover-stage-bench-")
	if err != nil {
		return "", err
	}
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, s.size)
	for d := range s.dirs {
		sub := filepath.Join(dir, "usr/lib/app/1.2.0", fmt.Sprintf("mod%02d", d))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return "", err
		}
		for f := range s.perDir {
			for i := range buf {
				buf[i] = byte(r.Uint32())
			}
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%03d", f)), buf, 0o644); err != nil {
				return "", err
			}
		}
	}
	root := filepath.Join(dir, "usr/lib/app/1.2.0")
	benchTrees.Store(s.name, root)
	return root, nil
}

// pdcpCopy copies src with `pdcp -r` into the work directory of every server of c.
type pdcpCopy struct {
	c     *sshdtest.Cluster
	names []string
	env   []string
}

func newPdcp(b *testing.B, n int) *pdcpCopy {
	for _, p := range []string{"pdcp", "ssh"} {
		if _, err := exec.LookPath(p); err != nil {
			if os.Getenv("CI") == "true" {
				b.Fatalf("%s is not installed (run test/setup.sh)", p)
			}
			b.Skipf("%s is not installed (run test/setup.sh)", p)
		}
	}
	c := sshdtest.Start(b, n, sshdtest.WithWorkDirs())
	var names []string
	for i := range c.Servers {
		names = append(names, fmt.Sprintf("node%d", i+2))
	}
	cfg := c.OpenSSHConfig(b, names)
	return &pdcpCopy{c: c, names: names, env: append(os.Environ(), "PDSH_SSH_ARGS=-F "+cfg+" -oBatchMode=yes %h")}
}

func (p *pdcpCopy) copy(b *testing.B, src string) time.Duration {
	cmd := exec.Command("pdcp", "-R", "ssh", "-f", "32", "-w", strings.Join(p.names, ","), "-r", src, ".")
	cmd.Env = p.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil || out.Len() > 0 {
		b.Fatalf("pdcp: %v\n%q", err, out.String())
	}
	return time.Since(start)
}

func (p *pdcpCopy) clean() {
	for _, s := range p.c.Servers {
		os.RemoveAll(filepath.Join(s.WorkDir, "1.2.0"))
	}
}

func BenchmarkStage(b *testing.B) {
	for _, shape := range benchShapes {
		for _, n := range benchNodes {
			b.Run(fmt.Sprintf("shape=%s/nodes=%d", shape.name, n), func(b *testing.B) {
				benchStage(b, shape, n)
			})
		}
	}
}

// benchStage runs BenchmarkStage for one tree shape and number of nodes.
func benchStage(b *testing.B, shape benchShape, n int) {
	src, err := benchTree(shape)
	if err != nil {
		b.Fatal(err)
	}
	tree, err := staging.ReadTree(src)
	if err != nil {
		b.Fatal(err)
	}
	pd := newPdcp(b, n)
	c := sshdtest.Start(b, n)
	var list []nodes.Node
	list = append(list, nodes.Node{Name: "master"})
	for i, s := range c.Servers {
		list = append(list, nodes.Node{Name: fmt.Sprintf("node%d", i+2), Address: s.Addr, Port: s.Port})
	}
	inv, err := nodes.NewInventory("master", list)
	if err != nil {
		b.Fatal(err)
	}
	p, err := nodes.NewPool(inv, nodes.SSHConfig{User: c.User, IdentityFiles: []string{c.IdentityFile}, KnownHosts: []string{c.KnownHosts}})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	finals := map[string]string{}
	for _, nd := range list[1:] {
		finals[nd.Name] = filepath.Join(c.UserDir(b), "1.2.0")
	}
	each := func(f func(*nodes.Conn, string) error) {
		var wg sync.WaitGroup
		errs := make(chan error, len(finals))
		for name, final := range finals {
			wg.Add(1)
			go func() {
				defer wg.Done()
				conn, err := p.Conn(ctx, name)
				if err == nil {
					err = f(conn, final)
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	encDir := b.TempDir()
	var pdcp, stage, restage time.Duration
	var bare [2]time.Duration // the bare transfer, then with the checksums and the flush
	for b.Loop() {
		settle(b)
		pdcp += pd.copy(b, src)
		b.StopTimer()
		pd.clean()
		b.StartTimer()
		settle(b)
		start := time.Now()
		// As the stage does when two or more nodes lack the tree: encode it once.
		release, err := tree.Encode(encDir)
		if err != nil {
			b.Fatal(err)
		}
		each(func(conn *nodes.Conn, final string) error {
			if st, err := staging.Compare(ctx, conn, tree, final); err != nil || st != staging.Missing {
				return fmt.Errorf("%s: %v before staging: %v", conn.Node(), st, err)
			}
			sent, err := staging.Send(ctx, conn, tree, final, nil)
			if err != nil {
				return err
			}
			return staging.Place(ctx, conn, tree, final, sent)
		})
		release()
		stage += time.Since(start)
		start = time.Now()
		each(func(conn *nodes.Conn, final string) error {
			ok, err := staging.Installed(ctx, conn, tree, final)
			if err == nil && !ok {
				err = fmt.Errorf("%s: not installed after staging", conn.Node())
			}
			return err
		})
		restage += time.Since(start)
		b.StopTimer()
		for _, final := range finals {
			os.RemoveAll(final)
		}
		b.StartTimer()
		for i, checked := range []bool{false, true} {
			settle(b)
			start = time.Now()
			release, err = tree.Encode(encDir)
			if err != nil {
				b.Fatal(err)
			}
			each(func(conn *nodes.Conn, final string) error {
				return staging.SendBare(ctx, conn, tree, final+".bare", checked)
			})
			release()
			bare[i] += time.Since(start)
			b.StopTimer()
			for _, final := range finals {
				os.RemoveAll(final + ".bare")
			}
			b.StartTimer()
		}
	}
	per := func(d time.Duration) float64 { return d.Seconds() / float64(b.N) }
	b.ReportMetric(per(pdcp), "s/pdcp")
	b.ReportMetric(per(stage), "s/stage")
	b.ReportMetric(per(restage), "s/restage")
	b.ReportMetric(float64(stage)/float64(pdcp), "x-of-pdcp")
	b.ReportMetric(float64(restage)/float64(pdcp), "restage-x-of-pdcp")
	b.ReportMetric(per(bare[0]), "s/bare")
	b.ReportMetric(float64(bare[0])/float64(pdcp), "bare-x-of-pdcp")
	b.ReportMetric(per(bare[1]), "s/bare-checked")
	b.ReportMetric(float64(bare[1])/float64(pdcp), "checked-x-of-pdcp")
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	b.ReportMetric(float64(ru.Maxrss)/1024, "MB-peak-rss")
}

// settle writes every dirty page to disk, off the clock, before a timed copy: the nodes share
// this host's disk, so a copy would otherwise pay for the writeback of the one before it (the
// other tool's, or its own previous op's), and whichever benchmark ran second looked slower.
func settle(b *testing.B) {
	b.StopTimer()
	syscall.Sync()
	b.StartTimer()
}
