package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/cutover/cutover/upgrade"
)

// The text forms of `cutover backup`: the list of archives and what a restore did.

// backupList shows one line per archive.
func (o *textOutput) backupList(list *upgrade.BackupList) error {
	w := o.w
	if len(list.Backups) == 0 {
		fmt.Fprintf(w, "no backups yet in %s\n", list.Dir)
		return nil
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
		fmt.Fprintf(w, "%-48s %-24s %-5s %-20s %-6d %-10s %s\n", b.ID, versions, run, textTime(b.Created), b.Files, backupSize(b.Size), check)
	}
	return nil
}

// backupRestore says what a restore did and what is left to do.
func (o *textOutput) backupRestore(rep *upgrade.RestoreReport) error {
	w, verbose := o.w, o.verbose
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
	fmt.Fprintf(w, "  %s, %s, %s restored\n", count(len(rep.Files), "file"), count(len(rep.Dirs), "directory"), count(len(rep.Symlinks), "symlink"))
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
		names := make([]string, len(rep.Skipped))
		for i, s := range rep.Skipped {
			names[i] = s.String()
		}
		fmt.Fprintf(w, "  not in the archive, so not restored: %s\n", strings.Join(names, ", "))
	}
	if rep.Run != 0 {
		fmt.Fprintf(w, "  journal: run %d\n", rep.Run)
	}
	for _, warn := range rep.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	fmt.Fprintf(w, "only the master was restored: the other nodes keep their config and links; bring them to %s with 'cutover sync NODE...' (or a run), then start the daemons\n", rep.Version)
	return nil
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
