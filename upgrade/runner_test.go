package upgrade

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/config"
)

// memJournal is an in-memory Journal for the runner's unit tests.
type memJournal struct {
	mu      sync.Mutex
	events  []journal.Event
	facts   map[string]string
	outcome journal.Outcome
	travel  journal.Travel
	// pastPONR is the journal's point-of-no-return mark; failPONR and failTravel make
	// those records fail, failStarted makes recording a stage's start fail.
	pastPONR, failPONR, failTravel bool
	failStarted                    string
	// setFacts counts the writes of facts.
	setFacts int
	// seq numbers every write, so tests can check what came before what.
	outcomeAt int
}

func (j *memJournal) CreateRun(_ context.Context, r journal.Run) (journal.Run, error) {
	r.ID = 1
	return r, nil
}

func (j *memJournal) Record(_ context.Context, _ uint64, ev journal.Event) (journal.Event, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if ev.Stage == j.failStarted && ev.State == journal.Started {
		return journal.Event{}, errors.New("journal: disk full")
	}
	ev.Seq = uint64(len(j.events) + 1)
	j.events = append(j.events, ev)
	return ev, nil
}

func (j *memJournal) SetFacts(_ context.Context, _ uint64, facts map[string]string) (map[string]string, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.setFacts++
	if j.facts == nil {
		j.facts = map[string]string{}
	}
	for k, v := range facts {
		if _, ok := j.facts[k]; !ok {
			j.facts[k] = v
		}
	}
	return maps(j.facts), nil
}

func maps(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (j *memJournal) SetOffline(context.Context, uint64, []string) error { return nil }

func (j *memJournal) SetTravel(_ context.Context, _ uint64, t journal.Travel) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.failTravel {
		return errors.New("journal: disk full")
	}
	j.travel = t
	return nil
}

func (j *memJournal) SetPastPONR(_ context.Context, _ uint64, past bool) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.failPONR {
		return errors.New("journal: disk full")
	}
	j.pastPONR = past
	return nil
}

func (j *memJournal) Finish(_ context.Context, _ uint64, o journal.Outcome, _ time.Time) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.outcome = o
	j.outcomeAt = len(j.events)
	return nil
}

// transitions lists "stage:state" in the order they were journaled.
func (j *memJournal) transitions() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []string
	for _, e := range j.events {
		out = append(out, e.Stage+":"+string(e.State))
	}
	return out
}

// fakeStage is a throwaway stage that logs what the runner makes it do.
type fakeStage struct {
	name     string
	log      *[]string
	mu       *sync.Mutex
	fail     error
	undoFail error
	ponr     bool
	skip     bool
	block    bool // wait for ctx to be cancelled, or for release to be closed
	noUndo   bool
}

// entered is closed when a blocking stage starts; release lets it finish.
var (
	entered = make(chan struct{}, 1)
	release = make(chan struct{})
)

func (s *fakeStage) Name() string { return s.name }

func (s *fakeStage) add(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*s.log = append(*s.log, what)
}

func (s *fakeStage) Run(ctx context.Context, r *Run) error {
	s.add("run " + s.name)
	if s.block {
		entered <- struct{}{}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-release:
		}
	}
	return s.fail
}

func (s *fakeStage) PONR(Direction) bool { return s.ponr }
func (s *fakeStage) Where() Where        { return OnMaster }
func (s *fakeStage) Skip(*Run) bool      { return s.skip }

// undoStage is a fakeStage that can be undone.
type undoStage struct{ *fakeStage }

func (s undoStage) Undo(ctx context.Context, r *Run) error {
	s.add("undo " + s.name)
	return s.undoFail
}

type stageSet struct {
	log []string
	mu  sync.Mutex
}

func (ss *stageSet) stage(name string, opts ...func(*fakeStage)) Stage {
	s := &fakeStage{name: name, log: &ss.log, mu: &ss.mu}
	for _, o := range opts {
		o(s)
	}
	if s.noUndo {
		return s
	}
	return undoStage{s}
}

func failing(err error) func(*fakeStage) { return func(s *fakeStage) { s.fail = err } }
func undoFailing(err error) func(*fakeStage) {
	return func(s *fakeStage) { s.undoFail = err }
}
func isPONR(s *fakeStage)   { s.ponr = true }
func skipped(s *fakeStage)  { s.skip = true }
func blocking(s *fakeStage) { s.block = true }
func noUndo(s *fakeStage)   { s.noUndo = true }

func testRun(j *memJournal) *Run {
	return &Run{ID: 1, journal: j, report: discard{}, Config: &config.Config{}}
}

