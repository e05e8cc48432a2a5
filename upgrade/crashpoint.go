package upgrade

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/cutover/cutover/journal"
)

// Crash points are cutover's enumeration of the places a run can die: every side effect a run
// has (a command started or finished on a node, a file or link written, a journal record, the
// intent, a backup, a config migration) passes through crashPoint. Tests number them and kill
// cutover at each one in turn (DESIGN §4, "Crash model").
//
// Two environment variables drive it; unset, as in production, it costs an atomic add.
const (
	// CrashAtEnv holds N: cutover SIGKILLs itself at its Nth crash point. A point marked
	// "started" (a command in flight) kills shortly after the command started, while it runs.
	CrashAtEnv = "CUTOVER_CRASH_AT"
	// CrashLogEnv names a file to which cutover appends "N point" for every crash point it
	// passes, so that a test can count them and name the one it killed at.
	CrashLogEnv = "CUTOVER_CRASH_LOG"
)

var crash struct {
	once sync.Once
	at   int
	log  *os.File
	mu   sync.Mutex
	n    int
}

// inFlightDelay is how long after a command started a crash point of that command kills.
const inFlightDelay = 30 * time.Millisecond

// crashPoint counts one crash point and, when it is the one CrashAtEnv names, kills the
// process: at once, or while the command runs when inFlight is set.
func crashPoint(inFlight bool, format string, args ...any) {
	crash.once.Do(func() {
		crash.at, _ = strconv.Atoi(os.Getenv(CrashAtEnv))
		if p := os.Getenv(CrashLogEnv); p != "" {
			crash.log, _ = os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		}
	})
	if crash.at == 0 && crash.log == nil {
		return
	}
	crash.mu.Lock()
	crash.n++
	n := crash.n
	if crash.log != nil {
		fmt.Fprintf(crash.log, "%d %s\n", n, fmt.Sprintf(format, args...))
	}
	crash.mu.Unlock()
	if n != crash.at {
		return
	}
	if inFlight {
		go func() {
			time.Sleep(inFlightDelay)
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}()
		return
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}

// crashJournal makes every durable record of a Journal a crash point, right after it is
// written.
type crashJournal struct{ Journal }

func (j crashJournal) CreateRun(ctx context.Context, r journal.Run) (journal.Run, error) {
	out, err := j.Journal.CreateRun(ctx, r)
	crashPoint(false, "journal: create run %d", out.ID)
	return out, err
}

func (j crashJournal) Record(ctx context.Context, runID uint64, ev journal.Event) (journal.Event, error) {
	out, err := j.Journal.Record(ctx, runID, ev)
	crashPoint(false, "journal: %s %s", ev.Stage, ev.State)
	return out, err
}

func (j crashJournal) SetFacts(ctx context.Context, runID uint64, facts map[string]string) (map[string]string, error) {
	out, err := j.Journal.SetFacts(ctx, runID, facts)
	crashPoint(false, "journal: facts %v", facts)
	return out, err
}

func (j crashJournal) SetOffline(ctx context.Context, runID uint64, nodes []string) error {
	err := j.Journal.SetOffline(ctx, runID, nodes)
	crashPoint(false, "journal: offline %v", nodes)
	return err
}

func (j crashJournal) Finish(ctx context.Context, runID uint64, outcome journal.Outcome, at time.Time) error {
	err := j.Journal.Finish(ctx, runID, outcome, at)
	crashPoint(false, "journal: finish %s", outcome)
	return err
}

func (j crashJournal) SetTravel(ctx context.Context, runID uint64, t journal.Travel) error {
	err := j.Journal.SetTravel(ctx, runID, t)
	crashPoint(false, "journal: travel %s", t)
	return err
}

func (j crashJournal) SetPastPONR(ctx context.Context, runID uint64, past bool) error {
	err := j.Journal.SetPastPONR(ctx, runID, past)
	crashPoint(false, "journal: past the point of no return: %v", past)
	return err
}
