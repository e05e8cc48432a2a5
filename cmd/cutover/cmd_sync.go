package main

import (
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cutover/cutover/upgrade"
)

func syncCommand() *cli.Command {
	return &cli.Command{
		Name:      "sync",
		Usage:     "bring nodes that missed a run (offline, replaced) to the cluster's live version",
		UsageText: "cutover sync [--dry-run] [--yes] [--watch=DURATION] NODE...",
		Description: "Brings each NODE to the version the master runs: stops its daemons, switches its links, runs\n" +
			"ensure-dirs, copies the application's config from the master (or runs redist_conf), starts its\n" +
			"daemons, then runs verify on the master. The master and the other nodes are not touched.\n" +
			"Every NODE must be in the node list and not the master; a node marked offline may be named:\n" +
			"clear its offline flag afterwards so that runs include it again. The switch is the point of no\n" +
			"return: a failure before it starts the daemons again, a failure after it exits 3; then fix the\n" +
			"cause and run the same sync again. With a watch ([policy] watch or --watch) the sync then watches\n" +
			"the nodes for the window: a failed watch rolls nothing back and exits 3, as does Ctrl-C, which ends\n" +
			"the watch early; running the same sync again syncs the nodes again and watches a new window.\n" +
			"Refused while a run is pending. On a terminal it shows what it will do and asks before changing\n" +
			"anything; without one, --yes is required.\n\n" + exitCodesHelp,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "dry-run", Usage: "run the checks and show what would be done; change nothing"},
			&cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "do not ask for confirmation"},
			&cli.StringFlag{Name: "watch", Usage: "watch the synced nodes for `DURATION` after the sync's verify (the verify and the wrong-version check every [policy] watch_interval); 0 turns the watch off; default [policy] watch"},
		},
		Action: func(c *cli.Context) error {
			names := c.Args().Slice()
			if len(names) == 0 {
				return usagef("sync needs at least one NODE; see 'cutover sync --help'")
			}
			for _, n := range names {
				if strings.HasPrefix(n, "-") {
					return usagef("sync: %q after a node name: flags go before the node names", n)
				}
			}
			var watch *time.Duration
			if c.IsSet("watch") {
				d, err := time.ParseDuration(c.String("watch"))
				if err != nil || d < 0 {
					return usagef("--watch=%q: not a duration such as \"15m\" or \"0\" (no watch)", c.String("watch"))
				}
				watch = &d
			}
			cfg, err := loadConfig(c)
			if err != nil {
				return err
			}
			dryRun := c.Bool("dry-run")
			ask := confirmation(c, "sync", dryRun)
			var out syncOutput = newOutput(c)
			res, err := upgrade.Sync(c.Context, cfg, names, upgrade.SyncOptions{DryRun: dryRun, Confirm: ask, Reporter: out, Watch: watch})
			out.syncDone(res, err, dryRun)
			return err
		},
	}
}
