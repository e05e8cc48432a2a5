package main

import (
	"io"

	"github.com/urfave/cli/v2"

	"github.com/cutover/cutover/upgrade"
	"github.com/cutover/cutover/upgrade/config"
)

const exitCodesHelp = `EXIT CODES:
   0  done
   1  failed and rolled back, or a check refused the run: the cluster is as before
   2  usage or bad input: nothing was touched
   3  a run is left pending (failed past the point of no return, an undo failed, or it
      cannot go on now): the message names the nodes and what to run next
   4  another cutover run holds the lock
   5  this host is not the cluster's master`

// newApp builds the whole command line; the tests and the docs generator use the same tree.
func newApp(stdin io.Reader, stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:      "cutover",
		Usage:     "switch every node of a cluster from one installed version of an application to another",
		Version:   version,
		Reader:    stdin,
		Writer:    stdout,
		ErrWriter: stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Value: config.DefaultConfigPath, EnvVars: []string{"CUTOVER_CONFIG"}, Usage: "the cluster's configuration `FILE`"},
			&cli.StringFlag{Name: "output", Value: "text", EnvVars: []string{"CUTOVER_OUTPUT"}, Usage: "output format: text or json"},
			&cli.BoolFlag{Name: "verbose", EnvVars: []string{"CUTOVER_VERBOSE"}, Usage: "show every node's result"},
		},
		Description:            "cutover runs on the cluster's master and reaches the other nodes over SSH.\n\n" + exitCodesHelp,
		HideVersion:            true,
		ExitErrHandler:         func(*cli.Context, error) {},
		UseShortOptionHandling: false,
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return usagef("%v", err)
		},
		Before: func(c *cli.Context) error {
			if o := c.String("output"); o != "text" && o != "json" {
				return usagef("--output %q: must be text or json", o)
			}
			return nil
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("unknown command %q; see 'cutover --help'", c.Args().First())
			}
			_ = cli.ShowAppHelp(c)
			return usagef("no command given")
		},
		Commands: []*cli.Command{
			upgradeCommand(),
			planCommand(),
			statusCommand(),
			journalCommand(),
			backupCommand(),
			syncCommand(),
			stageCommand(),
			pruneCommand(),
			cfgupgradeCommand(),
			versionCommand(),
		},
	}
	usageErrorsExit2(app.Commands)
	return app
}

// usageErrorsExit2 makes a mistake in any command's flags a usage error (exit 2), as it is
// for the global flags.
func usageErrorsExit2(cmds []*cli.Command) {
	for _, c := range cmds {
		if c.OnUsageError == nil {
			c.OnUsageError = func(_ *cli.Context, err error, _ bool) error { return usagef("%v", err) }
		}
		usageErrorsExit2(c.Subcommands)
	}
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print cutover's version",
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("version takes no arguments, got %q", c.Args().First())
			}
			var out versionOutput = newOutput(c)
			return out.version(version)
		},
	}
}

// loadConfig reads the --config file.
func loadConfig(c *cli.Context) (*config.Config, error) {
	return upgrade.LoadConfig(c.String("config"))
}
