package upgrade

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cutover/cutover/cfgupgrade"
	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/config"
)

// configSpec says where the application's config, as cfg describes it, keeps its version.
func configSpec(cfg *config.Config) cfgupgrade.Spec {
	return cfgupgrade.Spec{File: cfg.Config.File, VersionKey: cfg.Config.VersionKey, Encoding: cfgupgrade.Encoding(cfg.Config.VersionEncoding)}
}

// configVersion reads the version of the application's config, parsed where it enters.
func configVersion(spec cfgupgrade.Spec) (layout.Version, error) {
	v, err := cfgupgrade.ReadVersion(spec)
	if err != nil {
		return layout.Version{}, err
	}
	return layout.ParseVersion(v)
}

// migrations loads the config migrations from the newer version's tree on the master: the
// target's for an upgrade, the live one's for a downgrade.
func (r *Run) migrations() ([]cfgupgrade.Migration, error) {
	newer := r.ToVersion
	if r.Direction == Down {
		newer = r.FromVersion
	}
	_, share := r.Layout.Trees(newer)
	migs, err := cfgupgrade.LoadMigrationsWith(filepath.Join(share, "cutover", "migrations"), config.ReadTrusted)
	if err != nil {
		return nil, fmt.Errorf("config migrations of %s: %w", newer, err)
	}
	return migs, nil
}

// migrateConfig moves the application's config from r.From to r.To on the master, with the
// built-in engine or the configured command, and then, unless the application redistributes
// it itself, copies it to every node. A failure that left the config untouched is still
// before the point of no return.
func migrateConfig(ctx context.Context, r *Run, command string) error {
	spec := configSpec(r.Config)
	var note string // what the stage did, for its line of output
	if v, err := configVersion(spec); err == nil && configAt(r.Config, v, r.ToVersion) {
		// A resumed run finds the config migrated by its earlier execution: the world wins.
		if !r.history.doneBefore(r.stage.name()) {
			r.log.Printf("config: %s is already at %s although the journal does not record the migration as done", spec.File, v)
		}
		note = fmt.Sprintf("already at %s", v)
	} else if r.Config.Config.Migrate == "exec" {
		crashPoint(true, "config: %s started", command)
		rep, err := cfgupgrade.RunExec(ctx, spec, r.expand(command, r.Inventory.Master), r.To)
		crashPoint(false, "config: %s finished", command)
		r.log.Printf("config: %s: %s -> %s", command, rep.From, rep.To)
		if err != nil {
			if cfgupgrade.Unchanged(err) {
				return notCrossed(fmt.Errorf("%s: %w", r.Inventory.Master, err))
			}
			return fmt.Errorf("%s: %w", r.Inventory.Master, err)
		}
		note = fmt.Sprintf("%s -> %s by %s", rep.From, rep.To, command)
	} else {
		migs, err := r.migrations()
		if err != nil {
			return notCrossed(err)
		}
		rep, bak, err := cfgupgrade.Apply(spec, r.From, r.To, migs, cfgupgrade.Options{})
		crashPoint(false, "config: migrated %s", spec.File)
		if err != nil {
			if v, verr := configVersion(spec); verr == nil && v.SameMinor(r.FromVersion) {
				return notCrossed(err)
			}
			return err
		}
		r.log.Printf("config: %s -> %s in %d steps, backup %s\n%s", rep.From, rep.To, len(rep.Steps), bak, rep.Diff)
		note = fmt.Sprintf("%s (%s -> %s)", plural(len(rep.Steps), "step"), r.FromMinor(), r.ToMinor())
	}
	if r.Config.Commands.RedistConf == "" && len(r.Config.Config.Redistribute) > 0 && len(r.Others()) > 0 {
		if err := redistribute(ctx, r); err != nil {
			r.Note("%s", note)
			return err
		}
		note += "; copied to " + plural(len(r.Others()), "node")
	}
	r.Note("%s", note)
	return nil
}