func TestRunnerOrderAndUndo(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name        string
		stages      func(ss *stageSet) []Stage
		wantLog     []string
		wantOutcome journal.Outcome
		wantPast    bool
		wantErr     bool
	}{
		{
			name: "all succeed in order",
			stages: func(ss *stageSet) []Stage {
				return []Stage{ss.stage("a"), ss.stage("b", skipped), ss.stage("c")}
			},
			wantLog:     []string{"run a", "run c"},
			wantOutcome: journal.Succeeded,
		},
		{
			name: "failure before the PONR undoes in reverse, the failed stage too",
			stages: func(ss *stageSet) []Stage {
				return []Stage{ss.stage("a"), ss.stage("b", noUndo), ss.stage("c"), ss.stage("d", failing(boom)), ss.stage("e", isPONR)}
			},
			wantLog:     []string{"run a", "run b", "run c", "run d", "undo d", "undo c", "undo a"},
			wantOutcome: journal.RolledBack,
			wantErr:     true,
		},
		{
			name: "a failing undo does not stop the others and keeps the run open",
			stages: func(ss *stageSet) []Stage {
				return []Stage{ss.stage("a"), ss.stage("b", undoFailing(boom)), ss.stage("c", failing(boom))}
			},
			wantLog:     []string{"run a", "run b", "run c", "undo c", "undo b", "undo a"},
			wantOutcome: journal.FailedPastPONR,
			wantPast:    true,
			wantErr:     true,
		},
		{
			name: "failure past the PONR pushes through to the end",
			stages: func(ss *stageSet) []Stage {
				return []Stage{ss.stage("a"), ss.stage("p", isPONR), ss.stage("c", failing(boom)), ss.stage("d")}
			},
			wantLog:     []string{"run a", "run p", "run c", "run d"},
			wantOutcome: journal.FailedPastPONR,
			wantPast:    true,
			wantErr:     true,
		},
		{
			name: "a PONR stage that changed nothing is still before the PONR",
			stages: func(ss *stageSet) []Stage {
				return []Stage{ss.stage("a"), ss.stage("p", isPONR, failing(notCrossed(boom))), ss.stage("c")}
			},
			wantLog:     []string{"run a", "run p", "undo p", "undo a"},
			wantOutcome: journal.RolledBack,
			wantErr:     true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ss := &stageSet{}
			j := &memJournal{}
			rn := &Runner{Stages: tt.stages(ss)}
			err := rn.Execute(context.Background(), testRun(j))
			if (err != nil) != tt.wantErr {
				t.Fatalf("Execute() = %v, want error %v", err, tt.wantErr)
			}
			if IsPastPONR(err) != tt.wantPast {
				t.Errorf("IsPastPONR(%v) = %v, want %v", err, IsPastPONR(err), tt.wantPast)
			}
			if !slices.Equal(ss.log, tt.wantLog) {
				t.Errorf("stages ran %q, want %q", ss.log, tt.wantLog)
			}
			if j.outcome != tt.wantOutcome {
				t.Errorf("outcome = %q, want %q", j.outcome, tt.wantOutcome)
			}
		})
	}
}

func TestRunnerJournalsEveryTransition(t *testing.T) {
	ss := &stageSet{}
	j := &memJournal{}
	rn := &Runner{Stages: []Stage{ss.stage("a"), ss.stage("s", skipped), ss.stage("b", failing(errors.New("boom")))}}
	_ = rn.Execute(context.Background(), testRun(j))
	want := []string{"a:started", "a:done", "s:skipped", "b:started", "b:failed", "b:undone", "a:undone"}
	if got := j.transitions(); !slices.Equal(got, want) {
		t.Errorf("journal = %q, want %q", got, want)
	}
	if j.events[0].Index != 1 || j.events[3].Index != 3 {
		t.Errorf("indexes = %d, %d, want 1, 3", j.events[0].Index, j.events[3].Index)
	}
}

func TestRunnerPONRRecordedBeforeItRuns(t *testing.T) {
	ss := &stageSet{}
	j := &memJournal{}
	rn := &Runner{Stages: []Stage{ss.stage("p", isPONR)}}
	if err := rn.Execute(context.Background(), testRun(j)); err != nil {
		t.Fatal(err)
	}
	if e := j.events[0]; e.State != journal.Started || e.Message != "point of no return" {
		t.Errorf("first event = %+v, want the PONR stage started with its mark", e)
	}
}

