package upgrade

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/config"
	"github.com/cutover/cutover/upgrade/upgradetest"
)

// initStat is a node's /proc/1/stat whose process 1 started at tick 77.
const initStat = "1 (init) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 77 1000 10\n"

// bootedNode gives node of w the boot id boot, its process 1 started at tick 77.
func bootedNode(t *testing.T, w *upgradetest.World, node, boot string) {
	t.Helper()
	w.WriteFile(t, node, bootIDPath, boot+"\n")
	w.WriteFile(t, node, initStatPath, initStat)
}

// nodeCalls returns what node of w ran, its process checks as "check" and its kills as
// "kill", and the arguments of each kill.
func nodeCalls(w *upgradetest.World, node string) (calls, kills []string) {
	for _, s := range w.Sequence() {
		cmd, ok := strings.CutPrefix(s, node+": ")
		if !ok {
			continue
		}
		if i := strings.Index(cmd, "cutover-kill"); i >= 0 {
			kills = append(kills, cmd[i:])
			cmd = "kill"
		}
		calls = append(calls, cmd)
	}
	return calls, kills
}

// Boot ids of the tests.
const (
	bootA = "0b5e0a3c-1111-4a2b-9c3d-000000000001"
	bootB = "0b5e0a3c-2222-4a2b-9c3d-000000000002"
	bootC = "0b5e0a3c-3333-4a2b-9c3d-000000000003"
)

// listing is what procScript prints on a node of the application "app" (lib base
// /usr/lib/app, live tree 1.1, root's daemons) whose boot identity is boot, with records.
func listing(boot string, records ...string) string {
	head := []string{"B " + boot, "R /usr/lib/app", "S /usr/share/app", "L /usr/lib/app/1.1", "M /usr/share/app/1.1", "U 0"}
	return strings.Join(append(append(head, records...), "E"), "\x00") + "\x00"
}

