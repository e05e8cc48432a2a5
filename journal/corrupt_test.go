package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// validJournal writes a journal with a few runs and events at path, large
// enough to span many pages.
func validJournal(t *testing.T, path string) {
	t.Helper()
	s := NewStore(path)
	for range 3 {
		id := mustCreate(t, s, sampleRun()).ID
		for i := range 10 {
			mustRecord(t, s, id, Event{Stage: "stop-nodes", Index: 8, State: Failed, Message: strings.Repeat("x", 800),
				Nodes: []NodeResult{{Node: "node2", ExitCode: i, StderrTail: strings.Repeat("e", 1500)}}})
		}
	}
}

// corruptFiles builds each kind of file that is not a valid journal.
var corruptFiles = map[string]func(t *testing.T, path string){
	"garbage": func(t *testing.T, path string) {
		r := rand.New(rand.NewPCG(1, 2))
		b := make([]byte, 64<<10)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		writeFile(t, path, b)
	},
	"short text": func(t *testing.T, path string) { writeFile(t, path, []byte("not a database\n")) },
	"empty":      func(t *testing.T, path string) { writeFile(t, path, nil) },
	"truncated to half": func(t *testing.T, path string) {
		validJournal(t, path)
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, info.Size()/2); err != nil {
			t.Fatal(err)
		}
	},
	"truncated to its meta pages": func(t *testing.T, path string) {
		validJournal(t, path)
		if err := os.Truncate(path, 2*4096); err != nil {
			t.Fatal(err)
		}
	},
	"bbolt file of another program": func(t *testing.T, path string) {
		withDB(t, path, func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket([]byte("widgets"))
			if err != nil {
				return err
			}
			return b.Put([]byte("w1"), []byte("blue"))
		})
	},
	"meta without schema": func(t *testing.T, path string) {
		withDB(t, path, func(tx *bolt.Tx) error {
			_, err := tx.CreateBucket(bucketMeta)
			return err
		})
	},
	"schema of the wrong size": func(t *testing.T, path string) {
		withDB(t, path, func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket(bucketMeta)
			if err != nil {
				return err
			}
			return b.Put(keySchema, []byte("1"))
		})
	},
	"meta without runs": func(t *testing.T, path string) {
		withDB(t, path, func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket(bucketMeta)
			if err != nil {
				return err
			}
			return b.Put(keySchema, itob(currentSchema))
		})
	},
	"a directory": func(t *testing.T, path string) {
		if err := os.Mkdir(path, 0o700); err != nil {
			t.Fatal(err)
		}
	},
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// snapshot returns the bytes of path, or its mode for a directory.
func snapshot(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		info, serr := os.Stat(path)
		if serr != nil {
			t.Fatal(serr)
		}
		return []byte(info.Mode().String())
	}
	return b
}

// storeCalls are every store method, each on run 1.
var storeCalls = map[string]func(ctx context.Context, s *Store) error{
	"Runs":      func(ctx context.Context, s *Store) error { _, err := s.Runs(ctx); return err },
	"Run":       func(ctx context.Context, s *Store) error { _, err := s.Run(ctx, 1); return err },
	"CreateRun": func(ctx context.Context, s *Store) error { _, err := s.CreateRun(ctx, sampleRun()); return err },
	"Record": func(ctx context.Context, s *Store) error {
		_, err := s.Record(ctx, 1, Event{Stage: "drain", State: Started})
		return err
	},
	"SetFacts": func(ctx context.Context, s *Store) error {
		_, err := s.SetFacts(ctx, 1, map[string]string{"k": "v"})
		return err
	},
	"Finish":     func(ctx context.Context, s *Store) error { return s.Finish(ctx, 1, Aborted, t0) },
	"SetOffline": func(ctx context.Context, s *Store) error { return s.SetOffline(ctx, 1, []string{"node2"}) },
}

func TestCorruptFile(t *testing.T) {
	t.Parallel()
	for name, build := range corruptFiles {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "journal.db")
			build(t, path)
			before := snapshot(t, path)
			s := NewStore(path).WithTimeout(time.Second)
			for call, fn := range storeCalls {
				err := fn(context.Background(), s)
				if !IsCorrupt(err) || IsBusy(err) || IsNotFound(err) {
					t.Errorf("%s: err = %v, want a corrupt journal error", call, err)
					continue
				}
				if !strings.Contains(err.Error(), path) {
					t.Errorf("%s: error %q does not name %s", call, err, path)
				}
			}
			if !bytes.Equal(snapshot(t, path), before) {
				t.Errorf("the file was changed")
			}
			// The journal is released: another process can open it.
			if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Size() > 0 {
				f, err := os.OpenFile(path, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if err := tryFlock(f); err != nil {
					t.Errorf("the journal file is still locked after the errors: %v", err)
				}
			}
		})
	}
}

// corruptRecords damage one record of a valid journal (run 1).
var corruptRecords = map[string]func(tx *bolt.Tx) error{
	"run record not JSON": func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRuns).Bucket(itob(1)).Put(keyRun, []byte("{not json"))
	},
	"run record missing": func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRuns).Bucket(itob(1)).Delete(keyRun)
	},
	"event not JSON": func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRuns).Bucket(itob(1)).Bucket(bucketEvents).Put(itob(1), []byte{0xff, 0})
	},
	"events bucket missing": func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRuns).Bucket(itob(1)).DeleteBucket(bucketEvents)
	},
	"run that is not a bucket": func(tx *bolt.Tx) error {
		runs := tx.Bucket(bucketRuns)
		if err := runs.DeleteBucket(itob(1)); err != nil {
			return err
		}
		return runs.Put(itob(1), []byte("{}"))
	},
}