func TestRunnerConfirmRefusedChangesNothing(t *testing.T) {
	ss := &stageSet{}
	j := &memJournal{}
	check := readOnlyStage{ss.stage("check").(undoStage)}
	rn := &Runner{
		Stages:  []Stage{check, ss.stage("intent"), ss.stage("after")},
		Confirm: func(context.Context, *Run) error { return errors.New("not confirmed") },
	}
	err := rn.Execute(context.Background(), testRun(j))
	if err == nil || IsPastPONR(err) {
		t.Fatalf("Execute() = %v, want a plain refusal", err)
	}
	if want := []string{"run check"}; !slices.Equal(ss.log, want) {
		t.Errorf("stages ran %q, want %q", ss.log, want)
	}
	if j.outcome != journal.Aborted {
		t.Errorf("outcome = %q, want %q", j.outcome, journal.Aborted)
	}
}

type readOnlyStage struct{ undoStage }

func (readOnlyStage) ReadOnly() {}

func TestRunnerSignals(t *testing.T) {
	for _, tt := range []struct {
		name        string
		ponrFirst   bool
		wantLog     []string
		wantOutcome journal.Outcome
	}{
		{"SIGTERM before the PONR undoes", false, []string{"run a", "run wait", "undo wait", "undo a"}, journal.RolledBack},
		{"SIGTERM after the PONR is ignored", true, []string{"run a", "run wait", "run after"}, journal.Succeeded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ss := &stageSet{}
			j := &memJournal{}
			a := ss.stage("a")
			if tt.ponrFirst {
				a = ss.stage("a", isPONR)
			}
			rn := &Runner{Stages: []Stage{a, ss.stage("wait", blocking), ss.stage("after")}}
			rel := make(chan struct{})
			release = rel
			go func() {
				<-entered
				_ = syscall.Kill(syscall.Getpid(), syscall.SIGTERM)
				// Past the PONR the signal must change nothing: give it time to, then let
				// the stage finish. Before it, the stage ends as soon as ctx is cancelled.
				time.Sleep(200 * time.Millisecond)
				close(rel)
			}()
			err := rn.Execute(context.Background(), testRun(j))
			if tt.ponrFirst != (err == nil) {
				t.Fatalf("Execute() = %v", err)
			}
			if !slices.Equal(ss.log, tt.wantLog) {
				t.Errorf("stages ran %q, want %q", ss.log, tt.wantLog)
			}
			if j.outcome != tt.wantOutcome {
				t.Errorf("outcome = %q, want %q", j.outcome, tt.wantOutcome)
			}
		})
	}
}

func TestLearnFirstExecutionWins(t *testing.T) {
	j := &memJournal{}
	r := testRun(j)
	ctx := context.Background()
	if v, err := r.Learn(ctx, factQueueDrained, "no"); err != nil || v != "no" {
		t.Fatalf("Learn() = %q, %v; want no", v, err)
	}
	// A resumed run starts from the journal's facts and must not overwrite them.
	r2 := testRun(j)
	r2.facts = maps(j.facts)
	if v, _ := r2.Learn(ctx, factQueueDrained, "yes"); v != "no" {
		t.Errorf("second Learn() = %q, want the first execution's %q", v, "no")
	}
	if j.facts[factQueueDrained] != "no" {
		t.Errorf("journal fact = %q, want no", j.facts[factQueueDrained])
	}
}