// TestSettleDaemons: after a start, a node with a daemon of another version, or one that
// booted since its stop, is stopped, cleaned, started again and checked again; one where a
// daemon of another version survives all that fails, naming it. Only the daemons judged old
// are ended, by pid and start time.
func TestSettleDaemons(t *testing.T) {
	const wrong = "P 41 0 0 0 0 300 /usr/lib/app/1.0/usr/sbin/appd"
	const other = "X 42 1000 /usr/lib/app/1.0/usr/sbin/appd"
	const python = "P 43 0 0 0 0 400 /usr/bin/python3"
	a, b := bootA+"/77", bootB+"/77"
	tests := []struct {
		name      string
		stopBoot  string   // the boot id when the daemons stopped
		stopIn    string   // the boot id the stop command reports, when not stopBoot
		boot      string   // the boot id now
		tick      uint64   // when the run's stop command started, in the stop's boot
		checks    []string // what each process check prints
		killErr   error
		want      []string
		wantKills []string
		wantErr   string
	}{
		{name: "clean", stopBoot: bootA, checks: []string{listing(a)}, want: []string{"start", "check"}},
		{name: "no boot id", checks: []string{listing("")}, want: []string{"start", "check"}},
		{name: "a daemon of the old version", stopBoot: bootA, checks: []string{listing(a, wrong), listing(a, wrong), listing(a)},
			want: []string{"start", "check", "stop", "check", "kill", "start", "check"}, wantKills: []string{"cutover-kill " + bootA + " 41 300"}},
		{name: "another user's process of the old tree is left alone", stopBoot: bootA, checks: []string{listing(a, other)},
			want: []string{"start", "check"}},
		{name: "a pid file's interpreter daemon that started before the stop", stopBoot: bootA, tick: 500,
			checks: []string{listing(a, python, "F 43"), listing(a, python, "F 43"), listing(a)},
			want:   []string{"start", "check", "stop", "check", "kill", "start", "check"}, wantKills: []string{"cutover-kill " + bootA + " 43 400"}},
		{name: "a process of the trees that no pid file names is not judged by its age", stopBoot: bootA, tick: 500,
			checks: []string{listing(a, python, "43/cmdline:/usr/bin/python3", "43/cmdline:/usr/lib/app/default/usr/sbin/helper.py")},
			want:   []string{"start", "check"}},
		{name: "a pid file's daemon that started after the stop", stopBoot: bootA, tick: 350,
			checks: []string{listing(a, python, "F 43")}, want: []string{"start", "check"}},
		{name: "an interpreter running a script of the old tree", stopBoot: bootA,
			checks: []string{listing(a, python, "43/cmdline:/usr/bin/python3", "43/cmdline:/usr/lib/app/1.0/usr/sbin/appd.py"),
				listing(a, python, "43/cmdline:/usr/bin/python3", "43/cmdline:/usr/lib/app/1.0/usr/sbin/appd.py"), listing(a)},
			want: []string{"start", "check", "stop", "check", "kill", "start", "check"}, wantKills: []string{"cutover-kill " + bootA + " 43 400"}},
		{name: "an interpreter running the live script through the default link", stopBoot: bootA,
			checks: []string{listing(a, python, "43/cmdline:/usr/bin/python3", "43/cmdline:/usr/lib/app/default/usr/sbin/appd.py")},
			want:   []string{"start", "check"}},
		{name: "a script of the base that is no version tree (Ganeti's tools/, daemon-util)", stopBoot: bootA,
			checks: []string{listing(a, python, "43/cmdline:sh", "43/cmdline:/usr/lib/app/tools/master-ip-setup",
				"P 44 0 0 0 0 900 /usr/lib/app/1.1/usr/sbin/appd", "m 44 /usr/lib/app/daemon-util.so")},
			want: []string{"start", "check"}},
		{name: "a daemon mapping a library of the old tree", stopBoot: bootA,
			checks: []string{listing(a, "P 44 0 0 0 0 900 /usr/lib/app/1.1/usr/sbin/appd", "m 44 /usr/lib/app/1.0/lib/libapp.so"),
				listing(a, "P 44 0 0 0 0 900 /usr/lib/app/1.1/usr/sbin/appd", "m 44 /usr/lib/app/1.0/lib/libapp.so"), listing(a)},
			want: []string{"start", "check", "stop", "check", "kill", "start", "check"}, wantKills: []string{"cutover-kill " + bootA + " 44 900"}},
		{name: "a stop of another boot is no reference", stopBoot: bootA, tick: 500, stopIn: bootC,
			checks: []string{listing(a, python, "F 43")}, want: []string{"start", "check"}},
		{name: "rebooted", stopBoot: bootA, boot: bootB, checks: []string{listing(b), listing(b)},
			want: []string{"start", "check", "stop", "ensure", "check", "start", "check"}},
		{name: "the daemon survives", stopBoot: bootA, checks: []string{listing(a, wrong)},
			want:      []string{"start", "check", "stop", "check", "kill", "start", "check"},
			wantKills: []string{"cutover-kill " + bootA + " 41 300"},
			wantErr:   `node2: daemons of another version still run after a stop and a start: pid 41 runs "/usr/lib/app/1.0/usr/sbin/appd"`},
		{name: "the kill fails", stopBoot: bootA, checks: []string{listing(a, wrong)}, killErr: errors.New("exit 1: still running: 41"),
			want:      []string{"start", "check", "stop", "check", "kill"},
			wantKills: []string{"cutover-kill " + bootA + " 41 300"},
			wantErr:   "node2: ending the daemons of another version: exit 1: still running: 41"},
		{name: "a listing cut off", stopBoot: bootA, checks: []string{"B " + a + "\x00P 41 0 0 0 0 300 /usr/lib/app/1.0/usr/sbin/appd\x00"},
			want: []string{"start", "check"}, wantErr: "node2: looking for daemons of another version: the process listing was cut off (no end record)"},
		{name: "a forged boot identity", checks: []string{listing("x\n1 /usr/lib/app/1.0")},
			want: []string{"start", "check"}, wantErr: `node2: looking for daemons of another version: the process listing's boot identity is malformed: "x\n1 /usr/lib/app/1.0"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lay, err := layout.New("app", layout.Paths{LibDir: "/usr/lib", DataDir: "/usr/share", SysconfDir: "/etc", LocalstateDir: "/var"}, "minor", t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			r := testRun(&memJournal{})
			r.Layout = lay
			r.Config = &config.Config{Commands: config.CommandsConfig{DaemonsStop: "stop", DaemonsStart: "start", EnsureDirs: "ensure"},
				Daemons: config.DaemonsConfig{Users: []string{"root"}, PidFiles: []string{"/run/app/*.pid"}}}
			boot := tt.boot
			if boot == "" {
				boot = tt.stopBoot
			}
			w := upgradetest.New(t, upgradetest.Options{})
			bootedNode(t, w, "node2", boot)
			w.AnswerChecks("node2", tt.checks...)
			if tt.tick > 0 {
				// The stop ran in the node's command shell, which knows its boot and start.
				w.SetBoot("node2", boot+"/77")
				w.SetStart("node2", tt.tick)
			}
			if tt.killErr != nil {
				w.FailWith("node2", "cutover-kill", tt.killErr)
			}
			c, err := w.Node("node2")
			if err != nil {
				t.Fatal(err)
			}
			if tt.stopBoot != "" {
				r.stoppedAt("node2", tt.stopBoot+"/77")
			}
			if tt.tick > 0 {
				in := tt.stopIn
				if in == "" {
					in = tt.stopBoot
				}
				r.perNode.stopped = map[string]startRef{"node2": {boot: in + "/77", tick: tt.tick}}
			}
			err = r.daemonsOn(context.Background(), c, "node2", true)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("daemonsOn: %v", err)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
				t.Fatalf("daemonsOn: %v, want %q", err, tt.wantErr)
			}
			calls, kills := nodeCalls(w, "node2")
			if !slices.Equal(calls, tt.want) {
				t.Errorf("commands %q, want %q", calls, tt.want)
			}
			if !slices.Equal(kills, tt.wantKills) {
				t.Errorf("kills %q, want %q", kills, tt.wantKills)
			}
		})
	}
}

// TestStopRecordsBoot: a stop reads the node's boot identity, which the next start compares.
func TestStopRecordsBoot(t *testing.T) {
	r := testRun(&memJournal{})
	r.Config = &config.Config{Commands: config.CommandsConfig{DaemonsStop: "stop", DaemonsStart: "start"}}
	w := upgradetest.New(t, upgradetest.Options{})
	bootedNode(t, w, "node3", bootA)
	w.SetBoot("node3", bootA+"/77")
	w.SetStart("node3", 900)
	c, err := w.Node("node3")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.daemonsOn(context.Background(), c, "node3", false); err != nil {
		t.Fatal(err)
	}
	if got, want := r.perNode.stopped["node3"], (startRef{boot: bootA + "/77", tick: 900}); got != want {
		t.Errorf("the stop's time = %+v, want %+v: a daemon started before it survived the stop", got, want)
	}
	if !r.perNode.rebooted("node3", bootB+"/77") || r.perNode.rebooted("node3", bootA+"/77") {
		t.Errorf("boot after the stop = %q, want %s", r.perNode.boots["node3"], bootA)
	}
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
	w := upgradetest.New(t, upgradetest.Options{Nodes: []string{"node1", "node2", "node3", "node4"}})
	bootedNode(t, w, "node1", bootA)
	bootedNode(t, w, "node2", bootC)
	bootedNode(t, w, "node3", bootC)
	w.Down("node4")
	r.dial = worldDialer{w}
	boots := map[string]string{"node1": bootA + "/77", "node2": bootB + "/77", "node4": bootC + "/77"}
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
	if a, b := nodes.BootIdentity([]byte(bootA+"\n"), stat("500")), nodes.BootIdentity([]byte(bootA+"\n"), stat("900")); a == b {
		t.Errorf("a container started again keeps its identity %q", a)
	}
	if got := nodes.BootIdentity([]byte(bootA+"\n"), stat("500")); got != bootA+"/500" {
		t.Errorf("bootIdentity = %q, want %s/500", got, bootA)
	}
	if got := nodes.BootIdentity(nil, nil); got != "" {
		t.Errorf("bootIdentity of nothing = %q, want \"\"", got)
	}
	if got := nodes.BootIdentity([]byte(bootA), nil); got != bootA+"/" {
		t.Errorf("bootIdentity without /proc/1/stat = %q, want %s/", got, bootA)
	}
	// What a node serves in place of its boot id is no identity: nothing of it is journaled.
	for _, forged := range []string{"b1", strings.Repeat("f", 1<<20), bootA + "\n1 /usr/lib/app/1.0", "\x1b[2J"} {
		if got := nodes.BootIdentity([]byte(forged), stat("500")); got != "" {
			t.Errorf("bootIdentity of a forged boot id %s = %q, want \"\"", escapeShort(forged), escapeShort(got))
		}
	}
}
