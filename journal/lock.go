package journal

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// lockRetries and lockRetryWait let AcquireLock ride out the instant in which
// ReadHolder probes the lock.
const (
	lockRetries   = 4
	lockRetryWait = 25 * time.Millisecond
)

// Holder says who holds the run lock.
type Holder struct {
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	Command string    `json:"command,omitempty"`
}

// Lock is a held run lock. Release it when the run ends.
type Lock struct {
	path string
	file *os.File
}

// AcquireLock takes the run lock at path without waiting: an exclusive
// flock(2) on the file (created with mode 0600, its directory with 0700). On
// success it writes h into the file as JSON, so that a refused process can
// say who holds it; an empty h.Host, zero h.PID and zero h.Started are filled
// in with this host, this process and now.
//
// If another process holds the lock, the error satisfies [IsLocked], its
// message names the holder's pid, host and start time, and [LockHolder]
// returns the holder.
//
// The kernel releases the lock when the process holding it exits, however it
// exits (the descriptor is close-on-exec, so commands the run starts do not
// inherit it). A lock file left by a crashed or killed run is therefore
// simply taken over by the next AcquireLock: there is no stale lock to remove.
func AcquireLock(path string, h Holder) (*Lock, error) {
	if err := MkdirAllDurable(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("acquire lock %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("acquire lock: %w", err)
	}
	for try := 1; ; try++ {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EWOULDBLOCK) || try == lockRetries {
			break
		}
		time.Sleep(lockRetryWait)
	}
	if errors.Is(err, unix.EWOULDBLOCK) {
		holder, known := readHolder(f, lockRetries)
		f.Close()
		return nil, &lockedError{path: path, holder: holder, known: known}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("acquire lock %s: %w", path, err)
	}
	if err := writeHolder(f, fillHolder(h)); err != nil {
		f.Close()
		return nil, fmt.Errorf("acquire lock %s: write holder: %w", path, err)
	}
	return &Lock{path: path, file: f}, nil
}

// Path returns the path of the lock file.
func (l *Lock) Path() string { return l.path }

// Release unlocks and closes the lock file, leaving the file (and the last
// holder written in it) in place. Releasing twice is not an error.
func (l *Lock) Release() error {
	if l == nil || l.file == nil {
		return nil
	}
	f := l.file
	l.file = nil
	err := unix.Flock(int(f.Fd()), unix.LOCK_UN)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("release lock %s: %w", l.path, err)
	}
	return nil
}

// ReadHolder returns the holder written in the lock file at path and whether
// the lock is held right now, found by probing it with a non-blocking flock
// that is released at once. When it is not held, the holder is the last one
// (the zero Holder if the file names none). A missing file is not held and
// not an error.
func ReadHolder(path string) (Holder, bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return Holder{}, false, nil
	}
	if err != nil {
		return Holder{}, false, fmt.Errorf("read lock holder: %w", err)
	}
	defer f.Close()
	held := false
	switch err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); {
	case errors.Is(err, unix.EWOULDBLOCK):
		held = true
	case err != nil:
		return Holder{}, false, fmt.Errorf("probe lock %s: %w", path, err)
	default:
		if err := unix.Flock(int(f.Fd()), unix.LOCK_UN); err != nil {
			return Holder{}, false, fmt.Errorf("probe lock %s: %w", path, err)
		}
	}
	tries := 1
	if held {
		tries = lockRetries
	}
	h, _ := readHolder(f, tries)
	return h, held, nil
}

// readHolder parses the holder in the lock file f, trying up to tries times:
// a holder that has just taken the lock may not have written itself yet.
func readHolder(f *os.File, tries int) (Holder, bool) {
	for try := 1; ; try++ {
		var h Holder
		data, err := io.ReadAll(io.NewSectionReader(f, 0, 64<<10))
		if err == nil && json.Unmarshal(data, &h) == nil && h.PID != 0 {
			return h, true
		}
		if try >= tries {
			return Holder{}, false
		}
		time.Sleep(lockRetryWait)
	}
}

// writeHolder replaces the content of the lock file f with h.
func writeHolder(f *os.File, h Holder) error {
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(append(data, '\n'), 0); err != nil {
		return err
	}
	return f.Sync()
}

// fillHolder completes h with this host, this process and now.
func fillHolder(h Holder) Holder {
	if h.Host == "" {
		h.Host, _ = os.Hostname()
	}
	if h.PID == 0 {
		h.PID = os.Getpid()
	}
	if h.Started.IsZero() {
		h.Started = time.Now()
	}
	h.Started = h.Started.UTC()
	return h
}
