package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/nodes/sshdtest"
	"github.com/cutover/cutover/upgrade"
	"github.com/cutover/cutover/upgrade/upgradetest"
)

// The fixture of TestCrashPoints: a cluster in a temporary directory whose commands leave
// state the test can observe, cutover run in a process of its own so that it can die, and what
// the test reads back (links, config, daemons, flags, intent, journal, stray processes).

// Timing of the crash-point test.
const (
	// crashStopSleep is how long daemons_stop takes: long enough that a point killing "while
	// the command runs" (30 ms after it started) lands while it runs.
	crashStopSleep = "0.2"
	// crashSlowStopSleep is how long daemons_stop takes when the point kills cutover while a
	// stop runs (or right after one ended while others still run): longer than
	// crashOutliveGrace, so a stop that was not killed is still seen alive.
	crashSlowStopSleep = "2"
	// crashOutliveGrace is how long after cutover died its commands may still be seen alive.
	// Killing a process group takes microseconds, but on a loaded machine the watcher that
	// does it may wait that long to be scheduled.
	crashOutliveGrace = time.Second
	// crashSettle bounds the wait, after the recovery, for stray commands to end by themselves.
	crashSettle = 3 * time.Second
	// crashCutoverTimeout bounds one cutover process: more is a hang.
	crashCutoverTimeout = 90 * time.Second
	// crashRecoveryAttempts is how often a recovery command is repeated while it exits 3.
	crashRecoveryAttempts = 3
)

// crashVersions are the application versions every fixture installs.
var crashVersions = []string{"1.0.0", "1.1.0"}

// crashFixture is a cluster in a temporary directory, like localCluster, whose commands leave
// observable state: run/daemons.NODE says "stopped" or "running VERSION" (read through the
// live links), run/drained and run/paused are the queue's and the reconciler's flags, and
// run/events records when each daemons_stop started and ended and when the test started each
// cutover. Every command names the fixture's root, so a process that outlives cutover is found
// by its command line (or, for daemons_stop's sleep, its environment).
type crashFixture struct {
	root, cfg string
	master    string
	nodes     []string // every node, the master first
	runs      int      // cutover processes started so far
	// powerCut, when set, is the mount point of the file system that holds the root: a crash
	// point cuts its power before it kills cutover (upgrade.CrashPowerCutEnv).
	powerCut string
	// views are the nodes' mount namespaces when they have views of their own (see
	// crashnodes_test.go); bound lists the node and mount point of every view attached.
	views *nodeViews
	bound [][2]string
	// nodeDisks are the file systems of the nodes that have their own, from diskSet.
	nodeDisks map[string]*powerDisk
	diskSet   *powerDisks
}

// fixtureOpts describe a crash fixture.
type fixtureOpts struct {
	live string
	// flagsSet drains the queue and pauses the reconciler before the run, as an operator may.
	flagsSet bool
	// failStop makes daemons_stop fail after it stopped the daemons: the run undoes itself.
	failStop bool
	// execMigrate migrates the config with a command that fails without changing it: the run
	// fails at its point of no return stage, still before the point, and undoes the switch.
	execMigrate bool
	// ssh, when set, adds its servers as nodes node2, node3, ...; they share this host's file
	// system, so they share the links and the config with the master. sshDir is a directory
	// the servers' login can reach, where the fixture is made.
	ssh    *sshdtest.Cluster
	sshDir string
	// stopSleep, when set, is how long daemons_stop takes instead of crashStopSleep.
	stopSleep string
	// rolling switches the nodes batch by batch ([strategy] mode = "rolling"), each drained
	// (run/nodedrained.NODE) and verified by the node_* commands; 1.1.0's upgrade policy lets
	// 1.0 run beside it.
	rolling bool
	// failVerify makes node_verify fail: the rolling run switches its batches back.
	failVerify bool
	// root, when set, is an empty directory made for the fixture (a file system of its own,
	// in the power-cut mode); otherwise the fixture makes a new one under its base.
	root string
	// views, with ssh, gives every ssh node links of its own (crashnodes_test.go): its etc
	// is nodes/NAME/etc, where the node's links point at nodeLive[NAME], or else at live.
	views    *nodeViews
	nodeLive map[string]string
	// nodeDisks, with views, puts every ssh node's etc and usr on a file system of its own
	// from this set, mounted at nodes/NAME: the node's power-cut mode.
	nodeDisks *powerDisks
	// maxFailed is the rolling strategy's max_failed.
	maxFailed int
	// failVerifyNode makes node_verify fail for that node only.
	failVerifyNode string
	// redist sets redist_conf, which writes the live version to var/lib/app/ssconf_version,
	// a file restart_watch names; the daemons record what they read of it as they start
	// (run/read.NODE), so that a daemon left running with what redist_conf replaced shows.
	redist bool
	// extraVersion, when set, installs one more version, with a few files, that no run needs.
	extraVersion string
	// watch, when set, is the run's watch window ([policy] watch), checked every second.
	watch string
}

