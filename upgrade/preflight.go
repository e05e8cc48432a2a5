package upgrade

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/cutover/cutover/cfgupgrade"
)

// preflight checks, on the master and before anything is written, that the run may go
// ahead: the path policy, the application's config, the health gate and the disk space for
// the backup. Every refusal is listed, not just the first.
type preflight struct{}

func (preflight) Name() string { return "preflight" }

func (preflight) Run(ctx context.Context, r *Run) error {
	var errs []error
	if r.Direction != Same || r.From != r.To {
		target, err := loadTargetPolicy(r)
		if err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, CheckPath(r.From, r.To, r.Config.Policy, target)...)
	}
	if err := checkAppConfig(r); err != nil {
		errs = append(errs, err)
	}
	if err := checkDiskSpace(r); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, n := range r.Offline {
		r.Warn("%s is offline: it is skipped and stays at %s; run 'cutover sync %s' when it is back", n.Name, r.From, n.Name)
	}
	if r.Config.Commands.Verify != "" {
		if _, err := r.OnMaster(ctx, r.Config.Commands.Verify); err != nil {
			if !r.Force["unhealthy"] {
				return fmt.Errorf("health gate: the cluster is not healthy (%w); fix it or pass --force=unhealthy", err)
			}
			r.Warn("health gate failed, going on because of --force=unhealthy: %v", err)
		}
	}
	r.Note("%s %s -> %s (%s)", r.Config.App, r.From, r.To, r.Direction)
	return nil
}

// checkAppConfig makes sure the application's config is at the live version and, for builtin
// migrations, that the migrations apply to it: a corrupt or foreign config is refused here,
// before anything is written, rather than at the point of no return.
func checkAppConfig(r *Run) error {
	spec := r.configSpec()
	if _, err := os.Stat(spec.File); err != nil {
		return fmt.Errorf("application config: %w", err)
	}
	v, err := cfgupgrade.ReadVersion(spec)
	if err != nil {
		return fmt.Errorf("application config: %w", err)
	}
	if minorOf(v) != minorOf(r.From) {
		return fmt.Errorf("application config %s is at version %s, which does not match the live version %s", spec.File, v, r.From)
	}
	if r.Config.Config.Migrate != "builtin" || r.Direction == Same {
		return nil
	}
	migs, err := r.migrations()
	if err != nil {
		return err
	}
	doc, err := os.ReadFile(spec.File)
	if err != nil {
		return fmt.Errorf("application config: %w", err)
	}
	if _, _, err := cfgupgrade.Migrate(doc, spec, r.From, r.To, migs); err != nil {
		return fmt.Errorf("application config cannot be migrated from %s to %s: %w", r.From, r.To, err)
	}
	return nil
}

// checkDiskSpace makes sure the state directory can hold a backup of the application's state.
func checkDiskSpace(r *Run) error {
	var need int64 = 16 << 20
	for _, dir := range r.backupDirs() {
		_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if info, err := d.Info(); err == nil {
					need += info.Size()
				}
			}
			return nil
		})
	}
	dir := r.Config.Paths.StateDir
	for {
		if _, err := os.Stat(dir); err == nil || dir == "/" {
			break
		}
		dir = filepath.Dir(dir)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("disk space of %s: %w", dir, err)
	}
	if free := int64(st.Bavail) * int64(st.Bsize); free < need {
		return fmt.Errorf("not enough space for the backup in %s: %d MiB free, %d MiB needed", dir, free>>20, need>>20)
	}
	return nil
}
