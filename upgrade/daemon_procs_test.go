package upgrade

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cutover/cutover/nodes"
)

// TestProcScriptOnRealProcesses runs the listing and the kill on this machine against real
// processes of root and of another user: the daemons of the old tree (a native one, an
// interpreter's script, one named by a pid file that started before the start, one through
// the links that did) are judged old, the live one, another user's process of the old tree and
// a process whose path was made to look like a listing's line are not; the kill ends exactly
// the processes it is given, by pid and start time.
func TestProcScriptOnRealProcesses(t *testing.T) {
	var missing []string
	for _, p := range []string{"find", "sleep", "grep", "awk", "tr", "unshare", "mount"} {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	if os.Geteuid() != 0 {
		missing = append(missing, "root (to run a process as another user)")
	}
	if len(missing) > 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the test needs %s", strings.Join(missing, ", "))
		}
		t.Skipf("the test needs %s (with CI=true this is a failure)", strings.Join(missing, ", "))
	}
	sleep, _ := exec.LookPath("sleep")
	dir := t.TempDir()
	// Another user must reach the copies: the temporary directories are 0700.
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	lib, share := filepath.Join(dir, "usr/lib/app"), filepath.Join(dir, "usr/share/app")
	data, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	write := func(p string, data []byte, mode os.FileMode) string {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, v := range []string{"1.0", "1.1"} {
		write(filepath.Join(lib, v, "usr/sbin/appd"), data, 0o755)
		write(filepath.Join(lib, v, "usr/sbin/appd.sh"), []byte("sleep 60\n:\n"), 0o755)
		write(filepath.Join(share, v, "README"), nil, 0o644)
	}
	etc := filepath.Join(dir, "etc/app")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]string{{filepath.Join(lib, "1.1"), filepath.Join(etc, "lib")}, {filepath.Join(share, "1.1"), filepath.Join(etc, "share")},
		{filepath.Join(etc, "lib"), filepath.Join(lib, "default")}} {
		if err := os.Symlink(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	// A directory whose name makes an executable's path look like the listing of pid 1 in
	// the old tree, for a find that prints one process a line.
	evil := write(filepath.Join(dir, "evil", "x\n1 "+lib+"/1.0", "sleep"), data, 0o755)

	start := func(user bool, argv ...string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command(argv[0], argv[1:]...)
		if user {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
		return cmd
	}
	oldNative := start(false, filepath.Join(lib, "1.0/usr/sbin/appd"), "60")
	usersOld := start(true, filepath.Join(lib, "1.0/usr/sbin/appd"), "60")
	// Another user's program of the old tree whose name holds a tab and terminal escapes.
	controls := start(true, write(filepath.Join(lib, "1.0/usr/sbin", "a\tb\x1b[31m\x07"), data, 0o755), "60")
	script := start(false, "sh", filepath.Join(lib, "1.0/usr/sbin/appd.sh"))
	throughLinks := start(false, "sh", filepath.Join(lib, "default/usr/sbin/appd.sh"))
	named := start(false, sleep, "61")
	unnamed := start(false, sleep, "62")
	forged := start(true, evil, "60")
	// A daemon of the old tree in a mount namespace of its own, where the tree is bind-mounted
	// elsewhere, named by its pid file.
	mnt := filepath.Join(dir, "mnt")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	bound := start(false, "unshare", "-m", "--propagation", "private", "sh", "-c", "mount --bind \"$0\" \"$1\" && exec \"$1/usr/sbin/appd\" 60",
		filepath.Join(lib, "1.0"), mnt)
	run := filepath.Join(dir, "run")
	write(filepath.Join(run, "app/appd.pid"), []byte(strconv.Itoa(named.Process.Pid)+"\n"), 0o644)
	write(filepath.Join(run, "app/bound.pid"), []byte(strconv.Itoa(bound.Process.Pid)+"\n"), 0o644)
	// A pid file in a directory anyone may write is no daemon's.
	write(filepath.Join(run, "open/appd.pid"), []byte(strconv.Itoa(unnamed.Process.Pid)+"\n"), 0o644)
	if err := os.Chmod(filepath.Join(run, "open"), 0o777); err != nil {
		t.Fatal(err)
	}

	// The run's stop of the daemons, after all of those.
	time.Sleep(50 * time.Millisecond)
	now, err := exec.Command("sh", "-c", "cat /proc/self/stat").Output()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(now[strings.LastIndexByte(string(now), ')')+1:]))
	tick, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	// The live daemon, which the run's start started after the stop.
	time.Sleep(20 * time.Millisecond)
	live := start(false, filepath.Join(lib, "1.1/usr/sbin/appd"), "60")

	isVersion := func(name string) bool { return name == "1.0" || name == "1.1" }
	out, err := exec.Command("sh", "-c", procScript, "cutover-check", lib, share, filepath.Join(etc, "lib"), filepath.Join(etc, "share"),
		"root,daemon", filepath.Join(run, "*/*.pid")).Output()
	if err != nil {
		t.Fatalf("listing: %v", err)
	}
	l, err := parseProcListing(out)
	if err != nil {
		t.Fatalf("listing: %v", err)
	}
	l.pidGlobs = true
	if !nodes.ValidBoot(l.boot) || l.boot == "" {
		t.Errorf("boot identity %q", l.boot)
	}
	if _, ok := l.procs[1]; ok && l.procs[1].exe != "" && strings.Contains(l.procs[1].exe, "evil") {
		t.Errorf("the forged path was read as pid 1: %+v", l.procs[1])
	}
	pidOf := func(cmds ...*exec.Cmd) []int {
		var out []int
		for _, c := range cmds {
			out = append(out, c.Process.Pid)
		}
		slices.Sort(out)
		return out
	}
	oldPids := func(j judged) []int {
		var out []int
		for _, d := range j.old {
			out = append(out, d.pid)
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		name  string
		since startRef
		want  []int
	}{
		{"without the stop's time", startRef{}, pidOf(oldNative, script)},
		// The stop's time judges the daemons the pid files name; the script run through the
		// links, which none names, is judged by its paths alone.
		{"with the stop's time", startRef{boot: l.boot, tick: tick}, pidOf(oldNative, script, named, bound)},
		{"with a stop's time of another boot", startRef{boot: bootA + "/1", tick: tick}, pidOf(oldNative, script)},
	} {
		j := judge(l, lib, share, isVersion, tc.since)
		if got := oldPids(j); !slices.Equal(got, tc.want) {
			t.Errorf("%s: old daemons %v (%v), want %v (live %d, another user's %d, unnamed %d, forged %d)", tc.name, got, j.old, tc.want,
				live.Process.Pid, usersOld.Process.Pid, unnamed.Process.Pid, forged.Process.Pid)
		}
		wantOthers := map[int]bool{usersOld.Process.Pid: true, controls.Process.Pid: true}
		for _, o := range j.others {
			pid, _ := strconv.Atoi(strings.Fields(o)[0])
			if !wantOthers[pid] || !strings.Contains(o, " (uid 65534) ") || strings.ContainsAny(o, "\t\x1b\x07\n") {
				t.Errorf("%s: other user's process reported as %q", tc.name, o)
			}
			delete(wantOthers, pid)
		}
		if len(wantOthers) > 0 {
			t.Errorf("%s: other users' processes %q, want %d and %d", tc.name, j.others, usersOld.Process.Pid, controls.Process.Pid)
		}
	}

	// The kill ends what it is given, and leaves a pid whose start time is not the one given.
	j := judge(l, lib, share, isVersion, startRef{})
	p := nodeProcesses{boot: l.boot, judged: j}
	p.old = append(p.old, oldDaemon{pid: live.Process.Pid, start: l.procs[live.Process.Pid].start + 1})
	line := killLine(p)
	if out, err := exec.Command("sh", "-c", line).CombinedOutput(); err != nil {
		t.Fatalf("kill: %v\n%s", err, out)
	}
	for _, c := range []*exec.Cmd{oldNative, script} {
		if err := c.Process.Signal(syscall.Signal(0)); !errors.Is(err, os.ErrProcessDone) {
			waitGone(t, c)
		}
	}
	for _, c := range []*exec.Cmd{live, usersOld, controls, throughLinks, named, unnamed, forged} {
		if syscall.Kill(c.Process.Pid, 0) != nil {
			t.Errorf("the kill ended %s (pid %d)", c.Path, c.Process.Pid)
		}
	}
	// A kill for another boot signals nothing.
	p = nodeProcesses{boot: bootA + "/1", judged: judged{old: []oldDaemon{{pid: live.Process.Pid, start: l.procs[live.Process.Pid].start}}}}
	if err := exec.Command("sh", "-c", killLine(p)).Run(); err == nil {
		t.Error("a kill for another boot exited 0")
	}
	if syscall.Kill(live.Process.Pid, 0) != nil {
		t.Error("a kill for another boot ended the live daemon")
	}
}

// waitGone waits for c's process to be reaped, at most five seconds.
func waitGone(t *testing.T, c *exec.Cmd) {
	t.Helper()
	for i := 0; i < 50; i++ {
		if c.ProcessState != nil || syscall.Kill(c.Process.Pid, 0) != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("pid %d still runs after the kill", c.Process.Pid)
}

// TestParseProcListing refuses what is not a listing: each malformed record, and a listing
// that does not end; it accepts pids only above 1.
func TestParseProcListing(t *testing.T) {
	for _, tc := range []struct{ name, out, err string }{
		{"empty", "", "cut off"},
		{"no end", "B \x00", "cut off"},
		{"unterminated", "B \x00E", "cut off"},
		{"past the end", "E\x00B \x00", "past its end"},
		{"pid 1", "F 1\x00E\x00", "malformed record"},
		{"pid -1", "F -1\x00E\x00", "malformed record"},
		{"a group", "P -5 0 0 0 0 1 /x\x00E\x00", "malformed record"},
		{"short", "P 5 0 0\x00E\x00", "malformed record"},
		{"uid", "P 5 0 x 0 0 1 /x\x00E\x00", "malformed record"},
		{"unknown", "Z 5\x00E\x00", "malformed record"},
		{"boot", "B " + strings.Repeat("a", 5000) + "\x00E\x00", "boot identity is malformed"},
		{"relative base", "R usr/lib\x00E\x00", "malformed record"},
	} {
		if _, err := parseProcListing([]byte(tc.out)); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.err)
		}
	}
	l, err := parseProcListing([]byte("B \x00U 0\x00F 77\x00P 77 0 0 0 0 12 /usr/bin/x y\nz\x0077/cmdline:a\nb\x00m 77 /usr/lib/app/1.0/a b\x00E\x00"))
	if err != nil {
		t.Fatal(err)
	}
	p := l.procs[77]
	if p == nil || p.exe != "/usr/bin/x y\nz" || !slices.Equal(p.args, []string{"a\nb"}) || !slices.Equal(p.maps, []string{"/usr/lib/app/1.0/a b"}) || !l.pidFiles[77] {
		t.Errorf("listing read as %+v, process %+v", l, p)
	}
}

// BenchmarkProcListing runs the node's process listing (procScript) on this machine with 300
// more processes of root than it has, none of them in a tree, named by a pid file or an
// interpreter: what a busy node holds beside its daemons. The listing reads a process's
// status only for the processes it may list, not for every process of the daemons' users.
func BenchmarkProcListing(b *testing.B) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		b.Skip("no sleep")
	}
	for range 300 {
		cmd := exec.Command(sleep, "600")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	// The version trees and the links exist, as on a node, so the listing takes its whole path.
	dir := b.TempDir()
	lib, share, etc := filepath.Join(dir, "usr/lib/app"), filepath.Join(dir, "usr/share/app"), filepath.Join(dir, "etc/app")
	for _, d := range []string{filepath.Join(lib, "1.0"), filepath.Join(share, "1.0"), etc} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for _, l := range [][2]string{{filepath.Join(lib, "1.0"), filepath.Join(etc, "lib")}, {filepath.Join(share, "1.0"), filepath.Join(etc, "share")}} {
		if err := os.Symlink(l[0], l[1]); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		out, err := exec.Command("sh", "-c", procScript, "cutover-check", lib, share, filepath.Join(etc, "lib"),
			filepath.Join(etc, "share"), "root").Output()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := parseProcListing(out); err != nil {
			b.Fatal(err)
		}
	}
}
