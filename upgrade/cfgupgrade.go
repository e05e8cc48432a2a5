package upgrade

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/cutover/cutover/cfgupgrade"
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
	var toV layout.Version
	if opts.To != "" {
		v, err := layout.ParseVersion(opts.To)
		if err != nil {
			return nil, badInput(fmt.Errorf("--to: %w", err))
		}
		toV = v
	}
	if opts.DryRun && cfg.Config.Migrate == "exec" {
		return nil, badInput(fmt.Errorf("--dry-run needs config.migrate = \"builtin\"; the exec command cannot be dry-run by cutover"))
	}
	// The session is every command's opener: the master check, then, unless only looking,
	// the run lock and the pending run read under it.
	m := modeExclusive
	if opts.DryRun {
		m = modeLook
	}
	s, err := openSession(ctx, cfg, m, sessionOptions{HostCheck: true})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if err := s.refusePending("migrating the config by hand; the config is left alone"); err != nil {
		return nil, err
	}
	r, lay := s.r, s.r.Layout
	spec := configSpec(r.Config)
	fromV, err := configVersion(spec)
	if err != nil {
		return nil, err
	}
	if toV.IsZero() {
		if toV, err = defaultCfgTarget(ctx, lay, fromV, opts.Downgrade); err != nil {
			return nil, err
		}
	}
	from, to := fromV.String(), toV.String()
	dir := direction(fromV, toV)
	switch {
	case dir == Down && !opts.Downgrade:
		return nil, badInput(fmt.Errorf("%s -> %s is a downgrade: pass --downgrade", from, to))
	case dir != Down && opts.Downgrade:
		return nil, badInput(fmt.Errorf("%s -> %s is not a downgrade", from, to))
	}
	if errs := CheckPath(fromV, toV, cfg.Policy, nil); len(errs) > 0 {
		return nil, fmt.Errorf("%w", errs[0])
	}
	rep := &CfgupgradeReport{File: spec.File, From: from, To: to}
	if dir == Same {
		rep.To = from
		return rep, nil
	}
	r.Target = versionTarget(lay, fromV, toV)

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
// upgrade, the newest installed version of the previous minor for a downgrade. A version
// directory that names only MAJOR.MINOR stands for its PATCH 0 (1.2-rc1 for 1.2.0-rc1).
func defaultCfgTarget(ctx context.Context, lay *layout.Layout, from layout.Version, down bool) (layout.Version, error) {
	full := func(dir string) (layout.Version, error) {
		v, err := layout.ParseVersion(dir)
		if err != nil || v.Numbers() == 3 {
			return v, err
		}
		text := v.MajorMinor() + ".0"
		if v.Prerelease() != "" {
			text += "-" + v.Prerelease()
		}
		return layout.ParseVersion(text)
	}
	if !down {
		live, err := lay.Live(ctx, layout.OSFS{})
		if err != nil {
			return layout.Version{}, err
		}
		return full(live)
	}
	if from.Minor() == 0 {
		return layout.Version{}, fmt.Errorf("config version %s has no previous minor version to downgrade to", from)
	}
	want := fmt.Sprintf("%d.%d", from.Major(), from.Minor()-1)
	installed, err := lay.Installed(ctx, layout.OSFS{})
	if err != nil {
		return layout.Version{}, err
	}
	for i := len(installed) - 1; i >= 0; i-- {
		if v, err := full(installed[i]); err == nil && v.MajorMinor() == want {
			return v, nil
		}
	}
	lib, _ := lay.Trees(from)
	return layout.Version{}, fmt.Errorf("no version %s.x is installed under %s; pass --to", want, filepath.Dir(lib))
}
