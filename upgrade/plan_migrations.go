package upgrade

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/cutover/cutover/cfgupgrade"
)

// MigrationStep is one minor hop of the config migration a run would make, as `cutover plan`
// lists it.
type MigrationStep struct {
	// From and To are MAJOR.MINOR.
	From, To string
	// File is the migration file whose ops the step applies; "" when no file describes the
	// hop, so the config does not change between From and To.
	File string
	// Ops are the step's ops, each in a line: "set /queue/workers", "move /a to /b".
	Ops []string
}

// What cutover reads in a version's share tree: the directory cutover/ holds the migrations
// directory of *.json files and upgrade-policy.json.
const (
	treeCutoverDir   = "cutover"
	treeMigrations   = "migrations"
	treePolicyFile   = "upgrade-policy.json"
	migrationFileExt = ".json"
)

// planMigrations lists the config migration steps of r minor by minor, and checks what the
// newer version's trees hold where cutover looks for migrations and policy: an entry there
// that cutover does not read is a warning, as it is most likely a misnamed file or
// directory whose migrations would silently not run. A migration file that cannot be loaded
// is refused by the app-config check; then no steps are listed.
func planMigrations(r *Run) ([]MigrationStep, []checkResult) {
	if r.Direction == Same {
		return nil, nil
	}
	newer := r.ToVersion
	if r.Direction == Down {
		newer = r.FromVersion
	}
	lib, share := r.Layout.Trees(newer)
	var out []checkResult
	for _, w := range unreadTreeEntries(lib, share) {
		out = append(out, checkResult{name: "migrations", node: r.Inventory.Master, warn: w})
	}
	if r.Config.Config.Migrate == "exec" {
		command := r.Config.Config.UpgradeCommand
		if r.Direction == Down {
			command = r.Config.Config.DowngradeCommand
		}
		out = append(out, checkResult{name: "migrations", node: r.Inventory.Master,
			note: fmt.Sprintf("config.migrate = \"exec\": %q migrates the config", command)})
		return nil, out
	}
	migs, err := r.migrations()
	if err != nil {
		return nil, out
	}
	plan, err := cfgupgrade.Plan(migs, r.From, r.To)
	if err != nil {
		return nil, out
	}
	steps := migrationSteps(plan)
	dir := filepath.Join(share, treeCutoverDir, treeMigrations)
	files := 0
	for _, s := range steps {
		if s.File != "" {
			files++
		}
	}
	note := fmt.Sprintf("%s from %s", plural(len(steps), "step"), dir)
	if n := len(steps) - files; n > 0 {
		note += fmt.Sprintf(", %d without a file (the config does not change there)", n)
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		note = fmt.Sprintf("%s has no migration files (%s does not exist): only the config's version is set", newer, dir)
	}
	out = append(out, checkResult{name: "migrations", node: r.Inventory.Master, note: note})
	return steps, out
}

// migrationSteps turns a migration plan into one step per minor hop: a plan's identity step
// that spans several minors of one major becomes one step for each.
func migrationSteps(plan []cfgupgrade.Step) []MigrationStep {
	var out []MigrationStep
	for _, s := range plan {
		if !s.Identity {
			ms := MigrationStep{From: s.From, To: s.To, File: s.File}
			for _, op := range s.Ops {
				ms.Ops = append(ms.Ops, op.String())
			}
			out = append(out, ms)
			continue
		}
		major, from, err1 := splitMinor(s.From)
		toMajor, to, err2 := splitMinor(s.To)
		if err1 != nil || err2 != nil || major != toMajor {
			out = append(out, MigrationStep{From: s.From, To: s.To})
			continue
		}
		for m := from; m != to; {
			next := m + 1
			if to < from {
				next = m - 1
			}
			out = append(out, MigrationStep{From: fmt.Sprintf("%s.%d", major, m), To: fmt.Sprintf("%s.%d", major, next)})
			m = next
		}
	}
	return out
}

// splitMinor splits MAJOR.MINOR into the major as written and the minor as a number.
func splitMinor(v string) (string, int, error) {
	major, minor, ok := strings.Cut(v, ".")
	if !ok {
		return "", 0, fmt.Errorf("%q is not MAJOR.MINOR", v)
	}
	n, err := strconv.Atoi(minor)
	return major, n, err
}

// unreadTreeEntries lists, as warnings, what a version's trees hold where cutover looks for
// its files but that cutover does not read: entries of the share tree's cutover/ other than
// migrations/ and upgrade-policy.json, entries of cutover/migrations/ other than *.json
// files, a migrations/ directory at the share tree's top, and a cutover/ directory in the
// lib tree.
func unreadTreeEntries(lib, share string) []string {
	var out []string
	cut := filepath.Join(share, treeCutoverDir)
	want := fmt.Sprintf("cutover reads %s/*%s and %s there", treeMigrations, migrationFileExt, treePolicyFile)
	for _, e := range readDirSorted(cut) {
		name := e.Name()
		switch {
		case name == treeMigrations && e.IsDir():
		case name == treePolicyFile && !e.IsDir():
		default:
			out = append(out, fmt.Sprintf("%s is not read: %s", filepath.Join(cut, name), want))
		}
	}
	mig := filepath.Join(cut, treeMigrations)
	for _, e := range readDirSorted(mig) {
		if !e.IsDir() && strings.HasSuffix(e.Name(), migrationFileExt) {
			continue
		}
		out = append(out, fmt.Sprintf("%s is not read: migrations are the *%s files of %s", filepath.Join(mig, e.Name()), migrationFileExt, mig))
	}
	if fi, err := os.Stat(filepath.Join(share, treeMigrations)); err == nil && fi.IsDir() {
		out = append(out, fmt.Sprintf("%s is not read: migrations belong in %s", filepath.Join(share, treeMigrations), mig))
	}
	if fi, err := os.Stat(filepath.Join(lib, treeCutoverDir)); err == nil && fi.IsDir() {
		out = append(out, fmt.Sprintf("%s is not read: migrations and %s belong in the share tree, %s", filepath.Join(lib, treeCutoverDir), treePolicyFile, cut))
	}
	return out
}

// readDirSorted lists dir in name order; a directory that cannot be read lists nothing.
func readDirSorted(dir string) []os.DirEntry {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	return entries
}
