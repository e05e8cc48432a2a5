package journal

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	bolt "go.etcd.io/bbolt"
)

// CreateRun records a new run and returns it as stored: the store assigns
// its ID and sets its Outcome to Running, its Started to now if zero and
// Ended to zero. Facts and Events already in r are stored with it (events
// get their Seq, and At if zero). r.ID must be zero. Times are kept in UTC.
func (s *Store) CreateRun(ctx context.Context, r Run) (Run, error) {
	if r.ID != 0 {
		return Run{}, fmt.Errorf("create run: run already has id %d", r.ID)
	}
	for _, ev := range r.Events {
		if err := validEvent(ev); err != nil {
			return Run{}, fmt.Errorf("create run: %w", err)
		}
	}
	if err := validFacts(r.Facts); err != nil {
		return Run{}, fmt.Errorf("create run: %w", err)
	}
	if err := validNodes(r.Offline); err != nil {
		return Run{}, fmt.Errorf("create run: offline %w", err)
	}
	now := time.Now()
	r.Started = stamp(r.Started, now)
	r.Ended = time.Time{}
	r.Outcome = Running
	if r.Travel == "" {
		r.Travel = Forward
	}
	r.Offline = cloneStrings(r.Offline)
	r.Facts = maps.Clone(r.Facts)
	if r.Facts == nil {
		r.Facts = map[string]string{}
	}
	events := r.Events
	r.Events = nil
	err := s.update(ctx, func(tx *bolt.Tx) error {
		runs := tx.Bucket(bucketRuns)
		id, err := runs.NextSequence()
		if err != nil {
			return err
		}
		rb, err := runs.CreateBucket(itob(id))
		if err != nil {
			return fmt.Errorf("run %d: %w", id, err)
		}
		if err := putJSON(rb, keyRun, toRunRecord(r)); err != nil {
			return err
		}
		facts, err := rb.CreateBucket(bucketFacts)
		if err != nil {
			return err
		}
		for k, v := range r.Facts {
			if err := facts.Put([]byte(k), []byte(v)); err != nil {
				return err
			}
		}
		eb, err := rb.CreateBucket(bucketEvents)
		if err != nil {
			return err
		}
		r.ID = id
		for _, ev := range events {
			ev, err := appendEvent(eb, ev, now)
			if err != nil {
				return err
			}
			r.Events = append(r.Events, ev)
		}
		return nil
	})
	if err != nil {
		return Run{}, fmt.Errorf("create run: %w", err)
	}
	return r, nil
}

// Record appends one stage transition to run runID and returns it as stored:
// the store assigns its Seq, and its At (now) if zero. An unknown run is an
// error for which IsNotFound is true; an event without a stage name or with
// an unknown state is refused.
func (s *Store) Record(ctx context.Context, runID uint64, ev Event) (Event, error) {
	if err := validEvent(ev); err != nil {
		return Event{}, fmt.Errorf("record event of run %d: %w", runID, err)
	}
	var out Event
	err := s.change(ctx, func(tx *bolt.Tx) error {
		rb, err := s.runBucket(tx, runID)
		if err != nil {
			return err
		}
		eb := rb.Bucket(bucketEvents)
		if eb == nil {
			return s.corrupt(fmt.Errorf("run %d has no %s bucket", runID, bucketEvents))
		}
		out, err = appendEvent(eb, ev, time.Now())
		return err
	})
	if err != nil {
		return Event{}, fmt.Errorf("record %s %s of run %d: %w", ev.Stage, ev.State, runID, err)
	}
	return out, nil
}

