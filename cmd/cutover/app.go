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
   5  this host is not the cluster's master
   6  the run failed past the point of no return and [policy] on_failure = "rollback" took
      the cluster back to the version it ran before: it runs that version now`

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
			&cli.StringFlag{Name: "output", Value: "text", EnvVars: []string{"CUTOVER_OUTPUT"}, Usage: "output format: text or json (status also prints prometheus: its metrics in Prometheus's text format)"},
			&cli.BoolFlag{Name: "verbose", EnvVars: []string{"CUTOVER_VERBOSE"}, Usage: "show every node's result"},
		},
		Description: "cutover runs on the cluster's master and reaches the other nodes over SSH.\n\n" +
			"FILES:\n" +
			"   /etc/cutover/cutover.toml                   the configuration (configuration.md)\n" +
			"   /usr/share/APP/VERSION/cutover/             what a version's tree tells cutover: migrations/*.json,\n" +
			"                                               the config migrations (migrations.md), and\n" +
			"                                               upgrade-policy.json\n" +
			"   /var/lib/cutover/                           the journal, intent, lock, logs and backups\n" +
			"   /var/log/cutover-resume.log                 the output of the resume at boot by cron, each line\n" +
			"                                               behind its time\n" +
			"   The documents named are in /usr/share/doc/cutover, with guide.md, the operator's guide.\n\n" +
			exitCodesHelp,
		HideVersion:            true,
		ExitErrHandler:         func(*cli.Context, error) {},
		UseShortOptionHandling: false,
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return usagef("%v", err)
		},
		Before: func(c *cli.Context) error {
			if o := c.String("output"); o != "text" && o != "json" && o != "prometheus" {
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
	acceptGlobalFlags(app.Commands)
	return app
}

// acceptGlobalFlags gives every command hidden copies of the global flags, without defaults
// of their own, so that operators may type them after the command too (`cutover status
// --output json`): a value given after the command wins over one given before it, and
// globalString and globalBool fall back to the app's flag (its environment variable, its
// default).
func acceptGlobalFlags(cmds []*cli.Command) {
	for _, c := range cmds {
		c.Flags = append(c.Flags,
			&cli.StringFlag{Name: "config", Hidden: true},
			&cli.StringFlag{Name: "output", Hidden: true},
			&cli.BoolFlag{Name: "verbose", Hidden: true},
		)
		before := c.Before
		c.Before = func(ctx *cli.Context) error {
			switch o := globalString(ctx, "output"); {
			case o == "prometheus" && ctx.Command.Name != "status":
				return usagef("--output prometheus: only 'cutover status' prints metrics; use text or json")
			case o != "text" && o != "json" && o != "prometheus":
				return usagef("--output %q: must be text or json", o)
			}
			if before != nil {
				return before(ctx)
			}
			return nil
		}
		acceptGlobalFlags(c.Subcommands)
	}
}

// globalString is the value of a global flag: where it was given last on the command line,
// after the command or before it (or in its environment variable), or else its default.
func globalString(c *cli.Context, name string) string {
	for _, cc := range c.Lineage() {
		if cc.IsSet(name) {
			return cc.String(name)
		}
	}
	for _, f := range c.App.Flags {
		if sf, ok := f.(*cli.StringFlag); ok && sf.Name == name {
			return sf.Value
		}
	}
	return ""
}

// globalBool is globalString for a boolean flag.
func globalBool(c *cli.Context, name string) bool {
	for _, cc := range c.Lineage() {
		if cc.IsSet(name) {
			return cc.Bool(name)
		}
	}
	return false
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
	return upgrade.LoadConfig(globalString(c, "config"))
}
