package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"time"
)

var (
	errNotFound = errors.New("not found")
	errCorrupt  = errors.New("not a valid cutover journal")
	errBusy     = errors.New("busy")
)

// IsNotFound reports whether err says that a run is not in the journal.
func IsNotFound(err error) bool { return errors.Is(err, errNotFound) }

// IsCorrupt reports whether err says that the journal file is not a valid
// journal: garbage, truncated, empty, or a bbolt file of another shape. The
// message names the file. Such a file is left as it is.
func IsCorrupt(err error) bool { return errors.Is(err, errCorrupt) }

// IsBusy reports whether err says that another process kept the journal file
// locked for longer than the store's timeout.
func IsBusy(err error) bool { return errors.Is(err, errBusy) }

// IsNewerSchema reports whether err says that the journal was written by a
// newer cutover whose schema this one does not know. The message names both
// versions.
func IsNewerSchema(err error) bool {
	var e *newerSchemaError
	return errors.As(err, &e)
}

// NoIntent reports whether err from [ReadIntent] says that there is no intent
// file, that is no pending run. A malformed intent file is not "no intent".
func NoIntent(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// IsLocked reports whether err from [AcquireLock] says that another process
// holds the run lock.
func IsLocked(err error) bool {
	var e *lockedError
	return errors.As(err, &e)
}

// LockHolder returns who holds the run lock, as read from the lock file, when
// err says the lock is held. The bool is false when err is not such an error
// or the holder could not be read.
func LockHolder(err error) (Holder, bool) {
	var e *lockedError
	if !errors.As(err, &e) || !e.known {
		return Holder{}, false
	}
	return e.holder, true
}

type newerSchemaError struct {
	path       string
	have, know uint64
}

func (e *newerSchemaError) Error() string {
	return fmt.Sprintf("journal %s has schema version %d, but this cutover knows only up to %d: it was written by a newer cutover", e.path, e.have, e.know)
}

type lockedError struct {
	path   string
	holder Holder
	known  bool
}

func (e *lockedError) Error() string {
	if !e.known {
		return fmt.Sprintf("another cutover run holds the lock %s (holder unknown)", e.path)
	}
	return fmt.Sprintf("another cutover run holds the lock: pid %d on %s since %s",
		e.holder.PID, e.holder.Host, e.holder.Started.UTC().Format(time.RFC3339))
}
