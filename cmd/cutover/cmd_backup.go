package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

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
					"every file's sha256 against the manifest. It only reads: it works during a run.",
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
					if c.String("output") == "json" {
						return writeBackupJSON(c.App.Writer, backupListDocument{"cutover/v1", "BackupList", list})
					}
					printBackupList(c.App.Writer, list)
					return nil
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
					"Every file is checked against the archive's manifest before anything is written; the current state\n" +
					"is archived aside first (<app>-<version>-before-restore-<time>, restorable the same way); then each\n" +
					"file, directory and symlink is written to a temporary name and renamed into place. Only the master\n" +
					"is restored: bring the other nodes' config and links to the restored version with 'cutover sync' or\n" +
					"a run, then start the daemons.\n\n" + exitCodesHelp,
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
					if c.String("output") == "json" {
						return writeBackupJSON(c.App.Writer, backupRestoreDocument{"cutover/v1", "BackupRestore", rep})
					}
					printRestore(c.App.Writer, rep, c.Bool("verbose"))
					return nil
				},
			},
		},
	}
}

// backupListDocument and backupRestoreDocument are the JSON forms of `cutover backup`.
type backupListDocument struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	*upgrade.BackupList
}

type backupRestoreDocument struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	*upgrade.RestoreReport
}

// writeBackupJSON prints doc as one indented JSON document.
func writeBackupJSON(w io.Writer, doc any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(doc)
}

// printBackupList shows one line per archive.
func printBackupList(w io.Writer, list *upgrade.BackupList) {
	if len(list.Backups) == 0 {
		fmt.Fprintf(w, "no backups yet in %s\n", list.Dir)
		return
	}
	fmt.Fprintf(w, "backups in %s:\n", list.Dir)
	fmt.Fprintf(w, "%-48s %-24s %-5s %-20s %-6s %-10s %s\n", "ID", "FROM -> TO", "RUN", "CREATED", "FILES", "SIZE", "CHECK")
	for _, b := range list.Backups {
		versions := b.From + " -> " + b.To
		if b.Kind == upgrade.BackupBeforeRestore {
			versions = "before restore at " + b.From
		}
		if b.From == "" {
			versions = "-"
		}
		run := "-"
		if b.Run != 0 {
			run = fmt.Sprint(b.Run)
		}
		check := "manifest ok"
		switch {
		case b.Problem != "":
			check = "BAD: " + b.Problem
		case b.Verified:
			check = "verified"
		}
		fmt.Fprintf(w, "%-48s %-24s %-5s %-20s %-6d %-10s %s\n", b.ID, versions, run, journalTime(b.Created), b.Files, backupSize(b.Size), check)
	}
}

// printRestore says what a restore did and what is left to do.
func printRestore(w io.Writer, rep *upgrade.RestoreReport, verbose bool) {
	fmt.Fprintf(w, "restored %s on the master: it is at %s again (was %s)\n", rep.ID, rep.Version, rep.Previous)
	fmt.Fprintf(w, "  the state before the restore is kept in %s\n", rep.Kept)
	links := make([]string, 0, len(rep.Links))
	for l := range rep.Links {
		links = append(links, l)
	}
	sort.Strings(links)
	for _, l := range links {
		fmt.Fprintf(w, "  link %s -> %s\n", l, rep.Links[l])
	}
	fmt.Fprintf(w, "  %s, %s, %s restored\n", backupCount(len(rep.Files), "file", "files"), backupCount(len(rep.Dirs), "directory", "directories"), backupCount(len(rep.Symlinks), "symlink", "symlinks"))
	if verbose {
		for _, group := range []struct {
			what  string
			paths []string
		}{{"file", rep.Files}, {"directory", rep.Dirs}, {"symlink", rep.Symlinks}} {
			for _, p := range group.paths {
				fmt.Fprintf(w, "    %-9s %s\n", group.what, p)
			}
		}
	}
	if len(rep.Skipped) > 0 {
		fmt.Fprintf(w, "  not restored (devices, fifos): %s\n", strings.Join(rep.Skipped, ", "))
	}
	if rep.Run != 0 {
		fmt.Fprintf(w, "  journal: run %d\n", rep.Run)
	}
	for _, warn := range rep.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	fmt.Fprintf(w, "only the master was restored: the other nodes keep their config and links; bring them to %s with 'cutover sync NODE...' (or a run), then start the daemons\n", rep.Version)
}

// backupCount is n with the word for one or many.
func backupCount(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// backupSize formats a size in bytes for people.
func backupSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
