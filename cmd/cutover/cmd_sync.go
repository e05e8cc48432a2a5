package main

import "github.com/urfave/cli/v2"

// syncCommand is being written; until then the command refuses to run.
func syncCommand() *cli.Command {
	return &cli.Command{
		Name:   "sync",
		Usage:  "(not yet available)",
		Hidden: true,
		Action: func(*cli.Context) error { return usagef("sync is not available in this build") },
	}
}
