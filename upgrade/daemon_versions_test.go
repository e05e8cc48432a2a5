package upgrade

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/config"
)

// TestWrongVersionScripts runs the two scripts on this machine against real processes: a
// copy of sleep in a live tree and one in another tree of the same application. The check
// names the other tree's process only, and the kill ends it and leaves the live one.
func TestWrongVersionScripts(t *testing.T) {
	_, errFind := exec.LookPath("find")
	sleep, err := exec.LookPath("sleep")
	if err = errors.Join(errFind, err); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the scripts need find and sleep: %v", err)
		}
		t.Skipf("the scripts need find and sleep: %v (with CI=true this is a failure)", err)
	}
	dir := t.TempDir()
	base := filepath.Join(dir, "usr/lib/app")
	bins := map[string]string{}
	for _, v := range []string{"1.0", "1.1"} {
		bin := filepath.Join(base, v, "usr/sbin/appd")
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(sleep)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, data, 0o755); err != nil {
			t.Fatal(err)
		}
		bins[v] = bin
	}
	link := filepath.Join(dir, "etc/app/lib")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(base, "1.1"), link); err != nil {
		t.Fatal(err)
	}
	// Each is reaped as soon as it ends (so that a killed one does not linger as a zombie),
	// by one goroutine: the clean-up only kills it and waits for that.
	procs := map[string]*exec.Cmd{}
	ended := map[string]chan struct{}{}
	for v, bin := range bins {
		cmd := exec.Command(bin, "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ch := make(chan struct{})
		procs[v], ended[v] = cmd, ch
		go func() { _ = cmd.Wait(); close(ch) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-ch })
	}

	// The same lib base through a link (as /lib is /usr/lib on a merged /usr), and a find that
	// is refused the glob's list as too long (exit 126), as on a node with a hundred thousand
	// processes: both find the same process.
	through := filepath.Join(dir, "lib")
	if err := os.Symlink(filepath.Join(dir, "usr/lib"), through); err != nil {
		t.Fatal(err)
	}
	shim := filepath.Join(dir, "shim")
	if err := os.MkdirAll(shim, 0o755); err != nil {
		t.Fatal(err)
	}
	find, _ := exec.LookPath("find")
	tooLong := "#!/bin/sh\ncase $1 in [0-9]*/exe) echo \"find: Argument list too long\" >&2; exit 126;; esac\nexec " + find + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(shim, "find"), []byte(tooLong), 0o755); err != nil {
		t.Fatal(err)
	}
	want := strconv.Itoa(procs["1.0"].Process.Pid) + " " + bins["1.0"]
	for _, tc := range []struct {
		name, base string
		env        []string
	}{
		{"lib base", base, nil},
		{"lib base through a link", filepath.Join(through, "app"), nil},
		{"list too long for find", base, []string{"PATH=" + shim + ":" + os.Getenv("PATH")}},
	} {
		cmd := exec.Command("sh", "-c", wrongVersionScript, "cutover-check", tc.base, link)
		cmd.Env = append(os.Environ(), tc.env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: check: %v", tc.name, err)
		}
		lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
		id, _ := os.ReadFile(bootIDPath)
		stat, _ := os.ReadFile(initStatPath)
		if want := bootIdentity(id, stat); lines[0] != want || want == "" {
			t.Errorf("%s: first line %q, want the boot identity %q", tc.name, lines[0], want)
		}
		if got := lines[1:]; !slices.Equal(got, []string{want}) {
			t.Errorf("%s: check found %q, want only %q", tc.name, got, want)
		}
	}

	if out, err := exec.Command("sh", "-c", killWrongScript, "cutover-kill", base, link).CombinedOutput(); err != nil {
		t.Fatalf("kill: %v\n%s", err, out)
	}
	select {
	case <-ended["1.0"]:
	case <-time.After(5 * time.Second):
		t.Fatal("the process of the other tree still runs after the kill")
	}
	select {
	case <-ended["1.1"]:
		t.Fatal("the kill ended the process of the live tree")
	default:
	}
}

