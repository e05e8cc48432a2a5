package main

import "github.com/urfave/cli/v2"

// statusCommand is being written; until then the command refuses to run.
func statusCommand() *cli.Command {
	return &cli.Command{
		Name:   "status",
		Usage:  "(not yet available)",
		Hidden: true,
		Action: func(*cli.Context) error { return usagef("status is not available in this build") },
	}
}
