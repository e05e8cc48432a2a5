package main

import "github.com/urfave/cli/v2"

// planCommand is being written; until then the command refuses to run.
func planCommand() *cli.Command {
	return &cli.Command{
		Name:   "plan",
		Usage:  "(not yet available)",
		Hidden: true,
		Action: func(*cli.Context) error { return usagef("plan is not available in this build") },
	}
}
