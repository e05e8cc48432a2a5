package e2e

import (
	"strings"
	"testing"

	"github.com/cutover/cutover/test/cluster"
)

// TestHostileProcesses upgrades a cluster whose nodes run what a user of a node, or a daemon
// that outlived its stop, may run (docs/design.md §9):
//
//   - node2: an unprivileged user's program of the old tree that never ends, and a program
//     whose path holds a newline followed by "1 <the old tree>" (read line by line, pid 1 of
//     the node would be "a daemon of another version");
//   - node3: a helper daemon of the application, run by sh from a script of the old tree
//     through the links and named by its pid file, that the daemons' stop does not stop; and
//     pid files that name pid 1 and -1;
//   - node4: the same helper run by its versioned path, without a pid file.
//
// The run ends done: the user's programs still run, unsignalled (they are named in a warning
// where root may read another user's executable, which a container without CAP_SYS_PTRACE does
// not allow); pid 1 of every node still runs; both helpers of the old version were ended.
func TestHostileProcesses(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{})
	const helper = "/usr/lib/demoapp/1.0.0/usr/sbin/helperd.sh"
	const asUser = "setpriv --reuid=65534 --regid=65534 --clear-groups "
	for _, n := range []string{"node3", "node4"} {
		must(t, c, n, "printf '#!/bin/sh\\n[ -z \"$1\" ] || echo $$ >\"$1\"\\nwhile :; do sleep 1; done\\n' >"+helper+" && chmod 755 "+helper)
	}
	// node2: the user's programs.
	must(t, c, "node2", "mkdir -p /tmp/nr/run/demoapp/hold && touch /tmp/nr/run/demoapp/hold/watcher-paused && chmod -R 777 /tmp/nr")
	userPid := must(t, c, "node2", asUser+"env DEMOAPP_ROOT=/tmp/nr setsid /usr/lib/demoapp/1.0.0/usr/sbin/demoapp watcher paused </dev/null >/dev/null 2>&1 & echo $!")
	forgedDir := "/tmp/x\n1 /usr/lib/demoapp/1.0.0"
	must(t, c, "node2", "d='"+forgedDir+"' && mkdir -p \"$d\" && cp /bin/sleep \"$d/sleep\" && chmod -R 755 /tmp/x*")
	forgedPid := must(t, c, "node2", asUser+"setsid \"$(printf '/tmp/x\\n1 /usr/lib/demoapp/1.0.0/sleep')\" 600 </dev/null >/dev/null 2>&1 & echo $!")
	// node3: the helper through the links, named by its pid file; pid files naming 1 and -1.
	must(t, c, "node3", "setsid sh /usr/lib/demoapp/default/usr/sbin/helperd.sh /run/demoapp/helperd.pid </dev/null >/dev/null 2>&1 & "+
		"echo 1 >/run/demoapp/one.pid; echo -1 >/run/demoapp/neg.pid; sleep 0.5")
	linkedPid := must(t, c, "node3", "cat /run/demoapp/helperd.pid")
	// node4: the helper by its versioned path.
	versionedPid := must(t, c, "node4", "setsid sh "+helper+" </dev/null >/dev/null 2>&1 & echo $!")
	inits := map[string]string{}
	for _, n := range online(c) {
		inits[n] = must(t, c, n, "cut -d' ' -f22 /proc/1/stat")
	}

	res := cutover(t, c, "upgrade", "--to=1.1.0", "--yes")
	if res.ExitCode != 0 {
		t.Fatalf("exit %d, want 0", res.ExitCode)
	}
	checkAt(t, c, "1.1.0", online(c)...)
	checkRunComplete(t, c, "1.0.0", "1.1.0")
	for _, n := range online(c) {
		if got := must(t, c, n, "cut -d' ' -f22 /proc/1/stat"); got != inits[n] {
			t.Errorf("%s: process 1 started at %s, was %s: the node's init was killed", n, got, inits[n])
		}
	}
	for _, p := range []struct{ node, pid, what string }{{"node2", userPid, "the user's program of the old tree"}, {"node2", forgedPid, "the user's program with a forged path"}} {
		if sh(t, c, p.node, "kill -0 "+p.pid).ExitCode != 0 {
			t.Errorf("%s: %s (pid %s) was ended", p.node, p.what, p.pid)
		}
	}
	for _, p := range []struct{ node, pid, what string }{{"node3", linkedPid, "the helper through the links"}, {"node4", versionedPid, "the helper by its versioned path"}} {
		if sh(t, c, p.node, "kill -0 "+p.pid).ExitCode == 0 {
			t.Errorf("%s: %s of the old version (pid %s) still runs", p.node, p.what, p.pid)
		}
	}
	out := res.Stdout + res.Stderr
	for _, want := range []string{
		"node3: daemons of another version run (pid " + linkedPid + ` ("/usr/bin/dash") started before the run stopped the node's daemons`,
		"node4: daemons of another version run (pid " + versionedPid + ` runs the script "` + helper + `"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output does not say %q", want)
		}
	}
	if strings.Contains(out, "pid 1 ") || strings.Contains(out, forgedPid+" (uid") {
		t.Errorf("the output names pid 1 or the forged program:\n%s", out)
	}
}
