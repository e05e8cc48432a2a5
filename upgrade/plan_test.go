package upgrade

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/config"
	"github.com/cutover/cutover/upgrade/upgradetest"
)

// planRun is a Run of three online nodes and one offline, without connections.
func planRun(t *testing.T, d Direction, cmds config.CommandsConfig) *Run {
	t.Helper()
	inv, err := nodes.NewInventory("node1", []nodes.Node{{Name: "node1"}, {Name: "node2"}, {Name: "node3"}, {Name: "node4", Offline: true}})
	if err != nil {
		t.Fatal(err)
	}
	return &Run{Target: Target{Direction: d}, Config: &config.Config{Commands: cmds}, Inventory: inv, Online: inv.Online(), Offline: inv.Offline()}
}

func TestPlannedStages(t *testing.T) {
	all := config.CommandsConfig{QueueDrain: "d", ReconcilerPause: "p", EnsureDirs: "e", RedistConf: "r", PostUpgrade: "u"}
	tests := []struct {
		name     string
		dir      Direction
		cmds     config.CommandsConfig
		ponr     string
		skipped  []string
		nodesFor map[string][]string
	}{
		{"upgrade", Up, all, "config-upgrade", []string{"config-downgrade"}, map[string][]string{
			"preflight": {"node1"}, "verify-installed": {"node1", "node2", "node3"}, "stop-nodes": {"node2", "node3"},
			"switch": {"node1", "node2", "node3"}, "config-upgrade": {"node1"},
		}},
		{"downgrade", Down, all, "config-downgrade", []string{"config-upgrade"}, map[string][]string{"config-downgrade": {"node1"}}},
		{"same minor", Same, all, "switch", []string{"config-downgrade", "config-upgrade"}, nil},
		{"no optional commands", Up, config.CommandsConfig{}, "config-upgrade",
			[]string{"drain", "pause-reconciler", "config-downgrade", "ensure-dirs", "redist-conf", "restart", "post-upgrade"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stages := plannedStages(planRun(t, tt.dir, tt.cmds))
			if len(stages) != len(Stages()) {
				t.Fatalf("%d stages, want %d", len(stages), len(Stages()))
			}
			var ponr, skipped []string
			for i, s := range stages {
				if s.Index != i+1 {
					t.Errorf("stage %s: index %d, want %d", s.Name, s.Index, i+1)
				}
				if s.PONR {
					ponr = append(ponr, s.Name)
				}
				if s.Skipped {
					skipped = append(skipped, s.Name)
					if len(s.Nodes) != 0 {
						t.Errorf("skipped stage %s lists nodes %v", s.Name, s.Nodes)
					}
				}
				if want, ok := tt.nodesFor[s.Name]; ok && !slices.Equal(s.Nodes, want) {
					t.Errorf("stage %s nodes = %v, want %v", s.Name, s.Nodes, want)
				}
			}
			if !slices.Equal(ponr, []string{tt.ponr}) {
				t.Errorf("PONR stages = %v, want [%s]", ponr, tt.ponr)
			}
			if !slices.Equal(skipped, tt.skipped) {
				t.Errorf("skipped = %v, want %v", skipped, tt.skipped)
			}
		})
	}
}

func TestClockCheck(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	tests := []struct {
		name          string
		secs          int64
		before, after time.Time
		want          string // "" for no warning
	}{
		{"same second", now.Unix(), now.Add(200 * time.Millisecond), now.Add(300 * time.Millisecond), ""},
		{"truncated second", now.Unix(), now.Add(900 * time.Millisecond), now.Add(950 * time.Millisecond), ""},
		{"2s ahead is tolerated", now.Unix() + 2, now, now.Add(10 * time.Millisecond), ""},
		{"3s ahead, certainly", now.Unix() + 3, now, now.Add(10 * time.Millisecond), "node2's clock is 3s ahead of the master's"},
		{"a slow command does not make skew", now.Unix() + 3, now, now.Add(2 * time.Second), ""},
		{"5s behind", now.Unix() - 5, now, now.Add(10 * time.Millisecond), "node2's clock is 4s behind the master's"},
		{"perhaps only 1.5s behind", now.Unix() - 2, now.Add(500 * time.Millisecond), now.Add(510 * time.Millisecond), ""},
		{"at least 2.5s behind", now.Unix() - 3, now.Add(500 * time.Millisecond), now.Add(510 * time.Millisecond), "node2's clock is 3s behind"},
		{"an hour behind", now.Unix() - 3600, now, now.Add(10 * time.Millisecond), "node2's clock is 59m59s behind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := clockCheck("node2", tt.secs, tt.before, tt.after)
			if c.err != nil {
				t.Errorf("clockCheck refused: %v", c.err)
			}
			switch {
			case tt.want == "" && c.warn != "":
				t.Errorf("clockCheck warned %q, want no warning", c.warn)
			case tt.want != "" && !strings.HasPrefix(c.warn, tt.want):
				t.Errorf("clockCheck warning = %q, want %q...", c.warn, tt.want)
			case tt.want == "" && c.note == "":
				t.Errorf("clockCheck says nothing about a clock in step")
			}
		})
	}
}

