package upgrade

import (
	"context"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/config"
)

func TestPlanBatches(t *testing.T) {
	t.Parallel()
	inv, err := nodes.NewInventory("node1", []nodes.Node{{Name: "node1"}, {Name: "node2"}, {Name: "node3"}, {Name: "node4"}, {Name: "node5", Offline: true}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		strategy config.StrategyConfig
		want     string // encodeBatches of the batches
		err      string
	}{
		{"one by one, master last", config.StrategyConfig{BatchSize: 1, Order: []string{config.MasterLast}}, "node2;node3;node4;node1", ""},
		{"canary then pairs", config.StrategyConfig{BatchSize: 2, Canaries: []string{"node3"}, Order: []string{config.MasterLast}}, "c:node3;node2,node4;node1", ""},
		{"master first", config.StrategyConfig{BatchSize: 2, Order: []string{config.MasterFirst}}, "node1,node2;node3,node4", ""},
		{"two canaries, each alone", config.StrategyConfig{BatchSize: 5, Canaries: []string{"node4", "node2"}, Order: []string{config.MasterLast}}, "c:node4;c:node2;node3,node1", ""},
		{"the master as canary", config.StrategyConfig{BatchSize: 3, Canaries: []string{"node1"}, Order: []string{config.MasterLast}}, "c:node1;node2,node3,node4", ""},
		{"unknown canary", config.StrategyConfig{BatchSize: 1, Canaries: []string{"node9"}}, "", "node9 is not a node of the cluster"},
		{"offline canary", config.StrategyConfig{BatchSize: 1, Canaries: []string{"node5"}}, "", "node5 is offline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PlanBatches(tt.strategy, inv)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("PlanBatches() = %v, want an error containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if enc := encodeBatches(got); enc != tt.want {
				t.Errorf("PlanBatches() = %s, want %s", enc, tt.want)
			}
			back, err := decodeBatches(encodeBatches(got))
			if err != nil || encodeBatches(back) != tt.want {
				t.Errorf("decodeBatches(encodeBatches()) = %v, %v", back, err)
			}
		})
	}
}

func TestCheckRolling(t *testing.T) {
	t.Parallel()
	p := &TargetPolicy{RollingFrom: ">= 1.1, < 1.3"}
	tests := []struct {
		from, to string
		d        Direction
		policy   *TargetPolicy
		err      string
	}{
		{"1.1.0", "1.2.0", Up, p, ""},
		{"1.2.0", "1.1.0", Down, p, ""},
		{"1.0.0", "1.2.0", Up, p, `1.2.0's upgrade-policy.json declares rolling_from`},
		{"1.1.0", "1.2.0", Up, nil, `1.2.0's upgrade policy declares no rolling_from`},
		{"1.1.0", "1.2.0", Up, &TargetPolicy{}, `declares no rolling_from`},
		{"1.1.0", "1.1.1", Same, nil, ""},
		{"1.1.0", "1.2.0", Up, &TargetPolicy{RollingFrom: "about 1.1"}, `rolling_from "about 1.1"`},
	}
	for _, tt := range tests {
		err := CheckRolling(mustVersion(t, tt.from), mustVersion(t, tt.to), tt.d, tt.policy)
		if (tt.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("CheckRolling(%s, %s) = %v, want %q", tt.from, tt.to, err, tt.err)
		}
	}
}

// newRollingCluster is a syncCluster of four online nodes at 1.0.0, node1 the master, with
// node commands that record themselves, and a rolling run on it.
func newRollingCluster(t *testing.T, s config.StrategyConfig) (*syncCluster, *Run, *memJournal) {
	t.Helper()
	sc := newSimCluster(t, []string{"node1", "node2", "node3", "node4"})
	inv := sc.w.Inventory()
	if s.BatchTimeout.Duration == 0 {
		s.BatchTimeout.Duration = time.Minute
	}
	s.Mode, s.Order = config.Rolling, []string{config.MasterLast}
	sc.cfg.Commands = config.CommandsConfig{
		DaemonsStop: "stop", DaemonsStart: "start", EnsureDirs: "ensure-dirs",
		NodeDrain: "drain {node}", NodeUndrain: "undrain {node}", NodeVerify: "verify {node}",
	}
	sc.cfg.Strategy = s
	lay, err := Layout(sc.cfg)
	if err != nil {
		t.Fatal(err)
	}
	j := &memJournal{}
	r := &Run{ID: 1, Config: sc.cfg, Layout: lay, Inventory: inv, Force: map[string]bool{},
		Online: inv.Online(), dial: worldDialer{sc.w}, report: sc, journal: j}
	r.Target = Target{From: "1.0.0", To: "1.1.0", Direction: Up}
	if r.Batches, err = PlanBatches(s, inv); err != nil {
		t.Fatal(err)
	}
	return sc, r, j
}

