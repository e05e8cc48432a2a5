package upgrade

import (
	"context"
	"time"

	"github.com/cutover/cutover/journal"
)

// Crash points are cutover's enumeration of the places a run can die: every side effect a run
// has (a command started or finished on a node, a file or link written, a journal record, the
// intent, a backup, a config migration) passes through crashPoint. Tests number them and kill
// cutover at each one in turn (docs/design.md §4, "Crash model").
//
// Environment variables drive it; unset, it costs an atomic add. The release build (tag
// "release") has none of it: testhooks.go is left out, and crashPoint does nothing.
const (
	// CrashAtEnv holds N: cutover SIGKILLs itself at its Nth crash point. A point marked
	// "started" (a command in flight) kills shortly after the command started, while it runs.
	CrashAtEnv = "CUTOVER_CRASH_AT"
	// CrashLogEnv names a file to which cutover appends "N point" for every crash point it
	// passes, one line each (a newline in a point's description is written as \n), so that
	// a test can count them and name the one it killed at.
	CrashLogEnv = "CUTOVER_CRASH_LOG"
	// CrashPowerCutEnv, with CrashAtEnv, names the mount point of a file system that cutover
	// cuts the power of at its crash point, right before it dies: everything not yet on that
	// file system's stable storage is lost, as in a power cut of the master. A kill alone
	// keeps the page cache; this does not.
	CrashPowerCutEnv = "CUTOVER_CRASH_POWERCUT"
	// powerCutOfEnv holds the process id of a cutover stopped at its crash point: its own
	// program, started with it, cuts the power and kills that process (see powerCut).
	powerCutOfEnv = "CUTOVER_CRASH_POWERCUT_OF"
)

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
