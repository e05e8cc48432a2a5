package upgrade

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-version"

	"github.com/cutover/cutover/cfgupgrade"
	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/upgrade/config"
)

// CfgupgradeOptions are what the operator asked of `cutover cfgupgrade`.
type CfgupgradeOptions struct {
	Downgrade bool
	DryRun    bool
	To        string
}

// CfgupgradeReport says what `cutover cfgupgrade` did or would do.
type CfgupgradeReport struct {
	File     string
	From, To string
	Diff     string
	Backup   string
}

// Cfgupgrade migrates the master's application config by hand, as Ganeti's cfgupgrade does:
// up to the live version, or with Downgrade to the previous minor, with the newer version's
// migrations. It refuses while a run is pending and holds the run lock while it writes.
func Cfgupgrade(ctx context.Context, cfg *config.Config, opts CfgupgradeOptions) (*CfgupgradeReport, error) {
	if opts.To != "" {
		if err := layout.ValidVersion(opts.To); err != nil {
			return nil, badInput(fmt.Errorf("--to: %w", err))
		}
	}
	if opts.DryRun && cfg.Config.Migrate == "exec" {
		return nil, badInput(fmt.Errorf("--dry-run needs config.migrate = \"builtin\"; the exec command cannot be dry-run by cutover"))
	}
	if err := CheckMaster(cfg, ""); err != nil {
		return nil, err
	}
	lay, err := Layout(cfg)
	if err != nil {
		return nil, badInput(err)
	}
	r := &Run{Config: cfg, Layout: lay, report: discard{}}
	spec := r.configSpec()
	from, err := cfgupgrade.ReadVersion(spec)
	if err != nil {
		return nil, err
	}
	to := opts.To
	if to == "" {
		if to, err = defaultCfgTarget(ctx, lay, from, opts.Downgrade); err != nil {
			return nil, err
		}
	}
	dir, err := direction(from, to)
	if err != nil {
		return nil, badInput(err)
	}
	switch {
	case dir == Down && !opts.Downgrade:
		return nil, badInput(fmt.Errorf("%s -> %s is a downgrade: pass --downgrade", from, to))
	case dir != Down && opts.Downgrade:
		return nil, badInput(fmt.Errorf("%s -> %s is not a downgrade", from, to))
	}
	if errs := CheckPath(from, to, cfg.Policy, nil); len(errs) > 0 {
		return nil, fmt.Errorf("%w", errs[0])
	}
	rep := &CfgupgradeReport{File: spec.File, From: from, To: to}
	if dir == Same {
		rep.To = from
		return rep, nil
	}
	r.From, r.To, r.Direction = from, to, dir

	if !opts.DryRun {
		if err := journal.MkdirAllDurable(cfg.Paths.StateDir, 0o700); err != nil {
			return nil, fmt.Errorf("state directory: %w", err)
		}
		host, _ := os.Hostname()
		lock, err := journal.AcquireLock(LockPath(cfg), journal.Holder{Host: host, PID: os.Getpid(), Started: time.Now().UTC(), Command: strings.Join(os.Args, " ")})
		if err != nil {
			return nil, err
		}
		defer lock.Release()
		if pending, err := journal.ReadIntent(IntentPath(cfg)); err == nil {
			return nil, fmt.Errorf("run %d (%s -> %s) is pending: the config is left alone; finish it with 'cutover upgrade --resume' or 'cutover upgrade --abort'", pending.RunID, pending.From, pending.To)
		} else if !journal.NoIntent(err) {
			return nil, err
		}
	}
	if cfg.Config.Migrate == "exec" {
		command := cfg.Config.UpgradeCommand
		if dir == Down {
			command = cfg.Config.DowngradeCommand
		}
		if _, err := cfgupgrade.RunExec(ctx, spec, r.expand(command, cfg.Cluster.Master), to); err != nil {
			return nil, err
		}
		return rep, nil
	}
	migs, err := r.migrations()
	if err != nil {
		return nil, err
	}
	res, backup, err := cfgupgrade.Apply(spec, from, to, migs, cfgupgrade.Options{DryRun: opts.DryRun})
	if err != nil {
		return nil, err
	}
	rep.Diff, rep.Backup = res.Diff, backup
	return rep, nil
}

// defaultCfgTarget is the version cfgupgrade moves to without --to: the live version for an
// upgrade, the newest installed version of the previous minor for a downgrade.
func defaultCfgTarget(ctx context.Context, lay *layout.Layout, from string, down bool) (string, error) {
	full := func(dir string) string {
		if strings.Count(dir, ".") == 1 {
			return dir + ".0"
		}
		return dir
	}
	if !down {
		live, err := lay.Live(ctx, layout.OSFS{})
		if err != nil {
			return "", err
		}
		return full(live), nil
	}
	fv, err := version.NewVersion(from)
	if err != nil {
		return "", err
	}
	seg := fv.Segments()
	if seg[1] == 0 {
		return "", fmt.Errorf("config version %s has no previous minor version to downgrade to", from)
	}
	want := fmt.Sprintf("%d.%d", seg[0], seg[1]-1)
	installed, err := lay.Installed(ctx, layout.OSFS{})
	if err != nil {
		return "", err
	}
	for i := len(installed) - 1; i >= 0; i-- {
		if minorOf(full(installed[i])) == want {
			return full(installed[i]), nil
		}
	}
	lib, _, err := lay.Trees(from)
	if err != nil {
		return "", err
	}
	return "", fmt.Errorf("no version %s.x is installed under %s; pass --to", want, filepath.Dir(lib))
}
