package upgrade

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/config"
)

// intent writes the intent file: from here on, a crash or a reboot leaves a record that
// `cutover upgrade --resume` continues from. The file names the run, its versions, the
// application, the configuration and the state directory, so that a resume with another
// configuration is refused.
type intent struct{}

func (intent) Name() string { return "intent" }

func (intent) Where() Where { return OnMaster }

func (intent) Run(ctx context.Context, r *Run) error {
	err := writeIntent(r)
	crashPoint(false, "intent written")
	if err == nil {
		prepareNodes(ctx, r)
	}
	return err
}

// preparer is a connection that can ready itself for the run's commands ahead of them
// (*nodes.Conn: its command shell).
type preparer interface {
	Prepare(ctx context.Context) error
}

// prepareNodes readies every online node's connection for run r's commands, once the
// operator has agreed to the run and before the daemons stop, so that starting each node's
// command shell is not inside the downtime window. What fails here is only logged: the node's
// next command meets the same trouble and reports it where it matters.
func prepareNodes(ctx context.Context, r *Run) {
	nodes.Each(ctx, r.Online, r.Config.SSH.Parallel, "", func(ctx context.Context, n nodes.Node) error {
		c, err := r.dial.Conn(ctx, n.Name)
		if err != nil {
			return nil
		}
		if p, ok := c.(preparer); ok {
			if err := p.Prepare(ctx); err != nil && r.log != nil {
				r.log.Printf("%s: preparing the node's command shell: %v", n.Name, err)
			}
		}
		return nil
	})
}

// writeIntent writes the intent file naming r as the pending run.
func writeIntent(r *Run) error {
	host, _ := os.Hostname()
	return journal.WriteIntent(IntentPath(r.Config), journal.Intent{
		RunID: r.ID, Kind: string(r.Kind), From: r.From, To: r.To, Direction: string(r.Direction),
		Host: host, PID: os.Getpid(), Created: time.Now().UTC(),
		App: r.Config.App, Config: r.Config.File, StateDir: r.Config.Paths.StateDir,
	})
}

// Undo removes the intent. The runner calls it last, after the journal records how the run
// ended, so that a crash in between leaves an intent whose run the journal already calls
// finished: the next resume recognises it and only removes the intent.
func (intent) Undo(ctx context.Context, r *Run) error { return releaseIntent(r) }

// Releases marks the stage whose undo ends the run as pending: the runner records the run's
// outcome before it, and calls it after the last stage of a successful run too.
func (intent) Releases() {}

// releaseIntent removes the run's intent file.
func releaseIntent(r *Run) error {
	err := journal.RemoveIntent(IntentPath(r.Config))
	crashPoint(false, "intent removed")
	return err
}

// IntentPath is where the intent file of a cluster lives.
func IntentPath(c *config.Config) string { return filepath.Join(c.Paths.StateDir, "intent.json") }