// procConn is a node whose process check answers from a script of answers, one per call,
// and which records every command it runs.
type procConn struct {
	dateConn
	mu      sync.Mutex
	checks  []string // stdout of each process check in turn; the last one repeats
	boot    string
	calls   []string
	killErr error
}

func (c *procConn) RunInput(_ context.Context, _ io.Reader, argv ...string) (nodes.Result, error) {
	return nodes.Result{ExitCode: 127}, errors.New("unexpected command " + nodes.QuoteArgs(argv))
}

func (c *procConn) RunShell(_ context.Context, script string) (nodes.Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if script == nodes.QuoteArgs([]string{"sh", "-c", wrongVersionScript, "cutover-check", "/usr/lib/app", "/etc/app/lib"}) {
		c.calls = append(c.calls, "check")
		out := c.checks[0]
		if len(c.checks) > 1 {
			c.checks = c.checks[1:]
		}
		return nodes.Result{Stdout: []byte(out)}, nil
	}
	if strings.Contains(script, killWrongScript) {
		c.calls = append(c.calls, "kill")
		return nodes.Result{}, c.killErr
	}
	c.calls = append(c.calls, script)
	return nodes.Result{}, nil
}

func (c *procConn) ReadFile(name string) ([]byte, error) {
	switch name {
	case bootIDPath:
		return []byte(c.boot + "\n"), nil
	case initStatPath:
		return []byte("1 (init) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 77 1000 10\n"), nil
	}
	return nil, fs.ErrNotExist
}

// TestSettleDaemons: after a start, a node with a daemon of another version, or one that
// booted since its stop, is stopped, cleaned, started again and checked again; one where a
// daemon of another version survives all that fails, naming it.
func TestSettleDaemons(t *testing.T) {
	const wrong = "41 /usr/lib/app/1.0/usr/sbin/appd\n"
	tests := []struct {
		name     string
		stopBoot string   // the boot id when the daemons stopped
		boot     string   // the boot id now
		checks   []string // what each process check prints
		killErr  error
		want     []string
		wantErr  string
	}{
		{name: "clean", stopBoot: "b1", checks: []string{"b1/77\n"}, want: []string{"start", "check"}},
		{name: "no boot id", checks: []string{"\n"}, want: []string{"start", "check"}},
		{name: "a daemon of the old version", stopBoot: "b1", checks: []string{"b1/77\n" + wrong, "b1/77\n"},
			want: []string{"start", "check", "stop", "kill", "start", "check"}},
		{name: "rebooted", stopBoot: "b1", boot: "b2", checks: []string{"b2/77\n", "b2/77\n"},
			want: []string{"start", "check", "stop", "ensure", "kill", "start", "check"}},
		{name: "the daemon survives", stopBoot: "b1", checks: []string{"b1/77\n" + wrong},
			want:    []string{"start", "check", "stop", "kill", "start", "check"},
			wantErr: "node2: daemons of another version still run after a stop and a start: 41 /usr/lib/app/1.0/usr/sbin/appd"},
		{name: "the kill fails", stopBoot: "b1", checks: []string{"b1/77\n" + wrong}, killErr: errors.New("exit 1: still running: 41"),
			want:    []string{"start", "check", "stop", "kill"},
			wantErr: "node2: ending the daemons of another version: exit 1: still running: 41"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lay, err := layout.New("app", layout.Paths{LibDir: "/usr/lib", DataDir: "/usr/share", SysconfDir: "/etc", LocalstateDir: "/var"}, "minor", t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			r := testRun(&memJournal{})
			r.Layout = lay
			r.Config = &config.Config{Commands: config.CommandsConfig{DaemonsStop: "stop", DaemonsStart: "start", EnsureDirs: "ensure"}}
			boot := tt.boot
			if boot == "" {
				boot = tt.stopBoot
			}
			c := &procConn{checks: tt.checks, boot: boot, killErr: tt.killErr}
			if tt.stopBoot != "" {
				r.stoppedAt("node2", tt.stopBoot+"/77")
			}
			err = r.daemonsOn(context.Background(), c, "node2", true)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("daemonsOn: %v", err)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
				t.Fatalf("daemonsOn: %v, want %q", err, tt.wantErr)
			}
			if !slices.Equal(c.calls, tt.want) {
				t.Errorf("commands %q, want %q", c.calls, tt.want)
			}
		})
	}
}