// liveOf returns the version node's links start at.
func (o fixtureOpts) liveOf(node string) string {
	if v, ok := o.nodeLive[node]; ok {
		return v
	}
	return o.live
}

// crashCommandName matches a command of the fixture: each starts with ": NAME;", a no-op
// that names it in crash points and process listings.
var crashCommandName = regexp.MustCompile(`: ([a-z_]+);.*$`)

// newCrashFixture makes a fixture in a new directory under base.
func newCrashFixture(base string, o fixtureOpts) (*crashFixture, error) {
	if o.ssh != nil {
		base = o.sshDir
	}
	root := o.root
	if root == "" {
		var err error
		if root, err = os.MkdirTemp(base, "p"); err != nil {
			return nil, err
		}
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	f := &crashFixture{root: root, cfg: filepath.Join(root, "cutover.toml"), master: host, nodes: []string{host},
		views: o.views, nodeDisks: map[string]*powerDisk{}, diskSet: o.nodeDisks}
	if o.ssh != nil {
		for i := range o.ssh.Servers {
			f.nodes = append(f.nodes, fmt.Sprintf("node%d", i+2))
		}
	}
	var errs []error
	do := func(err error) { errs = append(errs, err) }
	mkdir := func(rel string) { do(os.MkdirAll(f.path(rel), 0o755)) }
	write := func(rel, data string, perm fs.FileMode) {
		do(os.WriteFile(f.path(rel), []byte(data), perm))
		do(os.Chmod(f.path(rel), perm))
	}
	do(os.Chmod(root, 0o755))
	// trees installs the versions under dir (the root, or a node's own directory) and points
	// dir's links at live.
	trees := func(dir, live string) {
		for _, v := range crashVersions {
			mkdir(dir + "usr/lib/app/" + v + "/usr/sbin")
			mkdir(dir + "usr/share/app/" + v + "/cutover/migrations")
			write(dir+"usr/share/app/"+v+"/VERSION", v+"\n", 0o644)
			if v != "1.0.0" && o.rolling {
				write(dir+"usr/share/app/"+v+"/cutover/upgrade-policy.json", `{"rolling_from": ">= 1.0, < 1.2"}`, 0o644)
			}
			if v != "1.0.0" {
				write(dir+"usr/share/app/"+v+"/cutover/migrations/1.0-1.1.json",
					`{"from":"1.0","to":"1.1","up":[{"op":"move","from":"/name","path":"/title"}],"down":[{"op":"move","from":"/title","path":"/name"}]}`, 0o644)
			}
		}
		if v := o.extraVersion; v != "" {
			mkdir(dir + "usr/lib/app/" + v + "/usr/sbin")
			write(dir+"usr/lib/app/"+v+"/usr/sbin/app", "app "+v+"\n", 0o755)
			mkdir(dir + "usr/share/app/" + v + "/doc")
			write(dir+"usr/share/app/"+v+"/VERSION", v+"\n", 0o644)
			write(dir+"usr/share/app/"+v+"/doc/README", "read me\n", 0o644)
		}
		mkdir(dir + "etc/app")
		do(os.Symlink(f.path("usr/lib/app/"+live), f.path(dir+"etc/app/lib")))
		do(os.Symlink(f.path("usr/share/app/"+live), f.path(dir+"etc/app/share")))
	}
	trees("", o.live)
	if o.views != nil {
		for _, n := range f.nodes[1:] {
			dir := "nodes/" + n + "/"
			mkdir(dir)
			if o.nodeDisks != nil {
				disk, err := o.nodeDisks.createAt(f.path(dir), nil)
				if err != nil {
					return nil, fmt.Errorf("crash fixture: %s's disk: %w", n, err)
				}
				f.nodeDisks[n] = disk
				trees(dir, o.liveOf(n))
			} else {
				mkdir(dir + "etc/app")
				do(os.Symlink(f.path("usr/lib/app/"+o.liveOf(n)), f.path(dir+"etc/app/lib")))
				do(os.Symlink(f.path("usr/share/app/"+o.liveOf(n)), f.path(dir+"etc/app/share")))
			}
		}
	}
	mkdir("var/lib/app")
	field := "name"
	if o.live >= "1.1" {
		field = "title"
	}
	write("var/lib/app/config.json", fmt.Sprintf("{\n  %q: \"demo\",\n  \"version\": %q\n}\n", field, o.live), 0o644)
	mkdir("run")
	mkdir("test")
	for _, n := range f.nodes {
		write("run/daemons."+n, "running "+o.liveOf(n)+"\n", 0o666)
	}
	if o.redist {
		write("var/lib/app/ssconf_version", o.live+"\n", 0o644)
		for _, n := range f.nodes {
			write("run/read."+n, o.live+"\n", 0o666)
		}
	}
	write("run/events", "", 0o666)
	write("run/calls", "", 0o666)
	if o.flagsSet {
		write("run/drained", "", 0o644)
		write("run/paused", "", 0o644)
	}
	if o.ssh != nil {
		// The nodes write the links, the config and their state as the servers' login.
		u, err := user.Lookup(o.ssh.User)
		if err != nil {
			return nil, err
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, rel := range []string{"etc/app", "etc/app/lib", "etc/app/share", "var/lib/app", "var/lib/app/config.json", "run"} {
			do(os.Lchown(f.path(rel), uid, gid))
		}
		for _, n := range f.nodes[1:] {
			do(os.Lchown(f.path("run/daemons."+n), uid, gid))
			if o.views != nil {
				for _, rel := range []string{"etc/app", "etc/app/lib", "etc/app/share"} {
					do(os.Lchown(f.path("nodes/"+n+"/"+rel), uid, gid))
				}
			}
		}
	}
	write("cutover.toml", f.config(o), 0o600)
	for _, d := range f.nodeDisks {
		do(d.sync()) // the state a point starts from
	}
	do(f.attachViews())
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(fmt.Errorf("crash fixture: %w", err), f.release())
	}
	return f, nil
}

// runningTest is the fixture's test that the node's daemons run (the root is %[1]s): the
// fixture's commands use the shell's builtins where they can, as each process they start
// costs the crash-point test, which runs them tens of thousands of times, CPU time.
const runningTest = `l=; read -r l <%[1]s/run/daemons.{node}; case $l in running*) ;; *) false;; esac`

// config is the fixture's cutover.toml.
func (f *crashFixture) config(o fixtureOpts) string {
	r := f.root
	events := r + "/run/events"
	daemons := r + "/run/daemons.{node}"
	sleep := crashStopSleep
	if o.stopSleep != "" {
		sleep = o.stopSleep
	}
	stop := fmt.Sprintf(": daemons_stop; echo stop-start $$ {node} >> %[1]s; CRASH_FIXTURE=%[3]s sleep %[4]s; echo stopped > %[2]s; echo stop-end $$ {node} >> %[1]s", events, daemons, r, sleep)
	if o.failStop {
		stop += "; echo the daemons stopped but the stop command failed >&2; exit 7"
	}
	commands := [][2]string{
		{"daemons_stop", stop},
		{"daemons_start", fmt.Sprintf(": daemons_start; v=; read -r v <%[1]s/etc/app/share/VERSION; echo running $v > %[2]s; echo start {node} >> %[3]s", r, daemons, events)},
		{"queue_drain", fmt.Sprintf(": queue_drain; : >>%s/run/drained", r)},
		// Like Ganeti's, the undrain and the continue are not idempotent: undraining an
		// open queue fails (Ganeti's master daemon never answers it), so a resumed run must
		// not repeat what an earlier execution finished.
		{"queue_undrain", fmt.Sprintf(": queue_undrain; test -e %[1]s/run/drained || { echo the queue is not drained >&2; exit 1; }; rm -f %[1]s/run/drained", r)},
		{"queue_drained", fmt.Sprintf(": queue_drained; test -e %s/run/drained", r)},
		{"queue_busy", fmt.Sprintf(": queue_busy; test -d %s/run && echo 0", r)},
		{"reconciler_pause", fmt.Sprintf(": reconciler_pause; : >>%s/run/paused", r)},
		{"reconciler_continue", fmt.Sprintf(": reconciler_continue; test -e %[1]s/run/paused || { echo the reconciler is not paused >&2; exit 1; }; rm -f %[1]s/run/paused", r)},
		{"reconciler_paused", fmt.Sprintf(": reconciler_paused; test -e %s/run/paused", r)},
		{"ensure_dirs", fmt.Sprintf(": ensure_dirs; echo ensure-dirs {node} >> %s/run/calls", r)},
		{"post_upgrade", fmt.Sprintf(": post_upgrade; echo post-upgrade {from} >> %s/run/calls", r)},
		{"verify", fmt.Sprintf(": verify; echo verify >> %[1]s/run/calls; "+runningTest, r)},
	}
	if o.redist {
		commands[1][1] += fmt.Sprintf("; cat %[1]s/var/lib/app/ssconf_version > %[1]s/run/read.{node}", r)
		commands = append(commands, [2]string{"redist_conf", fmt.Sprintf(": redist_conf; cat %[1]s/etc/app/share/VERSION > %[1]s/var/lib/app/ssconf_version", r)})
	}
	if o.rolling {
		verify := fmt.Sprintf(": node_verify; "+runningTest, r)
		if o.failVerify {
			verify += "; echo the node does not answer >&2; exit 1"
		}
		if o.failVerifyNode != "" {
			verify += fmt.Sprintf("; [ {node} != %s ] || { echo the node does not answer >&2; exit 1; }", o.failVerifyNode)
		}
		commands = append(commands,
			[2]string{"node_drain", fmt.Sprintf(": node_drain; : >>%s/run/nodedrained.{node}", r)},
			[2]string{"node_undrain", fmt.Sprintf(": node_undrain; rm -f %s/run/nodedrained.{node}", r)},
			[2]string{"node_verify", verify})
	}
	conf := upgradetest.TOML{Root: r, Master: f.master, Commands: commands}
	if o.ssh != nil {
		for i, s := range o.ssh.Servers {
			conf.Nodes = append(conf.Nodes, upgradetest.TOMLNode{Name: f.nodes[i+1], Address: s.Addr, Port: s.Port})
		}
		conf.SSH = &upgradetest.TOMLSSH{User: o.ssh.User, IdentityFile: o.ssh.IdentityFile, KnownHosts: o.ssh.KnownHosts, Parallel: 8}
	}
	var b strings.Builder
	if o.redist {
		fmt.Fprintf(&b, "restart_watch = [\"%s/var/lib/app/ssconf_*\"]\n", r)
	}
	if o.rolling {
		timeout := "60s"
		switch {
		case o.failVerify:
			timeout = "3s" // node_verify is retried for half of it
		case o.failVerifyNode != "":
			// The failing node's batch must fail its verify, not time out, however loaded
			// the machine: node_verify is retried for half of it, and the batch needs about
			// a second besides.
			timeout = "20s"
		}
		fmt.Fprintf(&b, "[strategy]\nmode = \"rolling\"\nbatch_timeout = %q\nmax_failed = %d\n", timeout, o.maxFailed)
	}
	if o.watch != "" {
		fmt.Fprintf(&b, "[policy]\nwatch = %q\nwatch_interval = \"1s\"\n", o.watch)
	}
	conf.Tables = b.String()
	if o.execMigrate {
		migrate := fmt.Sprintf(": migrate; echo migrate {from} {to} >> %s/run/calls; echo the migration tool refuses this config >&2; exit 1", r)
		conf.ConfigKeys = fmt.Sprintf("migrate = \"exec\"\nupgrade_command = %q\ndowngrade_command = %q\n", migrate, migrate)
	}
	return conf.Render()
}

func (f *crashFixture) path(rel string) string { return filepath.Join(f.root, rel) }

// stageSource writes a source for `cutover stage --version=v` under src/ and returns it: the
// two trees under their real paths, a few files, a link and an empty directory.
func (f *crashFixture) stageSource(v string) (string, error) {
	src := f.path("src")
	lib := filepath.Join(src, f.path("usr/lib/app/"+v))
	share := filepath.Join(src, f.path("usr/share/app/"+v))
	var errs []error
	for p, data := range map[string]string{
		filepath.Join(lib, "usr/sbin/app"):  "app " + v + "\n",
		filepath.Join(lib, "usr/lib/x.so"):  strings.Repeat("x", 4096),
		filepath.Join(share, "VERSION"):     v + "\n",
		filepath.Join(share, "doc/README"):  "read me\n",
		filepath.Join(share, "empty/.keep"): "",
	} {
		errs = append(errs, os.MkdirAll(filepath.Dir(p), 0o755), os.WriteFile(p, []byte(data), 0o644))
	}
	errs = append(errs, os.Symlink("../usr/sbin/app", filepath.Join(lib, "usr/app-link")))
	return src, errors.Join(errs...)
}

// norm makes text from a fixture readable and comparable: the root becomes $ROOT and a
// command of the fixture is named by its key.
func (f *crashFixture) norm(s string) string {
	s = strings.ReplaceAll(s, f.root, "$ROOT")
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		lines = append(lines, crashCommandName.ReplaceAllString(l, "$1"))
	}
	return strings.Join(lines, "\n")
}

