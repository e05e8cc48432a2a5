package journal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"golang.org/x/sys/unix"
)

// DefaultTimeout is how long a [Store] waits for another process to release
// the journal file before it gives up with an error for which [IsBusy] is true.
const DefaultTimeout = 5 * time.Second

// Store is the journal database (bbolt) at one path. It is not held open:
// every method opens the file, does one bbolt transaction and closes it, so
// that readers can look while a run is going. A Store is safe for concurrent
// use, also by several processes.
type Store struct {
	path    string
	timeout time.Duration
}

// NewStore returns the store of the journal at path. Nothing is opened or
// created until a method needs it: the first write creates the file (mode
// 0600) and its parent directory (mode 0700); reading a journal that does not
// exist yet finds no runs.
func NewStore(path string) *Store {
	return &Store{path: path, timeout: DefaultTimeout}
}

// WithTimeout returns a copy of s that waits at most d for another process to
// release the journal file. A d of zero or less means [DefaultTimeout].
func (s *Store) WithTimeout(d time.Duration) *Store {
	if d <= 0 {
		d = DefaultTimeout
	}
	return &Store{path: s.path, timeout: d}
}

// Path returns the path of the journal file.
func (s *Store) Path() string { return s.path }

// errAbsent says that a reader found no journal file.
var errAbsent = errors.New("no journal file")

// errOldSchema says that a reader found a schema that a writer must migrate first.
var errOldSchema = errors.New("journal needs migration")

// access says how do opens the journal.
type access int

const (
	read   access = iota // read-only; errAbsent if there is no file
	write                // read-write; errAbsent if there is no file
	create               // read-write; a missing file is created
)

// update runs fn in one write transaction, after applying any missing
// migrations in that same transaction. It creates the journal if absent.
func (s *Store) update(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	return s.do(ctx, create, fn)
}

// change is update for a change to an existing run: with no journal file
// there is no run, and no file is created.
func (s *Store) change(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	err := s.do(ctx, write, fn)
	if errors.Is(err, errAbsent) {
		return fmt.Errorf("%w in journal %s (no journal yet)", errNotFound, s.path)
	}
	return err
}

// view runs fn in one read transaction. It returns errAbsent when there is no
// journal file. A journal of an older schema is migrated by a write first.
func (s *Store) view(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	err := s.do(ctx, read, fn)
	if errors.Is(err, errOldSchema) {
		if err := s.do(ctx, write, func(*bolt.Tx) error { return nil }); err != nil {
			return err
		}
		err = s.do(ctx, read, fn)
	}
	return err
}

// do opens the journal as mode says, checks its shape and schema, runs fn
// in one transaction and closes the file. A panic inside bbolt, or a fault
// reading the memory-mapped file, becomes an error for which IsCorrupt is
// true.
func (s *Store) do(ctx context.Context, mode access, fn func(tx *bolt.Tx) error) (err error) {
	timeout, err := s.prepare(ctx, mode)
	if err != nil {
		return err
	}
	var file *os.File
	var db *bolt.DB
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			closeAfterPanic(db, file)
			err = s.corrupt(fmt.Errorf("reading it failed: %v", r))
		}
	}()
	opts := &bolt.Options{
		Timeout:  timeout,
		ReadOnly: mode == read,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, perm)
			file = f
			return f, err
		},
	}
	db, err = bolt.Open(s.path, 0o600, opts)
	if err != nil {
		return s.openError(err, timeout)
	}
	defer func() {
		if cerr := db.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close journal %s: %w", s.path, cerr)
		}
	}()
	// The flock bbolt holds keeps writers out, so the size stays put.
	info, err := file.Stat()
	if err != nil {
		return fmt.Errorf("journal %s: %w", s.path, err)
	}
	if mode == read {
		return db.View(func(tx *bolt.Tx) error {
			if err := s.ready(tx, info.Size(), false); err != nil {
				return err
			}
			return fn(tx)
		})
	}
	return db.Update(func(tx *bolt.Tx) error {
		if err := s.ready(tx, info.Size(), true); err != nil {
			return err
		}
		return fn(tx)
	})
}

