package journal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()

	created := mustCreate(t, s, sampleRun())
	if created.ID != 1 || created.Outcome != Running || !created.Started.Equal(t0) {
		t.Fatalf("CreateRun = id %d outcome %s started %s, want id 1, running, %s", created.ID, created.Outcome, created.Started, t0)
	}
	events := []Event{
		{Stage: "preflight", Index: 1, State: Started, At: t0},
		{Stage: "preflight", Index: 1, State: Done, At: t0.Add(time.Second), Duration: 300 * time.Millisecond, Message: "ok"},
		{Stage: "verify-installed", Index: 2, State: Failed, At: t0.Add(2 * time.Second), Duration: time.Second,
			Message: "1 of 2 nodes failed",
			Nodes: []NodeResult{
				{Node: "node1", OK: true, Duration: 10 * time.Millisecond, Start: t0.Add(1500 * time.Millisecond), End: t0.Add(1510 * time.Millisecond),
					Steps: []Step{{Name: "stop", Start: t0.Add(1500 * time.Millisecond), End: t0.Add(1505 * time.Millisecond)}}},
				{Node: "node2", ExitCode: 2, Error: "exit status 2", StderrTail: "no such tree\n", Duration: 20 * time.Millisecond},
			}},
	}
	var want []Event
	for i, ev := range events {
		got := mustRecord(t, s, created.ID, ev)
		ev.Seq = uint64(i + 1)
		if !reflect.DeepEqual(got, ev) {
			t.Errorf("Record(%d) = %+v, want %+v", i, got, ev)
		}
		want = append(want, ev)
	}
	if err := s.SetOffline(ctx, created.ID, []string{"node3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetFacts(ctx, created.ID, map[string]string{"queue-drained-before": "false"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, created.ID, RolledBack, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}

	got, err := s.Run(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantRun := created
	wantRun.Events = want
	wantRun.Offline = []string{"node3"}
	wantRun.Facts = map[string]string{"queue-drained-before": "false"}
	wantRun.Outcome = RolledBack
	wantRun.Ended = t0.Add(time.Minute)
	if !reflect.DeepEqual(got, wantRun) {
		t.Errorf("Run(%d) =\n%+v\nwant\n%+v", created.ID, got, wantRun)
	}
	runs, err := s.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || !reflect.DeepEqual(runs[0], wantRun) {
		t.Errorf("Runs() = %+v, want [%+v]", runs, wantRun)
	}
}

func TestCreateRunDefaults(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	before := time.Now()
	r := mustCreate(t, s, Run{
		Kind: "sync", To: "1.1.0", Outcome: Succeeded, Ended: t0,
		Facts:  map[string]string{"from": "1.0.0"},
		Events: []Event{{Stage: "intent", Index: 3, State: Done}},
	})
	if r.Started.Before(before) || r.Started.Location() != time.UTC {
		t.Errorf("Started = %v, want now in UTC", r.Started)
	}
	if r.Outcome != Running || !r.Ended.IsZero() {
		t.Errorf("Outcome, Ended = %s, %v, want running, zero", r.Outcome, r.Ended)
	}
	if len(r.Events) != 1 || r.Events[0].Seq != 1 || r.Events[0].At.Before(before) {
		t.Errorf("Events = %+v, want one with seq 1 stamped now", r.Events)
	}
	got, err := s.Run(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Errorf("Run(%d) = %+v, want %+v", r.ID, got, r)
	}
}

func TestSetFactsFirstWins(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	id := mustCreate(t, s, sampleRun()).ID
	steps := []struct {
		set  map[string]string
		want map[string]string
	}{
		{map[string]string{"queue-drained-before": "false"}, map[string]string{"queue-drained-before": "false"}},
		// a resumed run finds the queue drained (by its own first execution): must not overwrite
		{map[string]string{"queue-drained-before": "true", "reconciler-paused-before": "false"},
			map[string]string{"queue-drained-before": "false", "reconciler-paused-before": "false"}},
		{nil, map[string]string{"queue-drained-before": "false", "reconciler-paused-before": "false"}},
	}
	for i, st := range steps {
		got, err := s.SetFacts(ctx, id, st.set)
		if err != nil {
			t.Fatalf("step %d: SetFacts: %v", i, err)
		}
		if !reflect.DeepEqual(got, st.want) {
			t.Errorf("step %d: SetFacts(%v) = %v, want %v", i, st.set, got, st.want)
		}
	}
	r, err := s.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Facts, steps[len(steps)-1].want) {
		t.Errorf("Run facts = %v, want %v", r.Facts, steps[len(steps)-1].want)
	}
}

func TestFinishAgain(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	id := mustCreate(t, s, sampleRun()).ID
	steps := []struct {
		outcome   Outcome
		at        time.Time
		wantEnded time.Time
	}{
		{FailedPastPONR, t0.Add(time.Minute), t0.Add(time.Minute)},
		{Running, t0.Add(2 * time.Minute), time.Time{}}, // resumed
		{Succeeded, t0.Add(3 * time.Minute), t0.Add(3 * time.Minute)},
	}
	for _, st := range steps {
		if err := s.Finish(ctx, id, st.outcome, st.at); err != nil {
			t.Fatalf("Finish(%s): %v", st.outcome, err)
		}
		r, err := s.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Outcome != st.outcome || !r.Ended.Equal(st.wantEnded) || r.Pending() != (st.outcome == Running) {
			t.Errorf("after Finish(%s): outcome %s, ended %v, pending %v", st.outcome, r.Outcome, r.Ended, r.Pending())
		}
	}
}

func TestUnknownRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	empty := newStore(t) // no journal file at all
	s := newStore(t)
	mustCreate(t, s, sampleRun())
	calls := map[string]func(s *Store) error{
		"Run":        func(s *Store) error { _, err := s.Run(ctx, 9); return err },
		"Record":     func(s *Store) error { _, err := s.Record(ctx, 9, Event{Stage: "drain", State: Started}); return err },
		"SetFacts":   func(s *Store) error { _, err := s.SetFacts(ctx, 9, map[string]string{"a": "b"}); return err },
		"Finish":     func(s *Store) error { return s.Finish(ctx, 9, Succeeded, t0) },
		"SetOffline": func(s *Store) error { return s.SetOffline(ctx, 9, []string{"node2"}) },
	}
	for name, call := range calls {
		for _, st := range []*Store{empty, s} {
			err := call(st)
			if !IsNotFound(err) || IsCorrupt(err) {
				t.Errorf("%s on %s: err = %v, want not found", name, st.Path(), err)
			}
		}
	}
	runs, err := empty.Runs(ctx)
	if err != nil || len(runs) != 0 {
		t.Errorf("Runs() on no journal = %v, %v, want none, nil", runs, err)
	}
	if _, err := os.Stat(empty.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("reading a missing journal created it: stat: %v", err)
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	id := mustCreate(t, s, sampleRun()).ID
	before := dump(t, s.Path())
	calls := map[string]func() error{
		"event without stage": func() error { _, err := s.Record(ctx, id, Event{State: Started}); return err },
		"unknown state":       func() error { _, err := s.Record(ctx, id, Event{Stage: "drain", State: "halfway"}); return err },
		"negative index":      func() error { _, err := s.Record(ctx, id, Event{Stage: "drain", State: Done, Index: -1}); return err },
		"negative duration": func() error {
			_, err := s.Record(ctx, id, Event{Stage: "drain", State: Done, Duration: -1})
			return err
		},
		"nameless node": func() error {
			_, err := s.Record(ctx, id, Event{Stage: "drain", State: Done, Nodes: []NodeResult{{OK: true}}})
			return err
		},
		"node ending before it starts": func() error {
			_, err := s.Record(ctx, id, Event{Stage: "drain", State: Done, Nodes: []NodeResult{{Node: "n", Start: t0, End: t0.Add(-time.Second)}}})
			return err
		},
		"nameless step": func() error {
			_, err := s.Record(ctx, id, Event{Stage: "drain", State: Done, Nodes: []NodeResult{{Node: "n", Steps: []Step{{Start: t0, End: t0}}}}})
			return err
		},
		"empty fact name":      func() error { _, err := s.SetFacts(ctx, id, map[string]string{"": "x"}); return err },
		"unknown outcome":      func() error { return s.Finish(ctx, id, "meh", t0) },
		"empty offline node":   func() error { return s.SetOffline(ctx, id, []string{"node2", ""}) },
		"run with id":          func() error { _, err := s.CreateRun(ctx, Run{ID: 7, To: "1.1.0"}); return err },
		"run with bad event":   func() error { _, err := s.CreateRun(ctx, Run{Events: []Event{{Stage: "x"}}}); return err },
		"run with bad fact":    func() error { _, err := s.CreateRun(ctx, Run{Facts: map[string]string{"": "x"}}); return err },
		"run with bad offline": func() error { _, err := s.CreateRun(ctx, Run{Offline: []string{""}}); return err },
	}
	for name, call := range calls {
		if err := call(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if after := dump(t, s.Path()); after != before {
		t.Errorf("bad input changed the journal:\n--- before\n%s--- after\n%s", before, after)
	}
}

func TestCancelledContextChangesNothing(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	id := mustCreate(t, s, sampleRun()).ID
	before := dump(t, s.Path())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Record(ctx, id, Event{Stage: "drain", State: Started}); !errors.Is(err, context.Canceled) {
		t.Errorf("Record with cancelled context: err = %v, want context.Canceled", err)
	}
	if _, err := s.CreateRun(ctx, sampleRun()); !errors.Is(err, context.Canceled) {
		t.Errorf("CreateRun with cancelled context: err = %v, want context.Canceled", err)
	}
	if after := dump(t, s.Path()); after != before {
		t.Errorf("cancelled calls changed the journal:\n--- before\n%s--- after\n%s", before, after)
	}
}

// TestKeysFollowAppendOrder crosses the 255/256 boundary, where
// little-endian or textual keys would sort out of order.
func TestKeysFollowAppendOrder(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	id := mustCreate(t, s, sampleRun()).ID
	withDB(t, s.Path(), func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketRuns).SetSequence(254); err != nil {
			return err
		}
		return tx.Bucket(bucketRuns).Bucket(itob(id)).Bucket(bucketEvents).SetSequence(254)
	})
	for range 3 {
		mustCreate(t, s, sampleRun())
		mustRecord(t, s, id, Event{Stage: "drain", State: Started})
	}
	runs, err := s.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	if want := []uint64{1, 255, 256, 257}; !reflect.DeepEqual(ids, want) {
		t.Errorf("Runs() ids = %v, want %v", ids, want)
	}
	var seqs []uint64
	for _, ev := range runs[0].Events {
		seqs = append(seqs, ev.Seq)
	}
	if want := []uint64{255, 256, 257}; !reflect.DeepEqual(seqs, want) {
		t.Errorf("event seqs = %v, want %v", seqs, want)
	}
}

func TestStageHelpers(t *testing.T) {
	t.Parallel()
	r := Run{Events: []Event{
		{Stage: "drain", State: Started},
		{Stage: "drain", State: Done},
		{Stage: "switch", State: Started},
		{Stage: "switch", State: Failed, Message: "node2: rename failed"},
		{Stage: "drain", State: Undone},
	}}
	tests := []struct {
		stage   string
		want    State
		reached bool
	}{
		{"drain", Undone, true},
		{"switch", Failed, true},
		{"config-upgrade", "", false},
	}
	for _, tt := range tests {
		got, ok := r.StageState(tt.stage)
		if got != tt.want || ok != tt.reached || r.Reached(tt.stage) != tt.reached {
			t.Errorf("StageState(%q) = %q, %v; Reached = %v; want %q, %v", tt.stage, got, ok, r.Reached(tt.stage), tt.want, tt.reached)
		}
	}
	if ev, ok := r.LastEvent("switch"); !ok || ev.Message != "node2: rename failed" {
		t.Errorf("LastEvent(switch) = %+v, %v, want the failure", ev, ok)
	}
}

func TestFilesArePrivate(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	mustCreate(t, s, sampleRun())
	if got := fileMode(t, s.Path()); got != 0o600 {
		t.Errorf("journal mode = %v, want 0600", got)
	}
	if got := fileMode(t, filepath.Dir(s.Path())); got != 0o700 {
		t.Errorf("journal directory mode = %v, want 0700", got)
	}
	entries, err := os.ReadDir(filepath.Dir(s.Path()))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("journal directory holds %d entries, want only the journal (no temporary files)", len(entries))
	}
}