// event appends a line to run/events.
func (f *crashFixture) event(format string, args ...any) {
	fh, err := os.OpenFile(f.path("run/events"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o666)
	if err != nil {
		return
	}
	defer fh.Close()
	fmt.Fprintf(fh, format+"\n", args...)
}

// crashRun is one finished cutover process.
type crashRun struct {
	args   []string
	code   int  // exit code, -1 when killed or hung
	killed bool // died of SIGKILL: at its crash point
	hung   bool // did not end within crashCutoverTimeout
	stdout string
	stderr string
	points []string // its crash log: "N description", normalized
	took   time.Duration
	// stacks are the goroutines of a hung run that were in cutover's code when it was
	// stopped (Go prints every goroutine's stack on SIGQUIT).
	stacks string
}

// String describes the run for a report: command, exit and the end of its output.
func (r crashRun) String() string {
	exit := fmt.Sprintf("exit %d", r.code)
	switch {
	case r.hung:
		exit = "HUNG (killed after " + crashCutoverTimeout.String() + ")"
	case r.killed:
		exit = "killed at its crash point"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cutover %s: %s in %s", strings.Join(r.args, " "), exit, r.took.Round(time.Millisecond))
	if r.hung && len(r.points) > 0 {
		fmt.Fprintf(&b, "\n        last crash points: %s", strings.Join(lastOf(r.points, 3), "; "))
	}
	if out := lastLines(r.stdout, 8); out != "" {
		fmt.Fprintf(&b, "\n        stdout: %s", strings.ReplaceAll(out, "\n", "\n                "))
	}
	if e := lastLines(r.stderr, 4); e != "" {
		fmt.Fprintf(&b, "\n        stderr: %s", strings.ReplaceAll(e, "\n", "\n                "))
	}
	if r.stacks != "" {
		fmt.Fprintf(&b, "\n        goroutines in cutover's code:\n%s", r.stacks)
	}
	return b.String()
}

// lastOf returns the last n elements of list.
func lastOf(list []string, n int) []string {
	return list[max(0, len(list)-n):]
}

// cutoverStacks keeps, of a Go goroutine dump, the goroutines with a frame in cutover's
// packages, each cut to its frames there.
func cutoverStacks(dump string) string {
	var b strings.Builder
	for _, g := range strings.Split(dump, "\n\n") {
		header, rest, _ := strings.Cut(strings.TrimLeft(g, "\n"), "\n")
		if !strings.HasPrefix(header, "goroutine ") {
			continue
		}
		// A frame is a function line, then its file and line, indented by a tab.
		var frames []string
		lines := strings.Split(rest, "\n")
		for i, l := range lines {
			if strings.HasPrefix(l, "\t") || !strings.Contains(l, "cutover/cutover/") || strings.Contains(l, "cmd/cutover.main") {
				continue
			}
			frame := "                  " + l
			if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "\t") {
				if file, _, _ := strings.Cut(strings.TrimSpace(lines[i+1]), " "); file != "" {
					frame += " " + file
				}
			}
			frames = append(frames, frame)
		}
		if len(frames) > 0 {
			fmt.Fprintf(&b, "              %s\n%s\n", header, strings.Join(frames, "\n"))
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// crashBinary is the test binary, run as cutover.
var crashBinary string

// cutover runs cutover on the fixture in a process of its own, killing itself at its crashAt-th
// crash point when crashAt > 0.
func (f *crashFixture) cutover(crashAt int, args ...string) crashRun {
	f.runs++
	n := f.runs
	logPath := f.path(fmt.Sprintf("test/crash-%d.log", n))
	outPath := f.path(fmt.Sprintf("test/out-%d", n))
	errPath := f.path(fmt.Sprintf("test/err-%d", n))
	f.event("begin %d cutover %s", n, strings.Join(args, " "))
	run := crashRun{args: args, code: -1}
	stdout, err1 := os.Create(outPath)
	stderr, err2 := os.Create(errPath)
	if err := errors.Join(err1, err2); err != nil {
		run.stderr = err.Error()
		return run
	}
	defer stdout.Close()
	defer stderr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), crashCutoverTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, crashBinary, append([]string{"--config", f.cfg}, args...)...)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "CUTOVER_") || strings.HasPrefix(kv, "SSH_AUTH_SOCK=")
	})
	cmd.Env = append(cmd.Env, crashMainEnv+"=1", upgrade.CrashLogEnv+"="+logPath)
	if crashAt > 0 {
		cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d", upgrade.CrashAtEnv, crashAt))
		if f.powerCut != "" {
			cmd.Env = append(cmd.Env, upgrade.CrashPowerCutEnv+"="+f.powerCut)
		}
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A run that hangs is asked for its goroutines first (Go prints them on SIGQUIT and
	// exits), so the report says where it hung; it is killed if that does not end it.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	run.took = time.Since(start)
	out, _ := os.ReadFile(outPath)
	errOut, _ := os.ReadFile(errPath)
	run.stdout, run.stderr = f.norm(string(out)), f.norm(string(errOut))
	if cmd.ProcessState == nil {
		run.stderr += fmt.Sprintf("\n(could not run: %v)", err)
	} else {
		run.code = cmd.ProcessState.ExitCode()
		run.hung = ctx.Err() != nil
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			run.killed = !run.hung
		}
	}
	if run.hung {
		before, dump, _ := strings.Cut(run.stderr, "SIGQUIT: quit")
		run.stderr, run.stacks, run.code = before, cutoverStacks(dump), -1
	}
	if data, err := os.ReadFile(logPath); err == nil {
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if l != "" {
				run.points = append(run.points, f.norm(l))
			}
		}
	}
	return run
}