// rollingRunner runs the batches of r and, after them, a stand-in for the config upgrade: the
// point of no return.
func rollingRunner(r *Run, ponr *[]string) *Runner {
	var stages []Stage
	for _, st := range RollingStages(r.Batches) {
		if _, ok := st.(batch); ok {
			stages = append(stages, st)
		}
	}
	return &Runner{Stages: append(stages, &fakeStage{name: "config-upgrade", ponr: true, log: ponr, mu: &sync.Mutex{}})}
}

// allLinks says where each node's links point, "node1=1.0.0 node2=1.1.0 ...".
func (sc *syncCluster) allLinks() string {
	var out []string
	for _, n := range []string{"node1", "node2", "node3", "node4"} {
		l := sc.w.Links(n)
		out = append(out, n+"="+strings.TrimPrefix(strings.Fields(l + " x")[0], "/usr/lib/app/"))
	}
	return strings.Join(out, " ")
}

func TestRollingRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		strategy  config.StrategyConfig
		fail      []string // "node command" pairs that fail
		hang      []string
		wantLinks string
		wantErr   string
		pastPONR  bool     // the error is IsPastPONR (exit 3)
		down      []string // nodes that cannot be reached
		untouched []string // nodes on which no command ran
		journal   []string
	}{
		{
			name:      "every batch",
			strategy:  config.StrategyConfig{BatchSize: 2, Canaries: []string{"node2"}},
			wantLinks: "node1=1.1.0 node2=1.1.0 node3=1.1.0 node4=1.1.0",
			journal:   []string{"batch-1:started", "batch-1:done", "batch-2:started", "batch-2:done", "batch-3:started", "batch-3:done", "config-upgrade:started", "config-upgrade:done"},
		},
		{
			name:      "failing canary",
			strategy:  config.StrategyConfig{BatchSize: 2, Canaries: []string{"node2"}, MaxFailed: 3},
			fail:      []string{"node1 verify node2"},
			wantLinks: "node1=1.0.0 node2=1.0.0 node3=1.0.0 node4=1.0.0",
			wantErr:   "canary node2 failed, so no other node is touched",
			untouched: []string{"node3", "node4"},
			journal:   []string{"batch-1:started", "batch-1:failed", "batch-1:undone"},
		},
		{
			name:      "over the budget",
			strategy:  config.StrategyConfig{BatchSize: 1},
			fail:      []string{"node1 verify node4"},
			wantLinks: "node1=1.0.0 node2=1.0.0 node3=1.0.0 node4=1.0.0",
			wantErr:   "more than strategy.max_failed = 0",
			untouched: []string{"node1"},
			journal:   []string{"batch-1:started", "batch-1:done", "batch-2:started", "batch-2:done", "batch-3:started", "batch-3:failed", "batch-3:undone", "batch-2:undone", "batch-1:undone"},
		},
		{
			name:      "within the budget",
			strategy:  config.StrategyConfig{BatchSize: 1, MaxFailed: 1},
			fail:      []string{"node1 verify node3"},
			wantLinks: "node1=1.1.0 node2=1.1.0 node3=1.0.0 node4=1.1.0",
			wantErr:   "the run is done, but node3 failed within strategy.max_failed: node3 left at 1.0.0; once it is back and healthy, run 'cutover sync node3'",
			pastPONR:  true,
			journal:   []string{"batch-1:started", "batch-1:done", "batch-2:started", "batch-2:failed", "batch-3:started", "batch-3:done", "batch-4:started", "batch-4:done", "config-upgrade:started", "config-upgrade:done"},
		},
		{
			name:      "within the budget, not switched back",
			strategy:  config.StrategyConfig{BatchSize: 1, MaxFailed: 1},
			fail:      []string{"node3 start"},
			wantLinks: "node1=1.1.0 node2=1.1.0 node3=1.0.0 node4=1.1.0",
			wantErr:   "the run is done, but node3 failed within strategy.max_failed: node3 in a state cutover could not confirm (cut off after its switch or start, it may run 1.1.0 on 1.0.0's config); once it is back and healthy, run 'cutover sync node3'",
			pastPONR:  true,
			journal:   []string{"batch-1:started", "batch-1:done", "batch-2:started", "batch-2:failed", "batch-3:started", "batch-3:done", "batch-4:started", "batch-4:done", "config-upgrade:started", "config-upgrade:done"},
		},
		{
			name:      "unreachable within the budget",
			strategy:  config.StrategyConfig{BatchSize: 1, MaxFailed: 1},
			down:      []string{"node3"},
			wantLinks: "node1=1.1.0 node2=1.1.0 node3=1.0.0 node4=1.1.0",
			wantErr:   "the run is done, but node3 failed within strategy.max_failed",
			pastPONR:  true,
			journal:   []string{"batch-1:started", "batch-1:done", "batch-2:started", "batch-2:failed", "batch-3:started", "batch-3:done", "batch-4:started", "batch-4:done", "config-upgrade:started", "config-upgrade:done"},
		},
		{
			name:      "unreachable over the budget",
			strategy:  config.StrategyConfig{BatchSize: 1},
			down:      []string{"node3"},
			wantLinks: "node1=1.0.0 node2=1.0.0 node3=1.0.0 node4=1.0.0",
			wantErr:   "node3 failed: 1 node failed in this run (node3), more than strategy.max_failed = 0",
			untouched: []string{"node1", "node4"},
			journal:   []string{"batch-1:started", "batch-1:done", "batch-2:started", "batch-2:failed", "batch-2:undone", "batch-1:undone"},
		},
		{
			name:      "batch timeout",
			strategy:  config.StrategyConfig{BatchSize: 3, BatchTimeout: config.Duration{Duration: 200 * time.Millisecond}},
			hang:      []string{"node3 start"},
			wantLinks: "node1=1.0.0 node2=1.0.0 node3=1.0.0 node4=1.0.0",
			wantErr:   "batch 1 (node2, node3, node4) did not finish within strategy.batch_timeout 200ms",
			untouched: []string{"node1"},
			journal:   []string{"batch-1:started", "batch-1:failed", "batch-1:undone"},
		},
		{
			name:      "batch timeout within the budget",
			strategy:  config.StrategyConfig{BatchSize: 1, MaxFailed: 1, BatchTimeout: config.Duration{Duration: 300 * time.Millisecond}},
			hang:      []string{"node3 start"},
			wantLinks: "node1=1.1.0 node2=1.1.0 node3=1.0.0 node4=1.1.0",
			wantErr:   "the run is done, but node3 failed within strategy.max_failed",
			pastPONR:  true,
			journal:   []string{"batch-1:started", "batch-1:done", "batch-2:started", "batch-2:failed", "batch-3:started", "batch-3:done", "batch-4:started", "batch-4:done", "config-upgrade:started", "config-upgrade:done"},
		},
		{
			name:      "the master is never left behind",
			strategy:  config.StrategyConfig{BatchSize: 1, MaxFailed: 3},
			fail:      []string{"node1 verify node1"},
			wantLinks: "node1=1.0.0 node2=1.0.0 node3=1.0.0 node4=1.0.0",
			wantErr:   "the master node1 failed in batch-4, and the master is never left behind",
			journal: []string{"batch-1:started", "batch-1:done", "batch-2:started", "batch-2:done", "batch-3:started", "batch-3:done",
				"batch-4:started", "batch-4:failed", "batch-4:undone", "batch-3:undone", "batch-2:undone", "batch-1:undone"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sc, r, j := newRollingCluster(t, tt.strategy)
			for _, f := range tt.fail {
				sc.fail(f)
			}
			for _, n := range tt.down {
				sc.w.Down(n)
			}
			for _, h := range tt.hang {
				node, command, _ := strings.Cut(h, " ")
				sc.w.Hang(node, command)
			}
			var ponr []string
			err := rollingRunner(r, &ponr).Execute(context.Background(), r)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Execute() = %v, want %q", err, tt.wantErr)
			}
			if err != nil && IsPastPONR(err) != tt.pastPONR {
				t.Errorf("IsPastPONR(%v) = %v, want %v", err, !tt.pastPONR, tt.pastPONR)
			}
			if got := sc.allLinks(); got != tt.wantLinks {
				t.Errorf("links = %s, want %s", got, tt.wantLinks)
			}
			if got := j.transitions(); !slices.Equal(got, tt.journal) {
				t.Errorf("journal = %v, want %v", got, tt.journal)
			}
			for _, n := range tt.untouched {
				for _, c := range sc.w.Calls(n) {
					if !strings.Contains(c, " ") { // stop, ensure-dirs, start; not a node_* command for another node
						t.Errorf("%s ran %q, want nothing", n, c)
					}
				}
				for _, c := range sc.w.Calls("node1") {
					if strings.HasSuffix(c, " "+n) {
						t.Errorf("the master ran %q, want nothing for %s", c, n)
					}
				}
			}
			for _, f := range tt.fail {
				node := strings.Fields(f)[0]
				if strings.HasPrefix(strings.Fields(f)[1], "verify") {
					node = strings.Fields(f)[2]
				}
				if tt.pastPONR && !strings.Contains(err.Error(), node) {
					t.Errorf("error %q does not name %s", err, node)
				}
			}
		})
	}
}

