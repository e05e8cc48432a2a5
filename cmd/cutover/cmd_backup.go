package main

import "github.com/urfave/cli/v2"

// backupCommand is being written; until then the command refuses to run.
func backupCommand() *cli.Command {
	return &cli.Command{
		Name:   "backup",
		Usage:  "(not yet available)",
		Hidden: true,
		Action: func(*cli.Context) error { return usagef("backup is not available in this build") },
	}
}
