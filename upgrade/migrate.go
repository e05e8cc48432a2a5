package upgrade

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cutover/cutover/cfgupgrade"
	"github.com/cutover/cutover/nodes"
)

// configSpec says where the application's config keeps its version.
func (r *Run) configSpec() cfgupgrade.Spec {
	return cfgupgrade.Spec{File: r.Config.Config.File, VersionKey: r.Config.Config.VersionKey, Encoding: cfgupgrade.Encoding(r.Config.Config.VersionEncoding)}
}

// migrations loads the config migrations from the newer version's tree on the master: the
// target's for an upgrade, the live one's for a downgrade.
func (r *Run) migrations() ([]cfgupgrade.Migration, error) {
	newer := r.To
	if r.Direction == Down {
		newer = r.From
	}
	_, share, err := r.Layout.Trees(newer)
	if err != nil {
		return nil, err
	}
	migs, err := cfgupgrade.LoadMigrations(filepath.Join(share, "cutover", "migrations"))
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
	spec := r.configSpec()
	if v, err := cfgupgrade.ReadVersion(spec); err == nil && v == r.To {
		// A resumed run finds the config migrated by its earlier execution: the world wins.
		if !r.doneBefore(r.currentStage()) {
			r.log.Printf("config: %s is already at %s although the journal does not record the migration as done", spec.File, v)
		}
		r.Note("already at %s", v)
	} else if r.Config.Config.Migrate == "exec" {
		rep, err := cfgupgrade.RunExec(ctx, spec, r.expand(command, r.Inventory.Master), r.To)
		r.log.Printf("config: %s: %s -> %s", command, rep.From, rep.To)
		if err != nil {
			if cfgupgrade.Unchanged(err) {
				return notCrossed(fmt.Errorf("%s: %w", r.Inventory.Master, err))
			}
			return fmt.Errorf("%s: %w", r.Inventory.Master, err)
		}
		r.Note("%s -> %s by %s", rep.From, rep.To, command)
	} else {
		migs, err := r.migrations()
		if err != nil {
			return notCrossed(err)
		}
		rep, bak, err := cfgupgrade.Apply(spec, r.From, r.To, migs, cfgupgrade.Options{})
		if err != nil {
			if v, verr := cfgupgrade.ReadVersion(spec); verr == nil && minorOf(v) == minorOf(r.From) {
				return notCrossed(err)
			}
			return err
		}
		r.log.Printf("config: %s -> %s in %d steps, backup %s\n%s", rep.From, rep.To, len(rep.Steps), bak, rep.Diff)
		r.Note("%s (%s -> %s)", plural(len(rep.Steps), "step"), minorOf(r.From), minorOf(r.To))
	}
	if r.Config.Commands.RedistConf == "" {
		return redistribute(ctx, r)
	}
	return nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// redistribute copies the [config].redistribute files from the master to every other online
// node, atomically, and reads each copy back to compare checksums.
func redistribute(ctx context.Context, r *Run) error {
	type file struct {
		path string
		data []byte
		mode os.FileMode
	}
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
	return r.OnNodes(ctx, r.Others(), false, func(ctx context.Context, c Conn, n nodes.Node) error {
		for _, f := range files {
			if err := c.WriteFileAtomic(f.path, f.data, f.mode); err != nil {
				return fmt.Errorf("%s: copy %s: %w", n.Name, f.path, err)
			}
			back, err := c.ReadFile(f.path)
			if err != nil {
				return fmt.Errorf("%s: read back %s: %w", n.Name, f.path, err)
			}
			if sha256.Sum256(back) != sha256.Sum256(f.data) {
				return fmt.Errorf("%s: %s: checksum differs after copy", n.Name, f.path)
			}
		}
		return nil
	})
}