func TestCorruptRecord(t *testing.T) {
	t.Parallel()
	reads := []string{"Runs", "Run"}
	for name, damage := range corruptRecords {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "journal.db")
			s := NewStore(path)
			id := mustCreate(t, s, sampleRun()).ID
			mustRecord(t, s, id, Event{Stage: "drain", State: Started})
			withDB(t, path, damage)
			for _, call := range reads {
				err := storeCalls[call](context.Background(), s)
				if !IsCorrupt(err) || !strings.Contains(err.Error(), path) {
					t.Errorf("%s: err = %v, want a corrupt journal error naming %s", call, err, path)
				}
			}
		})
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "journal.db")
	s := NewStore(path)
	mustCreate(t, s, sampleRun())
	newer := currentSchema + 1
	withDB(t, path, func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keySchema, itob(newer)) })
	before := snapshot(t, path)
	for call, fn := range storeCalls {
		err := fn(context.Background(), s)
		if !IsNewerSchema(err) || IsCorrupt(err) {
			t.Errorf("%s: err = %v, want a newer schema error", call, err)
			continue
		}
		for _, want := range []string{path, "schema version 2", "up to 1"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not contain %q", call, err, want)
			}
		}
	}
	if !bytes.Equal(snapshot(t, path), before) {
		t.Errorf("the file was changed")
	}
}

// TestPanicBecomesCorrupt checks the last line of defence: a panic inside a
// transaction is an error, and the file is released.
func TestPanicBecomesCorrupt(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	mustCreate(t, s, sampleRun())
	for _, mode := range []access{read, write, create} {
		err := s.do(context.Background(), mode, func(*bolt.Tx) error { panic("invalid page type") })
		if !IsCorrupt(err) || !strings.Contains(err.Error(), "invalid page type") {
			t.Errorf("mode %d: err = %v, want a corrupt journal error with the panic", mode, err)
		}
	}
	if _, err := s.Run(context.Background(), 1); err != nil {
		t.Errorf("after the panics: %v", err)
	}
}

// TestBusy holds the journal open as another process would and checks that
// every call gives up after the store's timeout with IsBusy.
func TestBusy(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "journal.db")
	mustCreate(t, NewStore(path), sampleRun())
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := NewStore(path).WithTimeout(100 * time.Millisecond)
	for call, fn := range storeCalls {
		start := time.Now()
		err := fn(context.Background(), s)
		if !IsBusy(err) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: err = %v, want a busy error naming %s", call, err, path)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s took %s, want about the 100ms timeout", call, d)
		}
	}
	// A context deadline shorter than the timeout wins.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := NewStore(path).Runs(ctx); !IsBusy(err) {
		t.Errorf("Runs with a 50ms deadline: err = %v, want busy", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Runs with a 50ms deadline took %s", d)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Record(context.Background(), 1, Event{Stage: "drain", State: Started}); err != nil {
		t.Errorf("Record once the journal is free: %v", err)
	}
}

// TestReadersShare checks that a reader is not kept out by another reader
// (as `status` and `journal` run side by side) and that a writer waits for
// readers only as long as they read.
func TestReadersShare(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "journal.db")
	mustCreate(t, NewStore(path), sampleRun())
	reader, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(path).WithTimeout(100 * time.Millisecond)
	if runs, err := s.Runs(context.Background()); err != nil || len(runs) != 1 {
		t.Errorf("Runs while another reader is open = %d runs, %v, want 1, nil", len(runs), err)
	}
	if _, err := s.Record(context.Background(), 1, Event{Stage: "drain", State: Started}); !IsBusy(err) {
		t.Errorf("Record while a reader keeps the file open: err = %v, want busy", err)
	}
	reader.Close()
	if _, err := s.Record(context.Background(), 1, Event{Stage: "drain", State: Started}); err != nil {
		t.Errorf("Record after the reader closed: %v", err)
	}
}

func TestEmptyPath(t *testing.T) {
	t.Parallel()
	for call, fn := range storeCalls {
		err := fn(context.Background(), NewStore(""))
		if err == nil || !strings.Contains(err.Error(), "path is empty") {
			t.Errorf("%s on an empty path: err = %v", call, err)
		}
		if errors.Is(err, errAbsent) {
			t.Errorf("%s leaks an internal error: %v", call, err)
		}
	}
}

// TestTruncatedAnywhere cuts a valid journal at every page boundary below
// its last page: every cut is refused as corrupt (never a crash, never a
// lock left behind), and a cut above it (bbolt preallocates) loses nothing.
func TestTruncatedAnywhere(t *testing.T) {
	t.Parallel()
	src := filepath.Join(t.TempDir(), "src.db")
	validJournal(t, src)
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var end int64
	db, err := bolt.Open(src, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.View(func(tx *bolt.Tx) error { end = tx.Size(); return nil }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	dir := t.TempDir()
	for n := int64(4096); n <= int64(len(data)); n += 4096 {
		for _, call := range []string{"Runs", "CreateRun", "Record"} {
			path := filepath.Join(dir, fmt.Sprintf("journal-%d-%s.db", n, call))
			writeFile(t, path, data[:n])
			s := NewStore(path).WithTimeout(200 * time.Millisecond)
			for try := 1; try <= 2; try++ {
				err := storeCalls[call](context.Background(), s)
				if n < end && !IsCorrupt(err) {
					t.Errorf("cut at %d, %s try %d: err = %v, want a corrupt journal error", n, call, try, err)
				}
				if n >= end && err != nil {
					t.Errorf("cut at %d (pages end at %d), %s try %d: %v", n, end, call, try, err)
				}
			}
		}
	}
}
