package main

import "github.com/urfave/cli/v2"

// journalCommand is being written; until then the command refuses to run.
func journalCommand() *cli.Command {
	return &cli.Command{
		Name:   "journal",
		Usage:  "(not yet available)",
		Hidden: true,
		Action: func(*cli.Context) error { return usagef("journal is not available in this build") },
	}
}