// SetFacts stores those of facts that run runID does not have yet (the first
// execution of a stage wins; a redo never overwrites what it learned) and
// returns all of the run's facts after the update.
func (s *Store) SetFacts(ctx context.Context, runID uint64, facts map[string]string) (map[string]string, error) {
	if err := validFacts(facts); err != nil {
		return nil, fmt.Errorf("set facts of run %d: %w", runID, err)
	}
	out := map[string]string{}
	err := s.change(ctx, func(tx *bolt.Tx) error {
		rb, err := s.runBucket(tx, runID)
		if err != nil {
			return err
		}
		fb := rb.Bucket(bucketFacts)
		if fb == nil {
			return s.corrupt(fmt.Errorf("run %d has no %s bucket", runID, bucketFacts))
		}
		for k, v := range facts {
			if fb.Get([]byte(k)) != nil {
				continue
			}
			if err := fb.Put([]byte(k), []byte(v)); err != nil {
				return err
			}
		}
		return fb.ForEach(func(k, v []byte) error {
			out[string(k)] = string(v)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("set facts of run %d: %w", runID, err)
	}
	return out, nil
}

// Finish sets the outcome of run runID and the time it ended (now if at is
// zero). A finished run can be finished again with another outcome, as when
// a resume completes a run that failed past its point of no return; Running
// marks the run as not ended again and clears its end time.
func (s *Store) Finish(ctx context.Context, runID uint64, outcome Outcome, at time.Time) error {
	if !outcome.Valid() {
		return fmt.Errorf("finish run %d: unknown outcome %q", runID, outcome)
	}
	at = stamp(at, time.Now())
	if outcome == Running {
		at = time.Time{}
	}
	err := s.updateRun(ctx, runID, func(rec *runRecord) {
		rec.Outcome = outcome
		rec.Ended = at
	})
	if err != nil {
		return fmt.Errorf("finish run %d as %s: %w", runID, outcome, err)
	}
	return nil
}

// SetTravel records the direction run runID travels in. A run that is rolling back or
// aborting never travels forward again: such a change is refused.
func (s *Store) SetTravel(ctx context.Context, runID uint64, t Travel) error {
	if !t.Valid() {
		return fmt.Errorf("set travel of run %d: unknown direction %q", runID, t)
	}
	err := s.change(ctx, func(tx *bolt.Tx) error {
		rb, err := s.runBucket(tx, runID)
		if err != nil {
			return err
		}
		var rec runRecord
		if err := s.getJSON(rb, keyRun, &rec, runID); err != nil {
			return err
		}
		if t == Forward && rec.Travel != "" && rec.Travel != Forward {
			return fmt.Errorf("the run is %s: it never travels forward again", rec.Travel)
		}
		rec.Travel = t
		return putJSON(rb, keyRun, rec)
	})
	if err != nil {
		return fmt.Errorf("set travel of run %d to %s: %w", runID, t, err)
	}
	return nil
}

// SetPastPONR records whether run runID has crossed its point of no return. The runner sets
// it before the point-of-no-return stage changes anything, and clears it when that stage
// failed without changing anything.
func (s *Store) SetPastPONR(ctx context.Context, runID uint64, past bool) error {
	err := s.updateRun(ctx, runID, func(rec *runRecord) { rec.PastPONR = past })
	if err != nil {
		return fmt.Errorf("set point of no return of run %d: %w", runID, err)
	}
	return nil
}

// SetOffline replaces the list of nodes that run runID skipped as offline.
func (s *Store) SetOffline(ctx context.Context, runID uint64, nodes []string) error {
	if err := validNodes(nodes); err != nil {
		return fmt.Errorf("set offline nodes of run %d: %w", runID, err)
	}
	nodes = cloneStrings(nodes)
	err := s.updateRun(ctx, runID, func(rec *runRecord) { rec.Offline = nodes })
	if err != nil {
		return fmt.Errorf("set offline nodes of run %d: %w", runID, err)
	}
	return nil
}

// Run returns run id with its facts and events. An unknown id (or no journal
// file at all) is an error for which IsNotFound is true.
func (s *Store) Run(ctx context.Context, id uint64) (Run, error) {
	var r Run
	err := s.view(ctx, func(tx *bolt.Tx) error {
		rb, err := s.runBucket(tx, id)
		if err != nil {
			return err
		}
		r, err = s.readRun(rb, id)
		return err
	})
	if errors.Is(err, errAbsent) {
		err = fmt.Errorf("%w in journal %s (no journal yet)", errNotFound, s.path)
	}
	if err != nil {
		return Run{}, fmt.Errorf("read run %d: %w", id, err)
	}
	return r, nil
}

// Runs returns every run in the journal, oldest first, with their facts and
// events. A journal that does not exist yet has no runs.
func (s *Store) Runs(ctx context.Context) ([]Run, error) {
	var runs []Run
	err := s.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketRuns).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if v != nil || len(k) != 8 {
				return s.corrupt(fmt.Errorf("bucket %s holds a key %x that is not a run", bucketRuns, k))
			}
			id := binary.BigEndian.Uint64(k)
			r, err := s.readRun(c.Bucket().Bucket(k), id)
			if err != nil {
				return err
			}
			runs = append(runs, r)
		}
		return nil
	})
	if errors.Is(err, errAbsent) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	return runs, nil
}

// updateRun changes the header of run runID in one write transaction.
func (s *Store) updateRun(ctx context.Context, runID uint64, change func(*runRecord)) error {
	return s.change(ctx, func(tx *bolt.Tx) error {
		rb, err := s.runBucket(tx, runID)
		if err != nil {
			return err
		}
		var rec runRecord
		if err := s.getJSON(rb, keyRun, &rec, runID); err != nil {
			return err
		}
		change(&rec)
		return putJSON(rb, keyRun, rec)
	})
}

