package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/nodes/sshdtest"
)

// Nodes with file systems of their own. The sshd nodes of sshdtest share this host's file
// system, so they share the master's links: a node cannot be told from the master by its
// links, nor left behind by a run. startNodeViews runs each node's sshd in a mount namespace
// of its own instead, in which the fixture's etc (and, for a node with a disk of its own,
// usr) is the node's own directory nodes/NAME/etc (nodes/NAME/usr): what cutover does to the
// node over SSH lands there, while the master, cutover and the test see the master's. The
// node's namespace follows the mounts this process makes below the cluster's directory (a
// power-cut disk, a node's disk), so the views work on them too.

// nodeViewsStart bounds the start of a namespaced sshd.
const nodeViewsStart = 10 * time.Second

// nodeViews are the mount namespaces of a cluster's sshd nodes.
type nodeViews struct {
	pids map[string]int // node name (node2, ...) -> its sshd, in its namespace
}

// startNodeViews restarts every server of c in a mount namespace of its own, on the same port
// with the same keys; the namespaces receive the mounts made below c.Dir afterwards.
func startNodeViews(t *testing.T, c *sshdtest.Cluster) *nodeViews {
	t.Helper()
	for _, tool := range []string{"unshare", "nsenter", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("nodes with views of their own: %s is missing: %v", tool, err)
		}
	}
	// A shared mount of the cluster's directory, so that the namespaces (its slaves) see what
	// is mounted below it later.
	if err := unix.Mount(c.Dir, c.Dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("nodes with views of their own: bind %s: %v", c.Dir, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(c.Dir, unix.MNT_DETACH) })
	if err := unix.Mount("", c.Dir, "", unix.MS_SHARED, ""); err != nil {
		t.Fatalf("nodes with views of their own: make %s shared: %v", c.Dir, err)
	}
	v := &nodeViews{pids: map[string]int{}}
	for i, s := range c.Servers {
		name := fmt.Sprintf("node%d", i+2)
		s.Kill(t)
		var err error
		deadline := time.Now().Add(nodeViewsStart)
		for {
			var cmd *exec.Cmd
			cmd, err = startNamespacedSSHD(filepath.Join(c.Dir, s.Name, "sshd_config"))
			if err == nil {
				v.pids[name] = cmd.Process.Pid
				t.Cleanup(func() {
					_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
					_ = cmd.Wait()
				})
				break
			}
			if time.Now().After(deadline) { // the port may linger a moment after the kill
				t.Fatalf("nodes with views of their own: %s: %v", name, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return v
}

// startNamespacedSSHD starts sshd with config in a new mount namespace, a slave of this one,
// and waits until it listens.
func startNamespacedSSHD(config string) (*exec.Cmd, error) {
	cmd := exec.Command("unshare", "--mount", "--propagation", "slave", sshdtest.SSHD, "-D", "-e", "-f", config)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	listening := make(chan struct{})
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			if !once && strings.HasPrefix(sc.Text(), "Server listening on") {
				once = true
				close(listening)
			} else if !once {
				log.WriteString(sc.Text() + "\n")
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	select {
	case <-listening:
		return cmd, nil
	case <-time.After(nodeViewsStart):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err := cmd.Wait()
		return nil, fmt.Errorf("sshd did not listen: %v: %s", err, log.String())
	}
}

// in runs argv in node's mount namespace.
func (v *nodeViews) in(node string, argv ...string) error {
	pid, ok := v.pids[node]
	if !ok {
		return fmt.Errorf("%s has no view of its own", node)
	}
	out, err := exec.Command("nsenter", append([]string{"--target", fmt.Sprint(pid), "--mount", "--"}, argv...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %s: %v: %s", node, strings.Join(argv, " "), err, out)
	}
	return nil
}

// bind makes the node see src at dst.
func (v *nodeViews) bind(node, src, dst string) error {
	return v.in(node, "mount", "--bind", src, dst)
}

// unbind undoes bind, waiting for a busy mount to be let go (a session of a killed run may
// hold it a moment).
func (v *nodeViews) unbind(node, dst string) error {
	deadline := time.Now().Add(powerUnmountWait)
	for {
		err := v.in(node, "umount", dst)
		if err == nil || strings.Contains(err.Error(), "not mounted") || strings.Contains(err.Error(), "no mount point") {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// nodeViewDirs are the directories of a fixture's root that a node with a view of its own
// has of its own: etc always, usr when the node has a disk.
func nodeViewDirs(disk bool) []string {
	if disk {
		return []string{"etc", "usr"}
	}
	return []string{"etc"}
}

// attachViews shows every node with a view its own directories of f: nodes/NAME/DIR at DIR.
func (f *crashFixture) attachViews() error {
	if f.views == nil {
		return nil
	}
	var errs []error
	for _, n := range f.nodes[1:] {
		for _, d := range nodeViewDirs(f.nodeDisks[n] != nil) {
			if err := f.views.bind(n, f.path("nodes/"+n+"/"+d), f.path(d)); err != nil {
				errs = append(errs, err)
				continue
			}
			f.bound = append(f.bound, [2]string{n, f.path(d)})
		}
	}
	return errors.Join(errs...)
}

// detachViews undoes attachViews.
func (f *crashFixture) detachViews() error {
	var errs []error
	for len(f.bound) > 0 {
		b := f.bound[len(f.bound)-1]
		errs = append(errs, f.views.unbind(b[0], b[1]))
		f.bound = f.bound[:len(f.bound)-1]
	}
	return errors.Join(errs...)
}

// release lets go of what the fixture mounted: the nodes' views and disks.
func (f *crashFixture) release() error {
	errs := []error{f.detachViews()}
	for n, d := range f.nodeDisks {
		errs = append(errs, f.diskSet.release(d))
		delete(f.nodeDisks, n)
	}
	return errors.Join(errs...)
}

// nodeVersion returns the version both of node's own links point at, or "" (its links, as
// the node sees them, in a word).
func (f *crashFixture) nodeVersion(node string) (string, string) {
	read := func(link string) string {
		t, err := os.Readlink(f.path("nodes/" + node + "/etc/app/" + link))
		if err != nil {
			return "(" + err.Error() + ")"
		}
		return strings.TrimPrefix(t, f.root)
	}
	lib, share := read("lib"), read("share")
	for _, v := range crashVersions {
		if lib == "/usr/lib/app/"+v && share == "/usr/share/app/"+v {
			return v, "links at " + v
		}
	}
	return "", fmt.Sprintf("links %s, %s", lib, share)
}

// restartNodeDisk is the boot of node after its power cut: its view and disk are unmounted,
// the disk mounted again (its log replayed) and the view attached again.
func (f *crashFixture) restartNodeDisk(node string) error {
	disk := f.nodeDisks[node]
	if err := f.detachViews(); err != nil {
		return err
	}
	if err := disk.restart(); err != nil {
		return err
	}
	return f.attachViews()
}

// requireNodeViews skips a scenario whose nodes need views of their own when they cannot be
// made here (mount namespaces need root), unless CI is "true": then the test fails.
func requireNodeViews(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	why := "nodes with views of their own mount file systems: the test must run as root"
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why + " (with CI=true this is a failure)")
}

// checkNodesDurable checks, right after the power came back, that the journal claims no
// node's switch that its own disk lost: for every switch (or batch) whose last record is
// done or undone, every node it names as done has its own links at the run's target (or,
// undone, at its source). A node's links that no record names are left as the cut left
// them: the recovery judges them.
func (sc crashScenario) checkNodesDurable(p *crashPoint, before, w crashWorld, runs []journal.Run) {
	if len(w.nodeAt) == 0 {
		return
	}
	kind := map[string]string{"run": "upgrade", "abort": "upgrade"}[sc.kind]
	if kind == "" {
		kind = sc.kind
	}
	r, ok := lastRun(runs, kind)
	if !ok || (r.Outcome != journal.Running && r.Outcome != journal.Succeeded && r.Outcome != journal.RolledBack && r.Outcome != journal.Aborted) {
		return
	}
	for _, stage := range stagesOf(r) {
		if stage != "switch" && !strings.HasPrefix(stage, "batch-") {
			continue
		}
		e, _ := r.LastEvent(stage)
		want := ""
		switch {
		case e.State == journal.Done && r.Travel == journal.Forward:
			want = r.To
		case e.State == journal.Undone:
			want = r.From
		default:
			continue
		}
		for _, nr := range e.Nodes {
			got, own := w.nodeAt[nr.Node]
			if !own || !nr.OK || got == want || (nr.Node == sc.behind && got == before.nodeAt[nr.Node]) {
				continue
			}
			p.problems = append(p.problems, crashProblem{"power cut: the journal says a node's switch " + string(e.State) + " but its own disk lost it",
				fmt.Sprintf("%s %s for %s, whose own %s (want %s)", stage, e.State, nr.Node, w.nodeLinks[nr.Node], want)})
		}
	}
}