// migrateConfigBack takes the config of a rolling downgrade from r.To back up to r.From once
// its canaries are switched back: with the newer (source) version's up migrations, or its
// upgrade_command, which the source's links name again by then. Then it copies the config to
// the nodes as migrateConfig does. A config already at the source is left as it is.
func migrateConfigBack(ctx context.Context, r *Run) error {
	spec := configSpec(r.Config)
	switch v, err := configVersion(spec); {
	case err == nil && configAt(r.Config, v, r.FromVersion):
		r.log.Printf("config: %s is at %s already", spec.File, v)
	case r.Config.Config.Migrate == "exec":
		command := r.Config.Config.UpgradeCommand
		crashPoint(true, "config: %s started", command)
		rep, err := cfgupgrade.RunExec(ctx, spec, r.expand(command, r.Inventory.Master), r.From)
		crashPoint(false, "config: %s finished", command)
		if err != nil {
			return fmt.Errorf("%s: migrating the config back to %s: %w", r.Inventory.Master, r.From, err)
		}
		r.log.Printf("config: %s: %s -> %s (back)", command, rep.From, rep.To)
	default:
		migs, err := r.migrations()
		if err != nil {
			return err
		}
		rep, bak, err := cfgupgrade.Apply(spec, r.To, r.From, migs, cfgupgrade.Options{})
		crashPoint(false, "config: migrated %s back", spec.File)
		if err != nil {
			return fmt.Errorf("%s: migrating the config back to %s: %w", r.Inventory.Master, r.From, err)
		}
		r.log.Printf("config: %s -> %s in %d steps (back), backup %s\n%s", rep.From, rep.To, len(rep.Steps), bak, rep.Diff)
	}
	if r.Config.Commands.RedistConf == "" && len(r.Config.Config.Redistribute) > 0 && len(r.Others()) > 0 {
		return redistribute(ctx, r)
	}
	return nil
}

// configAt reports whether a config at version v is at version want: the same version, or
// with version_dirs = "minor" in cfg the same minor (such a config names no patch release).
func configAt(cfg *config.Config, v, want layout.Version) bool {
	if cfg.VersionDirs == "minor" {
		return v.SameMinor(want)
	}
	return v.String() == want.String()
}

// plural says a count in words: "1 job", "3 jobs", "2 directories".
func plural(n int, what string) string {
	switch {
	case n == 1:
		return "1 " + what
	case strings.HasSuffix(what, "y"):
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(what, "y"))
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// redistribute copies the [config].redistribute files from the master to every other online
// node, atomically, and reads each copy back to compare checksums.
func redistribute(ctx context.Context, r *Run) error {
	if len(r.Config.Config.Redistribute) == 0 {
		return nil
	}
	var files []file
	for _, p := range r.Config.Config.Redistribute {
		info, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("redistribute: %w", err)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("redistribute: %w", err)
		}
		files = append(files, file{p, data, info.Mode().Perm()})
	}
	// A node a rolling run left behind keeps the config of the version it runs; 'cutover
	// sync' brings it the cluster's with its version.
	var to []nodes.Node
	behind := r.leftBehind()
	for _, n := range r.Others() {
		if !slices.Contains(behind, n.Name) {
			to = append(to, n)
		}
	}
	return r.OnNodes(ctx, to, false, func(ctx context.Context, c Conn, n nodes.Node) error {
		err := copyConfig(c, n.Name, files...)
		r.perNode.setReady(n.Name, "config copy", err == nil)
		return err
	})
}

// copyConfig copies files to node through c, each atomically and read back.
func copyConfig(c Conn, node string, files ...file) error {
	for _, f := range files {
		if err := c.WriteFileAtomic(f.path, f.data, f.mode); err != nil {
			return fmt.Errorf("%s: copy %s: %w", node, f.path, err)
		}
		back, err := c.ReadFile(f.path)
		if err != nil {
			return fmt.Errorf("%s: read back %s: %w", node, f.path, err)
		}
		if sha256.Sum256(back) != sha256.Sum256(f.data) {
			return fmt.Errorf("%s: %s: checksum differs after copy", node, f.path)
		}
	}
	return nil
}

// file is one file redistribute copies: its path, content and mode.
type file struct {
	path string
	data []byte
	mode os.FileMode
}
