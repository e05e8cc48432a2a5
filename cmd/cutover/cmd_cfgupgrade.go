package main

import (
	"github.com/urfave/cli/v2"

	"github.com/cutover/cutover/upgrade"
)

func cfgupgradeCommand() *cli.Command {
	return &cli.Command{
		Name:      "cfgupgrade",
		Usage:     "migrate the master's application config by hand",
		UsageText: "cutover cfgupgrade [--downgrade] [--dry-run] [--to=VERSION]",
		Description: "Migrates the application's config file on this host with the built-in migrations or the configured\n" +
			"command. Without --to, an upgrade goes to the version the links point at, and --downgrade to the\n" +
			"newest installed version of the previous minor. --dry-run prints the change and writes nothing.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "downgrade", Usage: "migrate down to the previous minor version"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print the change; write nothing"},
			&cli.StringFlag{Name: "to", Usage: "the `VERSION` to migrate the config to"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("cfgupgrade takes no arguments, got %q", c.Args().First())
			}
			cfg, err := loadConfig(c)
			if err != nil {
				return err
			}
			rep, err := upgrade.Cfgupgrade(c.Context, cfg, upgrade.CfgupgradeOptions{
				Downgrade: c.Bool("downgrade"), DryRun: c.Bool("dry-run"), To: c.String("to"),
			})
			if err != nil {
				return err
			}
			var out cfgupgradeOutput = newOutput(c)
			return out.cfgupgrade(rep, c.Bool("dry-run"))
		},
	}
}
