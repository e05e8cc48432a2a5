package journal

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// migrationTest is the test case of one migration: setup fills a journal
// that is at the migration's from-schema, check verifies the migrated one.
type migrationTest struct {
	setup func(tx *bolt.Tx) error
	check func(t *testing.T, tx *bolt.Tx)
}

// migrationTests holds one case per entry of migrations, keyed by its index.
var migrationTests = map[int]migrationTest{
	0: { // 0 -> 1: create buckets, in a new (empty) bbolt file
		setup: func(*bolt.Tx) error { return nil },
		check: func(t *testing.T, tx *bolt.Tx) {
			for _, name := range [][]byte{bucketMeta, bucketRuns} {
				if tx.Bucket(name) == nil {
					t.Errorf("no bucket %s", name)
				}
			}
		},
	},
}

func TestMigrations(t *testing.T) {
	t.Parallel()
	if len(migrationTests) != len(migrations) {
		t.Fatalf("%d migration test cases for %d migrations: every migration needs one", len(migrationTests), len(migrations))
	}
	for i, m := range migrations {
		tc, ok := migrationTests[i]
		if !ok {
			t.Fatalf("migration %d (%s) has no test case", i, m.name)
		}
		if m.from != uint64(i) {
			t.Errorf("migration %d (%s) starts from schema %d, want %d", i, m.name, m.from, i)
		}
		path := filepath.Join(t.TempDir(), "journal.db")
		withDB(t, path, func(tx *bolt.Tx) error {
			if i > 0 {
				if err := migrate(tx, migrations[:i], 0); err != nil {
					return err
				}
			}
			return tc.setup(tx)
		})
		withDB(t, path, func(tx *bolt.Tx) error {
			have, err := schemaOf(tx)
			if err != nil || have != uint64(i) {
				t.Fatalf("migration %d: the set-up journal has schema %d, %v, want %d", i, have, err, i)
			}
			if err := migrate(tx, migrations[:i+1], have); err != nil {
				t.Fatalf("migration %d (%s): %v", i, m.name, err)
			}
			if have, err := schemaOf(tx); err != nil || have != uint64(i+1) {
				t.Errorf("migration %d: schema after = %d, %v, want %d", i, have, err, i+1)
			}
			tc.check(t, tx)
			return nil
		})
	}
}