// runBucket returns the bucket of run id.
func (s *Store) runBucket(tx *bolt.Tx, id uint64) (*bolt.Bucket, error) {
	runs := tx.Bucket(bucketRuns)
	rb := runs.Bucket(itob(id))
	switch {
	case rb == nil && runs.Get(itob(id)) != nil:
		return nil, s.corrupt(fmt.Errorf("run %d is not a bucket", id))
	case rb == nil:
		return nil, fmt.Errorf("%w in journal %s", errNotFound, s.path)
	}
	return rb, nil
}

// readRun decodes run id from its bucket, copying everything out of the
// transaction.
func (s *Store) readRun(rb *bolt.Bucket, id uint64) (Run, error) {
	if rb == nil {
		return Run{}, s.corrupt(fmt.Errorf("run %d is not a bucket", id))
	}
	var rec runRecord
	if err := s.getJSON(rb, keyRun, &rec, id); err != nil {
		return Run{}, err
	}
	r := rec.run(id)
	fb, eb := rb.Bucket(bucketFacts), rb.Bucket(bucketEvents)
	if fb == nil || eb == nil {
		return Run{}, s.corrupt(fmt.Errorf("run %d lacks its %s or %s bucket", id, bucketFacts, bucketEvents))
	}
	err := fb.ForEach(func(k, v []byte) error {
		r.Facts[string(k)] = string(v)
		return nil
	})
	if err != nil {
		return Run{}, err
	}
	err = eb.ForEach(func(k, v []byte) error {
		if len(k) != 8 || v == nil {
			return s.corrupt(fmt.Errorf("run %d: key %x is not an event", id, k))
		}
		var er eventRecord
		if err := json.Unmarshal(v, &er); err != nil {
			return s.corrupt(fmt.Errorf("run %d event %d: %w", id, binary.BigEndian.Uint64(k), err))
		}
		r.Events = append(r.Events, er.event(binary.BigEndian.Uint64(k)))
		return nil
	})
	if err != nil {
		return Run{}, err
	}
	return r, nil
}

// getJSON decodes the JSON value of key in b into v.
func (s *Store) getJSON(b *bolt.Bucket, key []byte, v any, id uint64) error {
	data := b.Get(key)
	if data == nil {
		return s.corrupt(fmt.Errorf("run %d has no %s record", id, key))
	}
	if err := json.Unmarshal(data, v); err != nil {
		return s.corrupt(fmt.Errorf("run %d %s record: %w", id, key, err))
	}
	return nil
}

// putJSON stores v as JSON under key in b.
func putJSON(b *bolt.Bucket, key []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, data)
}

// appendEvent stores ev under the next seq of the events bucket eb.
func appendEvent(eb *bolt.Bucket, ev Event, now time.Time) (Event, error) {
	seq, err := eb.NextSequence()
	if err != nil {
		return Event{}, err
	}
	ev.Seq = seq
	ev.At = stamp(ev.At, now)
	ev.Nodes = utcNodes(ev.Nodes)
	if err := putJSON(eb, itob(seq), toEventRecord(ev)); err != nil {
		return Event{}, err
	}
	return ev, nil
}

// utcNodes copies nodes with their times in UTC, as the journal keeps them; zero times stay
// zero.
func utcNodes(nodes []NodeResult) []NodeResult {
	out := append([]NodeResult(nil), nodes...)
	for i := range out {
		n := &out[i]
		n.Start, n.End = utc(n.Start), utc(n.End)
		n.Steps = append([]Step(nil), n.Steps...)
		for j := range n.Steps {
			n.Steps[j].Start, n.Steps[j].End = utc(n.Steps[j].Start), utc(n.Steps[j].End)
		}
	}
	return out
}

// utc returns t in UTC, and the zero time as it is.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

// stamp returns t in UTC, or now in UTC if t is zero.
func stamp(t, now time.Time) time.Time {
	if t.IsZero() {
		t = now
	}
	return t.UTC()
}

func validFacts(facts map[string]string) error {
	for k := range facts {
		if k == "" {
			return errors.New("fact with an empty name")
		}
		if len(k) > bolt.MaxKeySize {
			return fmt.Errorf("fact name of %d bytes is too long", len(k))
		}
	}
	return nil
}

func validNodes(nodes []string) error {
	for _, n := range nodes {
		if n == "" {
			return errors.New("node list holds an empty name")
		}
	}
	return nil
}

func cloneStrings(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return append([]string(nil), s...)
}
