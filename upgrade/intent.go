package upgrade

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/cutover/cutover/journal"
)

// intent writes the intent file: from here on, a crash or a reboot leaves a record that
// `cutover upgrade --resume` continues from.
type intent struct{}

func (intent) Name() string { return "intent" }

// FirstWrite marks intent as the first stage that changes anything.
func (intent) FirstWrite() {}

func (intent) Run(ctx context.Context, r *Run) error {
	host, _ := os.Hostname()
	return journal.WriteIntent(r.intentPath(), journal.Intent{
		RunID: r.ID, From: r.From, To: r.To, Direction: string(r.Direction),
		Host: host, PID: os.Getpid(), Created: time.Now().UTC(),
	})
}

// Undo removes the intent, unless an undo step failed: the cluster is then not as before,
// and the intent keeps the run visible for `cutover upgrade --abort`.
func (intent) Undo(ctx context.Context, r *Run) error {
	if r.UndoFailed() {
		r.Warn("an undo step failed: the intent is kept")
		return nil
	}
	return journal.RemoveIntent(r.intentPath())
}

func (r *Run) intentPath() string { return IntentPath(r.Config) }

// IntentPath is where the intent file of a cluster lives.
func IntentPath(c *Config) string { return filepath.Join(c.Paths.StateDir, "intent.json") }