func TestClockChecks(t *testing.T) {
	w := upgradetest.New(t, upgradetest.Options{Nodes: []string{"node1", "node2", "node3", "node4"}, Offline: []string{"node4"}})
	now := time.Now()
	for node, offset := range map[string]time.Duration{"node1": time.Hour, "node2": 0, "node3": 10 * time.Second} {
		w.Answer(node, "date +%s", fmt.Sprintf("%d\n", now.Add(offset).Unix()))
	}
	r := worldRun(t, w, "1.0.0", "1.1.0")
	var got []string
	for _, c := range clockChecks(context.Background(), r) {
		warned := regexp.MustCompile(`is (9|10)s ahead of the master's`).MatchString(c.warn)
		got = append(got, fmt.Sprintf("%s %s warned=%v note=%v", c.name, c.node, warned, c.note != ""))
	}
	// node3 is 10s ahead: 9s or 10s, as the second date truncates to falls.
	want := []string{"clock node2 warned=false note=true", "clock node3 warned=true note=false"}
	if !slices.Equal(got, want) {
		t.Errorf("clockChecks =\n%s\nwant (the master itself and the unreachable node4 left out)\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestPlanReportFinish(t *testing.T) {
	p := &PlanReport{}
	p.add(checkResult{name: "lock", note: "free"})
	p.add(checkResult{name: "upgrade-path", err: errors.New("1.0.0 -> 2.0.0 changes the major version")})
	p.add(checkResult{name: "clock", node: "node2", warn: "node2's clock is 9s ahead"})
	p.add(checkResult{name: "verify-installed", node: "node3", err: errors.New("node3: app 2.0.0 is not installed")})
	p.finish()
	want := []string{"1.0.0 -> 2.0.0 changes the major version", "node3: app 2.0.0 is not installed"}
	if !slices.Equal(p.Refusals, want) || p.Proceed {
		t.Errorf("refusals = %q, proceed %v; want %q, false", p.Refusals, p.Proceed, want)
	}
	if c := p.Checks[2]; !c.OK || !c.Warning || c.Message != "node2's clock is 9s ahead" {
		t.Errorf("warning check = %+v", c)
	}
	if c := p.Checks[3]; c.OK || c.Message != "app 2.0.0 is not installed" {
		t.Errorf("refusing check = %+v, want the node's name not repeated in the message", c)
	}

	ok := &PlanReport{}
	ok.add(checkResult{name: "lock", note: "free"})
	ok.finish()
	if !ok.Proceed || len(ok.Refusals) != 0 {
		t.Errorf("a plan without refusals: proceed %v, refusals %q", ok.Proceed, ok.Refusals)
	}
}

func TestLockAndPendingChecks(t *testing.T) {
	dir := t.TempDir()
	cfg := &config.Config{Paths: config.PathsConfig{StateDir: filepath.Join(dir, "state")}}
	if c := lockCheck(cfg); c.err != nil {
		t.Errorf("lock check without a lock file: %v", c.err)
	}
	if c := pendingCheck(cfg, "1.1.0"); c.err != nil {
		t.Errorf("pending check without an intent: %v", c.err)
	}
	lock, err := journal.AcquireLock(LockPath(cfg), journal.Holder{Host: "node1", PID: 99})
	if err != nil {
		t.Fatal(err)
	}
	if c := lockCheck(cfg); c.err == nil || !strings.Contains(c.err.Error(), "pid 99 on node1") {
		t.Errorf("lock check with the lock held: %v, want the holder named", c.err)
	}
	lock.Release()
	if c := lockCheck(cfg); c.err != nil {
		t.Errorf("lock check after release: %v", c.err)
	}
	if err := journal.WriteIntent(IntentPath(cfg), journal.Intent{RunID: 4, From: "1.0.0", To: "1.1.0"}); err != nil {
		t.Fatal(err)
	}
	for to, want := range map[string]string{"1.1.0": "would resume it", "1.2.0": "before switching to 1.2.0"} {
		if c := pendingCheck(cfg, to); c.err == nil || !strings.Contains(c.err.Error(), want) || !strings.Contains(c.err.Error(), "run 4") {
			t.Errorf("pending check to %s: %v, want run 4 and %q", to, c.err, want)
		}
	}
}