// TestRollingNodeSteps: each node goes through drain, stop, switch, ensure-dirs, start,
// undrain and verify, the node_* commands on the master.
func TestRollingNodeSteps(t *testing.T) {
	t.Parallel()
	sc, r, _ := newRollingCluster(t, config.StrategyConfig{BatchSize: 4})
	var ponr []string
	if err := rollingRunner(r, &ponr).Execute(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if got, want := sc.w.Calls("node3"), []string{"stop", "ensure-dirs", "start"}; !slices.Equal(got, want) {
		t.Errorf("node3 ran %v, want %v", got, want)
	}
	var forNode3 []string
	for _, c := range sc.w.Calls("node1") {
		if strings.HasSuffix(c, " node3") {
			forNode3 = append(forNode3, c)
		}
	}
	if want := []string{"drain node3", "undrain node3", "verify node3"}; !slices.Equal(forNode3, want) {
		t.Errorf("the master ran %v for node3, want %v", forNode3, want)
	}
}

// TestRollingResume: a resumed rolling run continues from the first batch not done; the done
// ones are not touched again.
func TestRollingResume(t *testing.T) {
	t.Parallel()
	sc, r, j := newRollingCluster(t, config.StrategyConfig{BatchSize: 1})
	sc.w.Link(t, "node2", "1.1.0")
	sc.w.Link(t, "node3", "1.1.0")
	r.Resumed = true
	r.loadJournal(journal.Run{Events: []journal.Event{
		{Stage: "batch-1", State: journal.Done}, {Stage: "batch-2", State: journal.Started},
	}})
	var ponr []string
	rn := rollingRunner(r, &ponr)
	rn.Start = firstNotDone(append([]Stage{intent{}}, rn.Stages...), r) - 1
	if rn.Start != 1 {
		t.Fatalf("firstNotDone = %d, want batch-2 (1)", rn.Start)
	}
	if err := rn.Execute(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if got := sc.allLinks(); got != "node1=1.1.0 node2=1.1.0 node3=1.1.0 node4=1.1.0" {
		t.Errorf("links = %s", got)
	}
	if calls := sc.w.Calls("node2"); len(calls) > 0 {
		t.Errorf("node2 (batch 1, done) ran %v, want nothing", calls)
	}
	if got := j.transitions(); got[0] != "batch-2:started" {
		t.Errorf("journal = %v, want it to start at batch-2", got)
	}
}

// TestRollingResumeKeepsTolerated: a batch that an earlier execution ended within the failure
// budget is never run again: its failed node stays behind untouched, and the resumed run ends
// done naming it.
func TestRollingResumeKeepsTolerated(t *testing.T) {
	t.Parallel()
	sc, r, j := newRollingCluster(t, config.StrategyConfig{BatchSize: 1, MaxFailed: 1})
	sc.w.Link(t, "node2", "1.1.0")
	r.Resumed = true
	r.loadJournal(journal.Run{
		Events: []journal.Event{{Stage: "batch-1", State: journal.Done}, {Stage: "batch-2", State: journal.Started}, {Stage: "batch-2", State: journal.Failed}},
		Facts:  map[string]string{factFailedPrefix + "node3": "batch-2", factToleratedPrefix + "batch-2": "node3"},
	})
	var ponr []string
	rn := rollingRunner(r, &ponr)
	rn.Start = firstNotDone(append([]Stage{intent{}}, rn.Stages...), r) - 1
	err := rn.Execute(context.Background(), r)
	if err == nil || !IsPastPONR(err) || !strings.Contains(err.Error(), "node3 failed within strategy.max_failed") {
		t.Fatalf("Execute() = %v, want exit 3 naming node3", err)
	}
	if got := sc.allLinks(); got != "node1=1.1.0 node2=1.1.0 node3=1.0.0 node4=1.1.0" {
		t.Errorf("links = %s, want node3 left behind", got)
	}
	if calls := sc.w.Calls("node3"); len(calls) > 0 {
		t.Errorf("node3 (left behind in batch 2) ran %v, want nothing", calls)
	}
	if got := j.transitions(); !slices.Contains(got, "batch-2:skipped") || slices.Contains(got, "batch-2:done") {
		t.Errorf("journal = %v, want batch-2 skipped", got)
	}
}

// TestRollingSignal: SIGINT while a batch runs switches every batch back, the one in progress
// first, and the run ends rolled back. (Not parallel: the signal reaches the whole process.)
func TestRollingSignal(t *testing.T) {
	sc, r, j := newRollingCluster(t, config.StrategyConfig{BatchSize: 1})
	reached := sc.w.Hang("node4", "start")
	go func() {
		<-reached
		_ = syscall.Kill(syscall.Getpid(), syscall.SIGINT)
	}()
	var ponr []string
	err := rollingRunner(r, &ponr).Execute(context.Background(), r)
	if err == nil || IsPastPONR(err) || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("Execute() = %v, want a rollback after the interrupt", err)
	}
	if got, want := sc.allLinks(), "node1=1.0.0 node2=1.0.0 node3=1.0.0 node4=1.0.0"; got != want {
		t.Errorf("links = %s, want %s", got, want)
	}
	want := []string{"batch-1:started", "batch-1:done", "batch-2:started", "batch-2:done", "batch-3:started", "batch-3:failed", "batch-3:undone", "batch-2:undone", "batch-1:undone"}
	if got := j.transitions(); !slices.Equal(got, want) {
		t.Errorf("journal = %v, want %v", got, want)
	}
	if j.outcome != journal.RolledBack {
		t.Errorf("outcome = %q, want rolled-back", j.outcome)
	}
	if calls := sc.w.Calls("node1"); slices.Contains(calls, "stop") {
		t.Errorf("the master (batch 4) was stopped: %v", calls)
	}
}

// TestRollingDowngradeCanary: a rolling downgrade migrates the config down first, but its
// canaries stay reversible: a failed canary is switched back and the config migrated up
// again, exit 1; the point of no return is the first batch after the canaries.
func TestRollingDowngradeCanary(t *testing.T) {
	sc, r, j := newRollingCluster(t, config.StrategyConfig{BatchSize: 2, Canaries: []string{"node2"}, MaxFailed: 3})
	for _, n := range []string{"node1", "node2", "node3", "node4"} {
		sc.w.Link(t, n, "1.1.0")
	}
	r.Target = Target{From: "1.1.0", To: "1.0.0", Direction: Down}
	if got := PONRStage(RollingStages(r.Batches), Down); got != "batch-2" {
		t.Errorf("the point of no return of a rolling downgrade is %q, want batch-2, the first after the canary", got)
	}
	if got := PONRStage(RollingStages(r.Batches), Up); got != "config-upgrade" {
		t.Errorf("the point of no return of a rolling upgrade is %q, want config-upgrade", got)
	}
	var log []string
	cfg := undoStage{&fakeStage{name: "config-downgrade", log: &log, mu: &sync.Mutex{}}}
	stages := []Stage{cfg}
	for _, st := range RollingStages(r.Batches) {
		if _, ok := st.(batch); ok {
			stages = append(stages, st)
		}
	}
	sc.fail("node1 verify node2")
	err := (&Runner{Stages: stages}).Execute(context.Background(), r)
	if err == nil || IsPastPONR(err) || !strings.Contains(err.Error(), "canary node2 failed") {
		t.Fatalf("Execute() = %v, want the canary's failure before the point of no return", err)
	}
	if got, want := sc.allLinks(), "node1=1.1.0 node2=1.1.0 node3=1.1.0 node4=1.1.0"; got != want {
		t.Errorf("links = %s, want %s", got, want)
	}
	if !slices.Equal(log, []string{"run config-downgrade", "undo config-downgrade"}) {
		t.Errorf("config-downgrade: %v, want it run and undone", log)
	}
	want := []string{"config-downgrade:started", "config-downgrade:done", "batch-1:started", "batch-1:failed", "batch-1:undone", "config-downgrade:undone"}
	if got := j.transitions(); !slices.Equal(got, want) {
		t.Errorf("journal = %v, want %v", got, want)
	}
}