// TestMigrateOrder exercises the mechanism with a list of made-up steps.
func TestMigrateOrder(t *testing.T) {
	t.Parallel()
	step := func(from uint64, fail bool) migration {
		return migration{from: from, name: "step", apply: func(tx *bolt.Tx) error {
			if fail {
				return errors.New("boom")
			}
			b, err := tx.CreateBucketIfNotExists([]byte("log"))
			if err != nil {
				return err
			}
			seq, _ := b.NextSequence()
			return b.Put(itob(seq), itob(from))
		}}
	}
	list := []migration{{from: 0, name: "create buckets", apply: createBuckets}, step(1, false), step(2, false)}
	tests := []struct {
		name    string
		list    []migration
		have    uint64
		wantErr bool
		applied []uint64 // the from-versions of the steps that ran, in order
		schema  uint64   // the schema afterwards
	}{
		{"from new", list, 0, false, []uint64{1, 2}, 3},
		{"from the middle", list, 2, false, []uint64{2}, 3},
		{"up to date", list, 3, false, nil, 3},
		{"newer than the list", list, 4, true, nil, 0},
		{"misnumbered", []migration{list[0], step(2, false)}, 0, true, nil, 0},
		{"failing step", []migration{list[0], step(1, false), step(2, true)}, 0, true, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "journal.db")
			db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if tt.have > 0 {
				err := db.Update(func(tx *bolt.Tx) error {
					if err := createBuckets(tx); err != nil {
						return err
					}
					return tx.Bucket(bucketMeta).Put(keySchema, itob(tt.have))
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			err = db.Update(func(tx *bolt.Tx) error { return migrate(tx, tt.list, tt.have) })
			if (err != nil) != tt.wantErr {
				t.Fatalf("migrate from %d: err = %v, want error %v", tt.have, err, tt.wantErr)
			}
			var applied []uint64
			var schema uint64
			err = db.View(func(tx *bolt.Tx) error {
				if b := tx.Bucket([]byte("log")); b != nil {
					_ = b.ForEach(func(_, v []byte) error {
						applied = append(applied, binary.BigEndian.Uint64(v))
						return nil
					})
				}
				if tx.Bucket(bucketMeta) != nil {
					schema, _ = schemaOf(tx)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			wantSchema := tt.schema
			if tt.wantErr {
				wantSchema = tt.have // a failed migration changes nothing
			}
			if !reflect.DeepEqual(applied, tt.applied) || schema != wantSchema {
				t.Errorf("migrate from %d: applied %v, schema %d; want %v, %d", tt.have, applied, schema, tt.applied, wantSchema)
			}
		})
	}
}

// TestStoreMigratesOldFile hands the store a bbolt file at schema 0 (no
// buckets): a reader and a writer both bring it to the current schema.
func TestStoreMigratesOldFile(t *testing.T) {
	t.Parallel()
	for _, call := range []string{"Runs", "CreateRun"} {
		path := filepath.Join(t.TempDir(), "journal.db")
		withDB(t, path, func(*bolt.Tx) error { return nil })
		if err := storeCalls[call](context.Background(), NewStore(path)); err != nil {
			t.Fatalf("%s on a schema 0 journal: %v", call, err)
		}
		withDB(t, path, func(tx *bolt.Tx) error {
			if have, err := schemaOf(tx); err != nil || have != currentSchema {
				t.Errorf("after %s: schema %d, %v, want %d", call, have, err, currentSchema)
			}
			return nil
		})
	}
}

// fixtureRun records the run the stored-format tests look at.
func fixtureRun(t *testing.T, s *Store) Run {
	t.Helper()
	ctx := context.Background()
	r := sampleRun()
	r.Offline = []string{"node4"}
	r.Facts = map[string]string{"from": "1.0.0"}
	id := mustCreate(t, s, r).ID
	mustRecord(t, s, id, Event{Stage: "drain", Index: 4, State: Started, At: t0.Add(time.Second)})
	mustRecord(t, s, id, Event{Stage: "drain", Index: 4, State: Done, At: t0.Add(13 * time.Second),
		Duration: 12400 * time.Millisecond, Message: "waited for 3 jobs"})
	mustRecord(t, s, id, Event{Stage: "switch", Index: 11, State: Failed, At: t0.Add(14 * time.Second),
		Duration: 100 * time.Millisecond, Message: "1 of 2 nodes failed",
		Nodes: []NodeResult{
			{Node: "node1", OK: true, Duration: 40 * time.Millisecond},
			{Node: "node2", ExitCode: 1, Error: "rename /etc/demoapp/lib: permission denied", StderrTail: "line 1\nline 2\n", Duration: 90 * time.Millisecond},
		}})
	if _, err := s.SetFacts(ctx, id, map[string]string{"queue-drained-before": "false"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, id, RolledBack, t0.Add(20*time.Second)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestStoredFormat pins the bytes the journal stores: a change here is a
// schema change and needs a migration.
func TestStoredFormat(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	fixtureRun(t, s)
	golden(t, "journal-schema1.golden", []byte(dump(t, s.Path())))
}

// TestStoredNodeTimes pins how the journal stores a node's times and steps, which schema 1
// took in without a migration (added fields that an older cutover ignores), and that a
// journal without them reads as zero times.
func TestStoredNodeTimes(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	id := mustCreate(t, s, sampleRun()).ID
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	mustRecord(t, s, id, Event{Stage: "batch-1", Index: 6, State: Done, At: at(900), Duration: 800 * time.Millisecond,
		Nodes: []NodeResult{{Node: "node2", OK: true, Duration: 700 * time.Millisecond, Start: at(150), End: at(850),
			Steps: []Step{{Name: "stop", Start: at(160), End: at(300)}, {Name: "start", Start: at(400), End: at(800)}}}}})
	golden(t, "journal-node-times.golden", []byte(dump(t, s.Path())))
	got, err := s.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	n := got.Events[0].Nodes[0]
	if !n.Start.Equal(at(150)) || !n.End.Equal(at(850)) || len(n.Steps) != 2 || n.Steps[1].Name != "start" || !n.Steps[1].End.Equal(at(800)) {
		t.Errorf("node result read back = %+v, want its times and two steps", n)
	}
	old := fixtureRun(t, s)
	if n := old.Events[2].Nodes[0]; !n.Start.IsZero() || !n.End.IsZero() || n.Steps != nil {
		t.Errorf("a node result stored without times reads as %+v, want zero times and no steps", n)
	}
}

// TestSchema1Fixture reads a journal written by schema 1 (testdata): every
// later cutover must still read it. -update creates the file only when it is
// missing and the code is at schema 1.
func TestSchema1Fixture(t *testing.T) {
	t.Parallel()
	fixture := filepath.Join("testdata", "journal-schema1.db")
	want := fixtureRun(t, newStore(t))
	if _, err := os.Stat(fixture); *update && currentSchema == 1 && errors.Is(err, os.ErrNotExist) {
		fixtureRun(t, NewStore(fixture))
	}
	data, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "journal.db")
	writeFile(t, path, data)
	runs, err := NewStore(path).Runs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || !reflect.DeepEqual(runs[0], want) {
		t.Errorf("Runs() of the schema 1 fixture =\n%+v\nwant\n%+v", runs, want)
	}
}