// prepare checks what can be checked before the journal is opened and
// returns how long to wait for its file lock. In create mode it creates a
// missing journal; otherwise a missing journal is errAbsent.
func (s *Store) prepare(ctx context.Context, mode access) (time.Duration, error) {
	if s.path == "" {
		return 0, errors.New("journal path is empty")
	}
	timeout, err := s.waitLimit(ctx)
	if err != nil {
		return 0, fmt.Errorf("journal %s: %w", s.path, err)
	}
	info, err := os.Stat(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && mode != create:
		return 0, errAbsent
	case errors.Is(err, fs.ErrNotExist):
		return timeout, s.create(timeout)
	case err != nil:
		return 0, fmt.Errorf("journal %s: %w", s.path, err)
	case !info.Mode().IsRegular():
		return 0, s.corrupt(fmt.Errorf("not a regular file (%s)", info.Mode().Type()))
	case info.Size() == 0:
		return 0, s.corrupt(errors.New("the file is empty"))
	}
	return timeout, nil
}

// ready checks that the journal in tx is whole (its pages end within the
// file's size) and of a schema this code knows. With migrateOld it applies
// any missing migrations; without, an older schema is errOldSchema.
func (s *Store) ready(tx *bolt.Tx, size int64, migrateOld bool) error {
	if tx.Size() > size {
		return s.corrupt(fmt.Errorf("the file is %d bytes but its pages end at %d: it was truncated", size, tx.Size()))
	}
	have, err := schemaOf(tx)
	switch {
	case err != nil:
		return s.corrupt(err)
	case have > currentSchema:
		return &newerSchemaError{path: s.path, have: have, know: currentSchema}
	case have < currentSchema && !migrateOld:
		return errOldSchema
	case have < currentSchema:
		if err := migrate(tx, migrations, have); err != nil {
			return fmt.Errorf("journal %s: %w", s.path, err)
		}
	}
	if tx.Bucket(bucketRuns) == nil {
		return s.corrupt(fmt.Errorf("no %s bucket", bucketRuns))
	}
	return nil
}

// waitLimit returns how long to wait for the file lock: the store's timeout,
// cut short by ctx's deadline.
func (s *Store) waitLimit(ctx context.Context) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	timeout := s.timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if deadline, ok := ctx.Deadline(); ok {
		left := time.Until(deadline)
		if left <= 0 {
			return 0, context.DeadlineExceeded
		}
		timeout = min(timeout, left)
	}
	return timeout, nil
}

// create makes a new journal at s.path: it initialises a temporary file in
// the same directory with the current schema and links it into place, so no
// crash leaves an empty or half-initialised journal behind. Losing a race with
// another creator is fine: the other journal is used.
func (s *Store) create(timeout time.Duration) error {
	dir := filepath.Dir(s.path)
	if err := MkdirAllDurable(dir, 0o700); err != nil {
		return fmt.Errorf("create journal directory %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(s.path)+".new-*")
	if err != nil {
		return fmt.Errorf("create journal %s: %w", s.path, err)
	}
	name := tmp.Name()
	defer os.Remove(name)
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("create journal %s: %w", s.path, err)
	}
	db, err := bolt.Open(name, 0o600, &bolt.Options{Timeout: timeout})
	if err != nil {
		return fmt.Errorf("create journal %s: %w", s.path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error { return migrate(tx, migrations, 0) })
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("create journal %s: %w", s.path, err)
	}
	if err := os.Link(name, s.path); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create journal %s: %w", s.path, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("create journal %s: %w", s.path, err)
	}
	return nil
}

// openError classifies an error of bolt.Open.
func (s *Store) openError(err error, waited time.Duration) error {
	var pathErr *fs.PathError
	var errno syscall.Errno
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return fmt.Errorf("journal %s is %w: another process kept it open for longer than %s", s.path, errBusy, waited)
	case errors.As(err, &pathErr), errors.As(err, &errno):
		return fmt.Errorf("open journal %s: %w", s.path, err)
	default:
		return s.corrupt(err)
	}
}

// corrupt wraps cause into an error for which IsCorrupt is true.
func (s *Store) corrupt(cause error) error {
	return fmt.Errorf("journal %s: %w: %w", s.path, errCorrupt, cause)
}

// closeAfterPanic releases what a panicking bbolt call left open, so that
// the file lock does not outlive the call. When bolt.Open itself panicked
// there is no DB to close: its memory map keeps the open file alive past
// Close, so the lock is dropped explicitly (the map itself is lost).
func closeAfterPanic(db *bolt.DB, file *os.File) {
	defer func() { _ = recover() }()
	if db != nil {
		_ = db.Close()
		return
	}
	if file != nil {
		_ = unix.Flock(int(file.Fd()), unix.LOCK_UN)
		_ = file.Close()
	}
}
