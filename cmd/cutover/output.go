package main

import (
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cutover/cutover/upgrade"
)

// Output is chosen once, from --output: a textOutput for people or a jsonOutput for programs.
// Each command sees only its own interface below; both printers implement all of them, and a
// new command adds its interface here and its method to both printers. A run's events and its
// end are shown as well as the output allows: the run's outcome, not a failed write to stdout,
// decides the exit code. A document's write error is the command's error.
type output interface {
	upgradeOutput
	syncOutput
	stageOutput
	pruneOutput
	planOutput
	statusOutput
	journalOutput
	backupOutput
	cfgupgradeOutput
	versionOutput
}

// upgradeOutput shows a run's events as they come, then its end.
type upgradeOutput interface {
	upgrade.Reporter
	upgradeDone(res *upgrade.Result, err error, dryRun bool)
	abortDone(res *upgrade.Result, err error)
}

// syncOutput shows a sync's events, then its end.
type syncOutput interface {
	upgrade.Reporter
	syncDone(res *upgrade.SyncResult, err error, dryRun bool)
}

// stageOutput shows the staging of a version, then its end.
type stageOutput interface {
	upgrade.Reporter
	stageDone(res *upgrade.StagingResult, err error, dryRun bool)
}

// pruneOutput shows a prune, then its end.
type pruneOutput interface {
	upgrade.Reporter
	pruneDone(res *upgrade.PruneResult, err error, dryRun bool)
}

// planOutput shows a plan.
type planOutput interface {
	plan(p *upgrade.PlanReport) error
}

// statusOutput shows the cluster's state.
type statusOutput interface {
	status(st *upgrade.StatusReport) error
}

// journalOutput shows the runs of the journal, or one run.
type journalOutput interface {
	journal(rep *upgrade.JournalReport) error
}

// backupOutput shows the backup archives, or what a restore did.
type backupOutput interface {
	backupList(list *upgrade.BackupList) error
	backupRestore(rep *upgrade.RestoreReport) error
}

// cfgupgradeOutput shows what a migration of the master's config did, or would do.
type cfgupgradeOutput interface {
	cfgupgrade(rep *upgrade.CfgupgradeReport, dryRun bool) error
}

// versionOutput shows cutover's version.
type versionOutput interface {
	version(v string) error
}

// newOutput returns the printer --output asks for; the app's Before has checked the flag.
func newOutput(c *cli.Context) output {
	if globalString(c, "output") == "json" {
		return &jsonOutput{w: c.App.Writer, now: time.Now}
	}
	return &textOutput{w: c.App.Writer, verbose: globalBool(c, "verbose")}
}
