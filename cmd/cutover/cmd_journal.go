package main

import (
	"github.com/urfave/cli/v2"

	"github.com/cutover/cutover/upgrade"
)

func journalCommand() *cli.Command {
	return &cli.Command{
		Name:         "journal",
		OnUsageError: journalUsageError,
		Usage:        "show past runs, or one run's stages, durations and per-node results",
		UsageText:    "cutover journal [RUN]",
		Description: "Without RUN, lists every run in the journal, oldest first: its id, kind, versions, direction,\n" +
			"start, duration, outcome and the nodes it skipped as offline. With RUN, shows that run's stage\n" +
			"transitions in order, each with its state, duration and every node's result (exit code, error,\n" +
			"the tail of its stderr), and the facts the run learned. It only reads: it works during a run.\n" +
			"A run id that is malformed or not in the journal is refused with exit code 2.",
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return usagef("journal takes at most one run id, got %d arguments", c.NArg())
			}
			cfg, err := loadConfig(c)
			if err != nil {
				return err
			}
			rep, err := upgrade.ReadJournal(c.Context, cfg, upgrade.JournalOptions{Run: c.Args().First()})
			if err != nil {
				return err
			}
			var out journalOutput = newOutput(c)
			return out.journal(rep)
		},
	}
}

// journalUsageError makes a flag the command does not know, such as "-1", a usage error.
func journalUsageError(_ *cli.Context, err error, _ bool) error {
	return usagef("%v", err)
}