func TestJoinNames(t *testing.T) {
	for _, tt := range []struct {
		in   []string
		want string
	}{{nil, ""}, {[]string{"a"}, "a"}, {[]string{"a", "b"}, "a and b"}, {[]string{"a", "b", "c"}, "a, b and c"}} {
		if got := joinNames(tt.in); got != tt.want {
			t.Errorf("joinNames(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// slowUndo is a stage whose undo takes a while, so that a second signal lands inside it.
type slowUndo struct{ undoStage }

var slowUndoStarted = make(chan struct{}, 1)

func (s slowUndo) Undo(ctx context.Context, r *Run) error {
	slowUndoStarted <- struct{}{}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(300 * time.Millisecond):
	}
	return s.undoStage.Undo(ctx, r)
}

func TestRunnerSecondSignalDoesNotSkipUndo(t *testing.T) {
	ss := &stageSet{}
	j := &memJournal{}
	slow := slowUndo{ss.stage("slow").(undoStage)}
	rn := &Runner{Stages: []Stage{ss.stage("a"), slow, ss.stage("wait", blocking)}}
	release = make(chan struct{})
	go func() {
		<-entered
		_ = syscall.Kill(syscall.Getpid(), syscall.SIGINT)
		<-slowUndoStarted // inside slow's undo
		_ = syscall.Kill(syscall.Getpid(), syscall.SIGINT)
	}()
	err := rn.Execute(context.Background(), testRun(j))
	if err == nil || IsPastPONR(err) {
		t.Fatalf("Execute() = %v, want a rollback", err)
	}
	want := []string{"run a", "run slow", "run wait", "undo wait", "undo slow", "undo a"}
	if !slices.Equal(ss.log, want) {
		t.Errorf("stages ran %q, want %q", ss.log, want)
	}
	if j.outcome != journal.RolledBack {
		t.Errorf("outcome = %q, want rolled-back", j.outcome)
	}
}

func TestOnNodesReportsSlowNodes(t *testing.T) {
	old := waitReportEvery
	waitReportEvery = 20 * time.Millisecond
	defer func() { waitReportEvery = old }()
	var mu sync.Mutex
	var waits []string
	inv, err := nodes.NewInventory("n1", []nodes.Node{{Name: "n1"}, {Name: "n2"}})
	if err != nil {
		t.Fatal(err)
	}
	r := &Run{Config: &config.Config{SSH: config.SSHConfig{Parallel: 4}}, Inventory: inv, dial: fakeDialer{},
		report: ReporterFunc(func(e Event) {
			if e.Type == "wait" {
				mu.Lock()
				waits = append(waits, e.Message)
				mu.Unlock()
			}
		})}
	err = r.OnNodes(context.Background(), inv.Nodes, false, func(ctx context.Context, c Conn, n nodes.Node) error {
		if n.Name == "n2" {
			time.Sleep(150 * time.Millisecond)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(waits) == 0 || waits[0] != "waiting for n2 to finish" {
		t.Errorf("wait reports = %q, want \"waiting for n2 to finish\"", waits)
	}
}

// fakeDialer hands out connections that are never used.
type fakeDialer struct{}

func (fakeDialer) Conn(context.Context, string) (Conn, error) { return nil, nil }

// TestRunnerPONRNeedsTheJournal: when the journal cannot record that the run crosses its
// point of no return, or that the PONR stage starts, the stage does not run and the run
// rolls back.
func TestRunnerPONRNeedsTheJournal(t *testing.T) {
	for _, tt := range []struct {
		name   string
		break_ func(j *memJournal)
	}{
		{"the point-of-no-return mark", func(j *memJournal) { j.failPONR = true }},
		{"the stage's start", func(j *memJournal) { j.failStarted = "p" }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ss := &stageSet{}
			j := &memJournal{}
			tt.break_(j)
			rn := &Runner{Stages: []Stage{ss.stage("a"), ss.stage("p", isPONR), ss.stage("c")}}
			err := rn.Execute(context.Background(), testRun(j))
			if err == nil || IsPastPONR(err) {
				t.Fatalf("Execute() = %v, want a rollback", err)
			}
			if want := []string{"run a", "undo a"}; !slices.Equal(ss.log, want) {
				t.Errorf("stages ran %q, want %q", ss.log, want)
			}
			if j.outcome != journal.RolledBack || j.travel != journal.RollingBack {
				t.Errorf("outcome %q, travel %q; want rolled-back, rolling-back", j.outcome, j.travel)
			}
		})
	}
}

// TestRunnerUndoCoversEveryExecution: the undo of a resumed run covers the stages an earlier
// execution started, not only its own, and the releaser comes last, after the outcome.
func TestRunnerUndoCoversEveryExecution(t *testing.T) {
	ss := &stageSet{}
	j := &memJournal{}
	rel := releasingStage{ss.stage("intent").(undoStage)}
	rn := &Runner{Stages: []Stage{rel, ss.stage("a"), ss.stage("b"), ss.stage("c", failing(errors.New("boom")))}, Start: 3}
	r := testRun(j)
	r.loadJournal(journal.Run{Events: []journal.Event{
		{Stage: "intent", State: journal.Started}, {Stage: "intent", State: journal.Done},
		{Stage: "a", State: journal.Started}, {Stage: "a", State: journal.Done},
		{Stage: "b", State: journal.Started}, // died in b
	}})
	if err := rn.Execute(context.Background(), r); err == nil {
		t.Fatal("Execute() = nil, want the failure")
	}
	if want := []string{"run c", "undo c", "undo b", "undo a", "undo intent"}; !slices.Equal(ss.log, want) {
		t.Errorf("stages ran %q, want %q", ss.log, want)
	}
	tr := j.transitions()
	if tr[len(tr)-1] != "intent:undone" || j.outcomeAt != len(tr)-1 {
		t.Errorf("journal %q, outcome recorded after %d events: want the outcome before the intent's undo", tr, j.outcomeAt)
	}
}

// TestRunnerRedo: a run resumed before its point of no return has everything undone, the
// releaser kept, then runs again from its start.
func TestRunnerRedo(t *testing.T) {
	ss := &stageSet{}
	j := &memJournal{}
	rel := releasingStage{ss.stage("intent").(undoStage)}
	rn := &Runner{Stages: []Stage{rel, ss.stage("a"), ss.stage("b")}, Start: 1, Redo: true}
	r := testRun(j)
	r.loadJournal(journal.Run{Events: []journal.Event{
		{Stage: "intent", State: journal.Started}, {Stage: "a", State: journal.Started}, {Stage: "b", State: journal.Started},
	}})
	if err := rn.Execute(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if want := []string{"undo b", "undo a", "run a", "run b", "undo intent"}; !slices.Equal(ss.log, want) {
		t.Errorf("stages ran %q, want %q", ss.log, want)
	}
	if j.outcome != journal.Succeeded {
		t.Errorf("outcome = %q, want done", j.outcome)
	}
}

type releasingStage struct{ undoStage }

func (releasingStage) Releases() {}

// TestRunnerResumedPONRThatChangesNothingRollsBack: an execution died inside the PONR stage
// (the mark set); the resumed run runs it again and it fails without changing anything: the
// run is still before its point of no return and rolls back, the mark cleared.
func TestRunnerResumedPONRThatChangesNothingRollsBack(t *testing.T) {
	ss := &stageSet{}
	j := &memJournal{pastPONR: true}
	boom := errors.New("boom")
	rn := &Runner{Stages: []Stage{ss.stage("a"), ss.stage("p", isPONR, failing(notCrossed(boom))), ss.stage("c")}, Start: 1}
	r := testRun(j)
	r.loadJournal(journal.Run{PastPONR: true, Events: []journal.Event{
		{Stage: "a", State: journal.Started}, {Stage: "a", State: journal.Done}, {Stage: "p", State: journal.Started},
	}})
	err := rn.Execute(context.Background(), r)
	if err == nil || IsPastPONR(err) {
		t.Fatalf("Execute() = %v, want a rollback", err)
	}
	if want := []string{"run p", "undo p", "undo a"}; !slices.Equal(ss.log, want) {
		t.Errorf("stages ran %q, want %q", ss.log, want)
	}
	if j.pastPONR || j.outcome != journal.RolledBack {
		t.Errorf("past PONR %v, outcome %q; want false, rolled-back", j.pastPONR, j.outcome)
	}
}

// TestLoadJournalKeepsDone: a stage done in one execution stays done when a later execution
// skips it, so that a run-once stage never runs a third time; an undo or a new start does
// count.
func TestLoadJournalKeepsDone(t *testing.T) {
	ev := func(stage string, st journal.State) journal.Event { return journal.Event{Stage: stage, State: st} }
	tests := []struct {
		name   string
		events []journal.Event
		done   bool
	}{
		{"done", []journal.Event{ev("backup", journal.Started), ev("backup", journal.Done)}, true},
		{"done, then skipped by a resume", []journal.Event{ev("backup", journal.Done), ev("backup", journal.Skipped)}, true},
		{"done, skipped twice", []journal.Event{ev("backup", journal.Done), ev("backup", journal.Skipped), ev("backup", journal.Skipped)}, true},
		{"skipped only", []journal.Event{ev("backup", journal.Skipped)}, false},
		{"done, then undone", []journal.Event{ev("backup", journal.Done), ev("backup", journal.Undone)}, false},
		{"done, then started again", []journal.Event{ev("backup", journal.Done), ev("backup", journal.Started)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Run{}
			r.loadJournal(journal.Run{Events: tt.events})
			if got := r.history.doneBefore("backup"); got != tt.done {
				t.Errorf("doneBefore = %v, want %v", got, tt.done)
			}
		})
	}
}

// TestKeepCurrentUndoStaysInTheBackupDir: the undo of keep-current removes only an archive it
// keeps in the backup directory, whatever path the journal's fact names.
func TestKeepCurrentUndoStaysInTheBackupDir(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(dir, "precious-before-restore-x.tar.gz")
	if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &Run{Config: &config.Config{Paths: config.PathsConfig{StateDir: filepath.Join(dir, "state")}},
		facts: map[string]string{"kept": outside}, report: discard{}}
	if err := (keepCurrent{}).Undo(context.Background(), r); err == nil {
		t.Error("undo of a kept archive outside the backup directory: nil error, want a refusal")
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("the file the fact named was touched: %v", err)
	}
}