// point returns the description of crash point n in the run's crash log.
func (r crashRun) point(n int) string {
	prefix := strconv.Itoa(n) + " "
	for _, l := range r.points {
		if strings.HasPrefix(l, prefix) {
			return strings.TrimPrefix(l, prefix)
		}
	}
	return "(not in the crash log)"
}

// findPoint returns the number of the first (or, with last, the last) crash point whose
// description contains what, or 0.
func (r crashRun) findPoint(what string, last bool) int {
	found := 0
	for _, l := range r.points {
		num, desc, _ := strings.Cut(l, " ")
		if strings.Contains(desc, what) {
			found, _ = strconv.Atoi(num)
			if !last {
				break
			}
		}
	}
	return found
}

// liveCommands lists the processes that belong to the fixture: their command line names its
// root, or their environment carries it (daemons_stop's sleep).
func (f *crashFixture) liveCommands() []string {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(data) == 0 {
			continue // gone, or a zombie
		}
		cmdline := strings.ReplaceAll(strings.TrimRight(string(data), "\x00"), "\x00", " ")
		mine := strings.Contains(cmdline, f.root+"/")
		if !mine {
			env, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
			mine = strings.Contains("\x00"+string(env), "\x00CRASH_FIXTURE="+f.root+"\x00")
		}
		if mine {
			cmdline = crashCommandName.ReplaceAllString(strings.ReplaceAll(cmdline, f.root, "$ROOT"), ": $1; …")
			out = append(out, fmt.Sprintf("pid %d: %s", pid, cmdline))
		}
	}
	return out
}

