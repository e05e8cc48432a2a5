package upgrade

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cutover/cutover/cfgupgrade"
	"github.com/cutover/cutover/nodes"
)

// preflight checks, on the master and before anything is written, that the run may go
// ahead: the path policy, the application's config, the health gate and the disk space for
// the backup. Every refusal is listed, not just the first. It also warns about offline nodes
// and about nodes whose clock is off the master's.
type preflight struct{}

func (preflight) Name() string { return "preflight" }

// ReadOnly marks a stage that changes nothing: a dry run runs it, and the operator confirms
// after it.
func (preflight) ReadOnly() {}

func (preflight) Where() Where { return OnMaster }

func (preflight) Run(ctx context.Context, r *Run) error {
	var errs []error
	for _, c := range masterChecks(r) {
		if c.err != nil {
			errs = append(errs, c.err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, c := range append(offlineChecks(r), clockChecks(ctx, r)...) {
		if c.warn != "" {
			r.Warn("%s", c.warn)
		}
	}
	if c, ok := healthGate(ctx, r); ok {
		if c.err != nil {
			return c.err
		}
		if c.warn != "" {
			r.Warn("%s", c.warn)
		}
	}
	r.Note("%s %s -> %s (%s)", r.Config.App, r.From, r.To, r.Direction)
	return nil
}

// checkResult is the outcome of one check made before anything is written: a refusal (err),
// a warning that does not stop the run (warn), or what was found (note).
type checkResult struct {
	name string
	node string // the node checked; "" for a check of the cluster as a whole
	err  error
	warn string
	note string
}

// masterChecks are preflight's checks that read the master alone: the upgrade path (the
// policy and the target's own upgrade-policy.json), the application's config and the disk
// space for the backup, in that order. Each refusal is a result of its own.
func masterChecks(r *Run) []checkResult {
	var out []checkResult
	master := r.Inventory.Master
	if r.Direction != Same || r.From != r.To {
		var errs []error
		target, err := loadTargetPolicy(r)
		if err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, CheckPath(r.FromVersion, r.ToVersion, r.Config.Policy, target)...)
		for _, err := range errs {
			out = append(out, checkResult{name: "upgrade-path", err: err})
		}
		if len(errs) == 0 {
			out = append(out, checkResult{name: "upgrade-path", note: fmt.Sprintf("%s -> %s (%s) is allowed", r.From, r.To, r.Direction)})
		}
		if r.Config.Strategy.IsRolling() {
			out = append(out, rollingCheck(r, target))
		}
	}
	if err := checkAppConfig(r); err != nil {
		out = append(out, checkResult{name: "app-config", node: master, err: err})
	} else {
		out = append(out, checkResult{name: "app-config", node: master, note: fmt.Sprintf("%s is at %s", r.Config.Config.File, r.From)})
	}
	note, err := checkDiskSpace(r)
	out = append(out, checkResult{name: "disk-space", node: master, err: err, note: note})
	return out
}

// offlineChecks warns about every offline node: the run skips it.
func offlineChecks(r *Run) []checkResult {
	var out []checkResult
	for _, n := range r.Offline {
		out = append(out, checkResult{name: "offline", node: n.Name,
			warn: fmt.Sprintf("%s is offline: it is skipped and stays at %s; run 'cutover sync %s' when it is back", n.Name, r.From, n.Name)})
	}
	return out
}

// healthGate runs the verify command on the master, when one is configured (ok is false
// otherwise). An unhealthy cluster is refused unless --force=unhealthy, which turns the
// refusal into a warning.
func healthGate(ctx context.Context, r *Run) (c checkResult, ok bool) {
	cmd := r.Config.Commands.Verify
	if cmd == "" {
		return checkResult{}, false
	}
	c = checkResult{name: "health", node: r.Inventory.Master, note: "verify passed"}
	if _, err := r.OnMaster(ctx, cmd); err != nil {
		if !r.Force["unhealthy"] {
			c.err = fmt.Errorf("health gate: the cluster is not healthy (%w); fix it or pass --force=unhealthy", err)
		} else {
			c.warn = fmt.Sprintf("health gate failed, going on because of --force=unhealthy: %v", err)
		}
	}
	return c, true
}

// maxClockSkew is how far a node's clock may be off the master's before preflight warns:
// the journal, the logs and the backups are stamped with the master's time, and the
// application's own timeouts may compare clocks across nodes.
const maxClockSkew = 2 * time.Second

// clockChecks compares the clock of every other online node with the master's: it runs
// `date +%s` on the node and warns when the node's time is certainly more than maxClockSkew
// off, allowing for the second `date` truncates to and the time the command took. A node that
// cannot be reached or whose date cannot be read is left out: verify-installed reports it.
// `date` ends by itself and changes nothing, so it runs without the watchdog, which would
// cost every node two processes more in the run's first, busiest stage.
func clockChecks(ctx context.Context, r *Run) []checkResult {
	others := r.Others()
	out := make([]checkResult, len(others))
	measured := make([]bool, len(others))
	_, _ = nodes.Each(ctx, others, r.Config.SSH.Parallel, "", func(ctx context.Context, n nodes.Node) error {
		i := slices.IndexFunc(others, func(o nodes.Node) bool { return o.Name == n.Name })
		c, err := r.Conn(ctx, n.Name)
		if err != nil {
			return err
		}
		before := time.Now()
		res, err := c.RunInput(ctx, strings.NewReader(""), "date", "+%s")
		after := time.Now()
		if err != nil {
			return err
		}
		secs, err := strconv.ParseInt(strings.TrimSpace(string(res.Stdout)), 10, 64)
		if err != nil {
			return err
		}
		out[i], measured[i] = clockCheck(n.Name, secs, before, after), true
		return nil
	})
	var list []checkResult
	for i, c := range out {
		if measured[i] {
			list = append(list, c)
		}
	}
	return list
}

// clockCheck judges one node's clock: it read secs (whole seconds) while the master's clock
// went from before to after. The node's true time lies in [secs, secs+1), so its offset lies
// in [secs-after, secs+1-before]; it warns only when the whole interval is beyond maxClockSkew.
func clockCheck(node string, secs int64, before, after time.Time) checkResult {
	c := checkResult{name: "clock", node: node}
	lo := time.Unix(secs, 0).Sub(after)
	hi := time.Unix(secs+1, 0).Sub(before)
	switch {
	case lo > maxClockSkew:
		c.warn = fmt.Sprintf("%s's clock is %s ahead of the master's; keep the nodes' clocks in sync (NTP)", node, lo.Round(time.Second))
	case hi < -maxClockSkew:
		c.warn = fmt.Sprintf("%s's clock is %s behind the master's; keep the nodes' clocks in sync (NTP)", node, (-hi).Round(time.Second))
	default:
		c.note = fmt.Sprintf("within %s of the master's", maxClockSkew)
	}
	return c
}

// checkAppConfig makes sure the application's config is at the live version and, for builtin
// migrations, that the migrations apply to it: a corrupt or foreign config is refused here,
// before anything is written, rather than at the point of no return.
func checkAppConfig(r *Run) error {
	spec := configSpec(r.Config)
	if _, err := os.Stat(spec.File); err != nil {
		return fmt.Errorf("application config: %w", err)
	}
	v, err := configVersion(spec)
	if err != nil {
		return fmt.Errorf("application config: %w", err)
	}
	if !v.SameMinor(r.FromVersion) {
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

// checkDiskSpace makes sure the state directory can hold a backup of the application's state,
// and says how much it needs and has.
func checkDiskSpace(r *Run) (string, error) {
	var need int64 = 16 << 20
	for _, dir := range r.Config.BackupDirs() {
		// A top-level directory that is a link (state on another disk) is followed, as
		// the backup follows it.
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			dir = real
		}
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
		return "", fmt.Errorf("disk space of %s: %w", dir, err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	if free < need {
		return "", fmt.Errorf("not enough space for the backup in %s: %d MiB free, %d MiB needed", dir, free>>20, need>>20)
	}
	return fmt.Sprintf("%d MiB needed for the backup, %d MiB free in %s", need>>20, free>>20, dir), nil
}
