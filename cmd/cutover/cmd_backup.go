package main

import (
	"github.com/urfave/cli/v2"

	"github.com/cutover/cutover/upgrade"
)

func backupCommand() *cli.Command {
	return &cli.Command{
		Name:         "backup",
		OnUsageError: journalUsageError,
		Usage:        "list the archives taken before each switch, or restore one on the master",
		UsageText:    "cutover backup list [--verify]\n   cutover backup restore ID",
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("unknown backup command %q: want list or restore", c.Args().First())
			}
			return usagef("backup needs a command: list or restore")
		},
		Subcommands: []*cli.Command{
			{
				Name:         "list",
				OnUsageError: journalUsageError,
				Usage:        "list the application's backup archives, oldest first",
				UsageText:    "cutover backup list [--verify]",
				Description: "Lists the archives in state_dir/backups: id, versions, run, creation time, file count, size, and\n" +
					"whether the archive's manifest checks out. --verify also reads every archive through and checks\n" +
					"every entry and every file's sha256 against the manifest. It only reads: it works during a run.",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "verify", Usage: "check every file's checksum, not only the manifest"},
				},
				Action: func(c *cli.Context) error {
					if c.NArg() > 0 {
						return usagef("backup list takes no arguments, got %q", c.Args().First())
					}
					cfg, err := loadConfig(c)
					if err != nil {
						return err
					}
					list, err := upgrade.ListBackups(c.Context, cfg, upgrade.BackupListOptions{Verify: c.Bool("verify")})
					if err != nil {
						return err
					}
					var out backupOutput = newOutput(c)
					return out.backupList(list)
				},
			},
			{
				Name:         "restore",
				OnUsageError: journalUsageError,
				Usage:        "put the master's application state, /etc/<app> and the links back as an archive holds them",
				UsageText:    "cutover backup restore ID",
				Description: "Restores archive ID (as 'cutover backup list' shows it) on the master, this host. It refuses while\n" +
					"a run is pending or holds the lock, and while the daemons run: when the configured verify command\n" +
					"exits 0 on the master the cluster is up, so stop the daemons first (daemons_stop on every node).\n" +
					"The check reads the archive through and checks every entry against its manifest (path, type,\n" +
					"owner, mode, size, sha256, link target) and against the disk before anything is written; a refused\n" +
					"restore leaves no trace. Then the current state is archived aside (<app>-<version>-before-restore-\n" +
					"<time>, restorable the same way), and the restore writes exactly what it checked, through directory\n" +
					"descriptors, never through a link: each file and symlink to a temporary name, renamed into place\n" +
					"once the whole archive checked out again. Only the master is restored: bring the other nodes' config\n" +
					"and links to the restored version with 'cutover sync' or a run, then start the daemons.\n\n" + exitCodesHelp,
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return usagef("backup restore needs exactly one archive ID, as 'cutover backup list' shows it")
					}
					cfg, err := loadConfig(c)
					if err != nil {
						return err
					}
					rep, err := upgrade.RestoreBackup(c.Context, cfg, upgrade.RestoreOptions{ID: c.Args().First()})
					if err != nil {
						return err
					}
					var out backupOutput = newOutput(c)
					return out.backupRestore(rep)
				},
			},
		},
	}
}