// waitCommands waits up to d for the fixture's processes to end and returns those left.
func (f *crashFixture) waitCommands(d time.Duration) []string {
	deadline := time.Now().Add(d)
	for {
		left := f.liveCommands()
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// staleStops reads run/events for daemons_stop commands that ended after a later cutover
// began: a command of a dead execution racing the next one. harmful lists those that wrote
// "stopped" after that cutover had started the node's daemons.
func (f *crashFixture) staleStops() (racing, harmful []string) {
	data, _ := os.ReadFile(f.path("run/events"))
	phase := 0
	begins := map[int]string{}
	started := map[string]int{}         // daemons_stop's pid -> phase it started in
	startedDaemons := map[string]bool{} // node -> daemons started in the current phase
	for _, l := range strings.Split(string(data), "\n") {
		fields := strings.Fields(l)
		if len(fields) < 2 {
			continue
		}
		switch fields[0] {
		case "begin":
			phase++
			begins[phase] = strings.Join(fields[2:], " ")
			startedDaemons = map[string]bool{}
		case "stop-start":
			started[fields[1]] = phase
		case "start":
			startedDaemons[fields[1]] = true
		case "stop-end":
			p, ok := started[fields[1]]
			if !ok || p >= phase {
				continue
			}
			node := ""
			if len(fields) > 2 {
				node = fields[2]
			}
			msg := fmt.Sprintf("daemons_stop on %s, started by %q, wrote 'stopped' after %q began", node, begins[p], begins[phase])
			if startedDaemons[node] {
				harmful = append(harmful, msg+" and had started the daemons")
			} else {
				racing = append(racing, msg)
			}
		}
	}
	return racing, harmful
}

// crashWorld is the observable state of a fixture.
type crashWorld struct {
	lib, share string // link targets, root stripped
	config     []byte
	daemons    map[string]string
	drained    bool
	paused     bool
	intent     bool
	temps      []string // hidden (temporary) files in the links' and the config's directories
	// nodesDrained are the run/nodedrained.NODE flags of a rolling run's node_drain.
	nodesDrained []string
	// nodeAt is, for every node with links of its own, the version they point at ("" when
	// they do not point at one), and nodeLinks describes them.
	nodeAt, nodeLinks map[string]string
}

func (f *crashFixture) world() crashWorld {
	w := crashWorld{daemons: map[string]string{}, nodeAt: map[string]string{}, nodeLinks: map[string]string{}}
	if f.views != nil {
		for _, n := range f.nodes[1:] {
			w.nodeAt[n], w.nodeLinks[n] = f.nodeVersion(n)
		}
	}
	read := func(rel string) string {
		t, err := os.Readlink(f.path(rel))
		if err != nil {
			return "(" + err.Error() + ")"
		}
		return strings.TrimPrefix(t, f.root)
	}
	w.lib, w.share = read("etc/app/lib"), read("etc/app/share")
	w.config, _ = os.ReadFile(f.path("var/lib/app/config.json"))
	for _, n := range f.nodes {
		d, err := os.ReadFile(f.path("run/daemons." + n))
		if err != nil {
			w.daemons[n] = "(" + err.Error() + ")"
		} else {
			w.daemons[n] = strings.TrimSpace(string(d))
		}
	}
	exists := func(rel string) bool { _, err := os.Lstat(f.path(rel)); return err == nil }
	w.drained, w.paused, w.intent = exists("run/drained"), exists("run/paused"), exists("state/intent.json")
	w.nodesDrained, _ = filepath.Glob(f.path("run/nodedrained.*"))
	for _, dir := range []string{"etc/app", "var/lib/app"} {
		entries, _ := os.ReadDir(f.path(dir))
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				w.temps = append(w.temps, dir+"/"+e.Name())
			}
		}
	}
	return w
}

