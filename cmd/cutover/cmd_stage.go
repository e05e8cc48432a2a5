package main

import (
	"github.com/urfave/cli/v2"

	"github.com/cutover/cutover/upgrade"
)

func stageCommand() *cli.Command {
	return &cli.Command{
		Name:      "stage",
		Usage:     "install a version's trees on every online node ahead of a switch",
		UsageText: "cutover stage --version=VERSION [--replace] [--dry-run] SOURCE",
		Description: "SOURCE is a directory or a .tar.gz holding <libdir>/<app>/<VERSIONDIR> and\n" +
			"<datadir>/<app>/<VERSIONDIR> relative to its root. Every online node receives both trees into a\n" +
			"hidden directory beside their final place, checked against a SHA-256 manifest, and only then\n" +
			"renamed into place: a half-staged version never counts as installed. A node that holds the\n" +
			"version already is left alone; an interrupted stage is finished by running it again, which\n" +
			"sends only what is missing. Refused, before anything is sent: a live version, a different copy\n" +
			"of the version (unless --replace), a node without the disk space, a pending run.\n\n" + exitCodesHelp,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "version", Usage: "the `VERSION` the trees are of", Required: true},
			&cli.BoolFlag{Name: "replace", Usage: "replace a different copy of the version (never a live one)"},
			&cli.BoolFlag{Name: "dry-run", Usage: "run the checks and say what would be sent; change nothing"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("stage needs exactly one SOURCE; see 'cutover stage --help'")
			}
			cfg, err := loadConfig(c)
			if err != nil {
				return err
			}
			var out stageOutput = newOutput(c)
			opts := upgrade.StagingOptions{Version: c.String("version"), Source: c.Args().First(), Replace: c.Bool("replace"), DryRun: c.Bool("dry-run"), Reporter: out}
			res, err := upgrade.StageVersion(c.Context, cfg, opts)
			out.stageDone(res, err, opts.DryRun)
			return err
		},
	}
}

func pruneCommand() *cli.Command {
	return &cli.Command{
		Name:      "prune",
		Usage:     "remove the installed versions no run needs",
		UsageText: "cutover prune [--keep=N] [--version=VERSION ...] [--dry-run] [--yes]",
		Description: "Removes, on every online node, the installed versions that are not live, not the previous\n" +
			"version (the downgrade target), not the source or target of a pending run, and not among the N\n" +
			"newest. A version newer than the live one (one staged for the next upgrade) stays unless named\n" +
			"with --version. Live, previous and pending are the cluster's: the master's links, the journal's\n" +
			"last done run and the pending run, never a lagging node's own links. Each version is moved out\n" +
			"of sight first, so it stops counting as installed at once. On a terminal it shows what it will\n" +
			"remove and asks before removing anything; without one, --yes is required.\n\n" + exitCodesHelp,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "keep", Value: upgrade.DefaultKeep, Usage: "keep the `N` newest installed versions too"},
			&cli.StringSliceFlag{Name: "version", Usage: "remove `VERSION` even if it is newer than the live one or among the N newest (never the live, previous or a pending run's)"},
			&cli.BoolFlag{Name: "dry-run", Usage: "list what would be removed; change nothing"},
			&cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "do not ask for confirmation"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return usagef("prune takes no arguments; see 'cutover prune --help'")
			}
			cfg, err := loadConfig(c)
			if err != nil {
				return err
			}
			dry := c.Bool("dry-run")
			ask := confirmation(c, "prune", dry)
			var out pruneOutput = newOutput(c)
			res, err := upgrade.Prune(c.Context, cfg, upgrade.PruneOptions{Keep: c.Int("keep"), Versions: c.StringSlice("version"), DryRun: dry, Confirm: ask, Reporter: out})
			out.pruneDone(res, err, dry)
			return err
		},
	}
}
