package journal

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// t0 is the fixed time the tests record at.
var t0 = time.Date(2026, 11, 21, 18, 1, 2, 0, time.UTC)

// newStore returns a store in a directory that does not exist yet.
func newStore(t *testing.T) *Store {
	t.Helper()
	return NewStore(filepath.Join(t.TempDir(), "state", "journal.db"))
}

// sampleRun is a run as the upgrade command creates it.
func sampleRun() Run {
	return Run{
		Kind: "upgrade", From: "1.0.0", To: "1.1.0", Direction: "upgrade",
		Host: "node1", PID: 4242, Started: t0,
	}
}

// mustCreate creates a run or fails the test.
func mustCreate(t *testing.T, s *Store, r Run) Run {
	t.Helper()
	got, err := s.CreateRun(context.Background(), r)
	if err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	return got
}

// mustRecord records an event or fails the test.
func mustRecord(t *testing.T, s *Store, id uint64, ev Event) Event {
	t.Helper()
	got, err := s.Record(context.Background(), id, ev)
	if err != nil {
		t.Fatalf("Record(%d, %s %s): %v", id, ev.Stage, ev.State, err)
	}
	return got
}

// withDB opens the bbolt file at path directly (as another process would)
// and runs fn in a write transaction.
func withDB(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatalf("update %s: %v", path, err)
	}
}

// dump renders every bucket, sequence, key and value of the bbolt file at
// path as sorted text: 8-byte keys as numbers, printable values as text.
func dump(t *testing.T, path string) string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer db.Close()
	var lines []string
	var walk func(prefix string, b *bolt.Bucket) error
	walk = func(prefix string, b *bolt.Bucket) error {
		if seq := b.Sequence(); seq != 0 {
			lines = append(lines, fmt.Sprintf("%s (sequence %d)", prefix, seq))
		}
		return b.ForEach(func(k, v []byte) error {
			name := prefix + "/" + showKey(k)
			if v == nil {
				lines = append(lines, name+"/")
				return walk(name, b.Bucket(k))
			}
			lines = append(lines, name+" = "+showValue(v))
			return nil
		})
	}
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			lines = append(lines, showKey(name)+"/")
			return walk(showKey(name), b)
		})
	})
	if err != nil {
		t.Fatalf("dump %s: %v", path, err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

func showKey(k []byte) string {
	if len(k) == 8 && !printable(k) {
		return fmt.Sprintf("<%d>", bytesToUint(k))
	}
	return string(k)
}

func showValue(v []byte) string {
	if printable(v) {
		return string(v)
	}
	if len(v) == 8 {
		return fmt.Sprintf("<%d>", bytesToUint(v))
	}
	return fmt.Sprintf("%x", v)
}

func bytesToUint(b []byte) uint64 {
	var n uint64
	for _, c := range b {
		n = n<<8 | uint64(c)
	}
	return n
}

func printable(b []byte) bool {
	return len(b) > 0 && bytes.IndexFunc(b, func(r rune) bool { return !unicode.IsPrint(r) && r != '\n' }) < 0
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./journal -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run with -update if the change is intended)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// fileMode returns the permission bits of path.
func fileMode(t *testing.T, path string) os.FileMode {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode().Perm()
}

// tryFlock takes and drops an exclusive flock on f without waiting.
func tryFlock(f *os.File) error {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return err
	}
	return unix.Flock(int(f.Fd()), unix.LOCK_UN)
}