// at returns the version both links point at, or "".
func (w crashWorld) at() string {
	for _, v := range crashVersions {
		if w.lib == "/usr/lib/app/"+v && w.share == "/usr/share/app/"+v {
			return v
		}
	}
	return ""
}

// summary is the world in one line, naming config bytes by what they equal.
func (w crashWorld) summary(configs map[string][]byte) string {
	conf := "other bytes: " + strconv.Quote(strings.Join(strings.Fields(string(w.config)), " "))
	names := make([]string, 0, len(configs))
	for name := range configs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if string(configs[name]) == string(w.config) {
			conf = name
			break
		}
	}
	var daemons []string
	for n, d := range w.daemons {
		daemons = append(daemons, fmt.Sprintf("%s %q", n, d))
	}
	sort.Strings(daemons)
	var own []string
	for n, l := range w.nodeLinks {
		own = append(own, n+" "+l)
	}
	sort.Strings(own)
	views := ""
	if len(own) > 0 {
		views = "; nodes' own " + strings.Join(own, ", ")
	}
	return fmt.Sprintf("links %s, %s; config %s; daemons %s; drained %v, paused %v; intent %v; temp files %v%s",
		w.lib, w.share, conf, strings.Join(daemons, ", "), w.drained, w.paused, w.intent, w.temps, views)
}