// TestConcurrentWriters has two stores (two file descriptions, as two
// processes would) write to one journal at once: neither deadlocks, every
// event lands, and seqs stay unique and increasing.
func TestConcurrentWriters(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "journal.db")
	ctx := context.Background()
	id := mustCreate(t, NewStore(path), sampleRun()).ID
	const writers, each = 2, 15
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		s := NewStore(path)
		wg.Go(func() {
			for i := range each {
				if _, err := s.Record(ctx, id, Event{Stage: "drain", Index: w, State: Started, Duration: time.Duration(i)}); err != nil {
					errs <- err
				}
				if _, err := s.Runs(ctx); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	r, err := NewStore(path).Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Events) != writers*each {
		t.Fatalf("got %d events, want %d", len(r.Events), writers*each)
	}
	for i, ev := range r.Events {
		if ev.Seq != uint64(i+1) {
			t.Errorf("event %d has seq %d, want %d", i, ev.Seq, i+1)
		}
	}
}

func TestTravelAndPONR(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	r := mustCreate(t, s, sampleRun())
	if r.Travel != Forward || r.PastPONR {
		t.Fatalf("new run: travel %q, past PONR %v; want forward, false", r.Travel, r.PastPONR)
	}
	if err := s.SetPastPONR(ctx, r.ID, true); err != nil {
		t.Fatal(err)
	}
	if err := s.SetTravel(ctx, r.ID, RollingBack); err != nil {
		t.Fatal(err)
	}
	if err := s.SetTravel(ctx, r.ID, Forward); err == nil {
		t.Error("SetTravel(forward) after rolling-back = nil, want a refusal")
	}
	if err := s.SetTravel(ctx, r.ID, "sideways"); err == nil {
		t.Error("SetTravel(sideways) = nil, want an error")
	}
	got, err := s.Run(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Travel != RollingBack || !got.PastPONR {
		t.Errorf("Run() travel %q, past PONR %v; want rolling-back, true", got.Travel, got.PastPONR)
	}
}