// TestStopRecordsBoot: a stop reads the node's boot identity, which the next start compares.
func TestStopRecordsBoot(t *testing.T) {
	r := testRun(&memJournal{})
	r.Config = &config.Config{Commands: config.CommandsConfig{DaemonsStop: "stop", DaemonsStart: "start"}}
	c := &procConn{boot: "b7"}
	if err := r.daemonsOn(context.Background(), c, "node3", false); err != nil {
		t.Fatal(err)
	}
	if !r.rebooted("node3", "b8/77") || r.rebooted("node3", "b7/77") {
		t.Errorf("boot after the stop = %q, want b7", r.boots["node3"])
	}
}

// procDialer hands out a procConn per node.
type procDialer map[string]*procConn

func (d procDialer) Conn(_ context.Context, node string) (Conn, error) {
	c, ok := d[node]
	if !ok {
		return nil, errors.New(node + ": dial: no route to host")
	}
	return c, nil
}

// TestStatusNamesRebootedNodes: status compares each node's boot identity with the one the
// pending run journaled when it stopped the node; only a node that booted since is named.
func TestStatusNamesRebootedNodes(t *testing.T) {
	inv, err := nodes.NewInventory("node1", []nodes.Node{{Name: "node1"}, {Name: "node2"}, {Name: "node3"}, {Name: "node4"}})
	if err != nil {
		t.Fatal(err)
	}
	lay, err := layout.New("app", layout.Paths{LibDir: "/usr/lib", DataDir: "/usr/share", SysconfDir: "/etc", LocalstateDir: "/var"}, "minor", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := testRun(&memJournal{})
	r.Inventory, r.Layout = inv, lay
	r.Config.SSH.Parallel = 4
	r.dial = procDialer{"node1": {boot: "b1"}, "node2": {boot: "b9"}, "node3": {boot: "b3"}}
	boots := map[string]string{"node1": "b1/77", "node2": "b2/77", "node4": "b4/77"}
	var got []string
	for _, n := range nodeStatuses(context.Background(), r, boots) {
		if n.booted {
			got = append(got, n.Name)
		}
	}
	if !slices.Equal(got, []string{"node2"}) {
		t.Errorf("rebooted nodes %q, want node2 only (node3 has no record, node4 cannot be reached)", got)
	}
}

// TestBootIdentity: a container started again keeps its host's boot id but not its process
// 1's start time; either part alone still makes an identity.
func TestBootIdentity(t *testing.T) {
	stat := func(start string) []byte {
		return []byte("1 (tini (x) y) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 " + start + " 1000 10\n")
	}
	if a, b := bootIdentity([]byte("b1\n"), stat("500")), bootIdentity([]byte("b1\n"), stat("900")); a == b {
		t.Errorf("a container started again keeps its identity %q", a)
	}
	if got := bootIdentity([]byte("b1\n"), stat("500")); got != "b1/500" {
		t.Errorf("bootIdentity = %q, want b1/500", got)
	}
	if got := bootIdentity(nil, nil); got != "" {
		t.Errorf("bootIdentity of nothing = %q, want \"\"", got)
	}
	if got := bootIdentity([]byte("b1"), nil); got != "b1/" {
		t.Errorf("bootIdentity without /proc/1/stat = %q, want b1/", got)
	}
}