// tree describes every entry under the application's state and /etc directories: what a
// backup holds and a restore writes.
func (f *crashFixture) tree() map[string]string {
	return f.treeOf("var/lib/app", "etc/app")
}

// describeEntry describes the file, directory or symlink at p: its kind, its mode and a
// digest of its content, or its target.
func describeEntry(f *crashFixture, p string) string {
	info, err := os.Lstat(p)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		t, _ := os.Readlink(p)
		return "symlink -> " + strings.TrimPrefix(t, f.root)
	case info.IsDir():
		return fmt.Sprintf("dir %v", info.Mode().Perm())
	default:
		data, _ := os.ReadFile(p)
		sum := sha256.Sum256(data)
		return fmt.Sprintf("file %v %s", info.Mode().Perm(), hex.EncodeToString(sum[:6]))
	}
}

// withoutTemps splits a tree into its entries and its hidden (temporary) files.
func withoutTemps(tree map[string]string) (map[string]string, []string) {
	out := map[string]string{}
	var temps []string
	for p, e := range tree {
		if strings.HasPrefix(filepath.Base(p), ".") {
			temps = append(temps, p+": "+e)
			continue
		}
		out[p] = e
	}
	sort.Strings(temps)
	return out, temps
}

// treeDiff lists how got differs from want, one entry per path.
func treeDiff(got, want map[string]string) []string {
	var out []string
	for p, w := range want {
		if g, ok := got[p]; !ok {
			out = append(out, fmt.Sprintf("%s missing (want %s)", p, w))
		} else if g != w {
			out = append(out, fmt.Sprintf("%s is %s (want %s)", p, g, w))
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			out = append(out, fmt.Sprintf("%s: unexpected %s", p, g))
		}
	}
	sort.Strings(out)
	return out
}

// journalRuns reads the fixture's journal.
func (f *crashFixture) journalRuns() ([]journal.Run, error) {
	p := f.path("state/journal.db")
	if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return journal.NewStore(p).Runs(context.Background())
}

// lastRun returns the last run of kind in runs.
func lastRun(runs []journal.Run, kind string) (journal.Run, bool) {
	for i := len(runs) - 1; i >= 0; i-- {
		if runs[i].Kind == kind {
			return runs[i], true
		}
	}
	return journal.Run{}, false
}

// journalLine describes a run's place in the journal in one line.
func journalLine(runs []journal.Run, kind string) string {
	r, ok := lastRun(runs, kind)
	if !ok {
		return "no " + kind + " run"
	}
	last := "no events"
	if len(r.Events) > 0 {
		e := r.Events[len(r.Events)-1]
		last = fmt.Sprintf("last event %s %s", e.Stage, e.State)
	}
	return fmt.Sprintf("run %d %s, travel %q, past PONR %v, %s", r.ID, r.Outcome, r.Travel, r.PastPONR, last)
}
