package upgrade

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/hashicorp/go-version"

	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/upgrade/config"
)

// TargetPolicy is what a target version's tree says about which versions may reach it:
// <datadir>/<app>/<VERSIONDIR>/cutover/upgrade-policy.json.
type TargetPolicy struct {
	// BlockedFrom are exact source versions refused.
	BlockedFrom []string `json:"blocked_from"`
	// AllowedFrom is a version constraint (">= 2.16, < 3.0") of sources admitted even where
	// the default policy would refuse them, such as a major hop.
	AllowedFrom string `json:"allowed_from"`
	// RollingFrom is a version constraint (">= 1.1, < 1.3") of the versions that run side by
	// side with this one: a rolling run between them is allowed. Without it, a rolling run
	// across a minor version is refused.
	RollingFrom string `json:"rolling_from"`
}

// CheckRolling decides whether a rolling run may move from one version to another: the
// cluster runs both at once for a while, so the newer of the two must declare, in its
// upgrade-policy.json (newer), that the older one runs beside it. A same-minor switch needs
// nothing.
func CheckRolling(from, to layout.Version, d Direction, newer *TargetPolicy) error {
	if d == Same {
		return nil
	}
	older, newest := from, to
	if d == Down {
		older, newest = to, from
	}
	if newer == nil || newer.RollingFrom == "" {
		return fmt.Errorf("a rolling run from %s to %s runs both versions side by side, but %s's upgrade policy declares no rolling_from: use strategy.mode = \"all-at-once\"", from, to, newest)
	}
	c, err := version.NewConstraint(newer.RollingFrom)
	if err != nil {
		return fmt.Errorf("%s's upgrade policy: rolling_from %q: %w", newest, newer.RollingFrom, err)
	}
	ok, err := satisfies(c, older)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s's upgrade-policy.json declares rolling_from %q, which leaves out %s: the two are not declared to run side by side; use strategy.mode = \"all-at-once\"", newest, newer.RollingFrom, older)
	}
	return nil
}

// CheckPath decides whether a cluster may move from one version to another: the default
// policy (same major; any higher minor, or only the next one without allow_minor_jump; the
// same minor either way; the previous minor down, or never), narrowed by the target's block
// list and widened by its allowed sources. It returns every refusal.
func CheckPath(from, to layout.Version, p config.PolicyConfig, target *TargetPolicy) []error {
	if target != nil && slices.Contains(target.BlockedFrom, from.String()) {
		return []error{fmt.Errorf("upgrade from %s to %s is blocked by %s's upgrade policy", from, to, to)}
	}
	if target != nil && target.AllowedFrom != "" {
		c, err := version.NewConstraint(target.AllowedFrom)
		if err != nil {
			return []error{fmt.Errorf("%s's upgrade policy: allowed_from %q: %w", to, target.AllowedFrom, err)}
		}
		ok, err := satisfies(c, from)
		if err != nil {
			return []error{err}
		}
		if ok {
			return nil
		}
	}
	switch {
	case from.Major() != to.Major():
		return []error{fmt.Errorf("%s -> %s changes the major version, which the policy does not allow", from, to)}
	case to.Minor() > from.Minor()+1 && !p.AllowMinorJump:
		return []error{fmt.Errorf("%s -> %s skips a minor version; the policy allows only %d.%d (allow_minor_jump = false)", from, to, from.Major(), from.Minor()+1)}
	case to.Minor() < from.Minor() && p.Downgrade == "never":
		return []error{fmt.Errorf("%s -> %s is a downgrade, which the policy does not allow (downgrade = \"never\")", from, to)}
	case to.Minor() < from.Minor()-1:
		return []error{fmt.Errorf("%s -> %s: a downgrade can only go to the previous minor version, %d.%d", from, to, from.Major(), from.Minor()-1)}
	}
	return nil
}

// satisfies reports whether v meets a version constraint of an upgrade policy, which
// go-version checks on its own reading of the version.
func satisfies(c version.Constraints, v layout.Version) (bool, error) {
	gv, err := version.NewVersion(v.String())
	if err != nil {
		return false, fmt.Errorf("version %q: %w", v, err)
	}
	return c.Check(gv), nil
}

// direction says which way from -> to goes, by MAJOR.MINOR.
func direction(from, to layout.Version) Direction {
	switch {
	case to.Major() > from.Major() || to.Major() == from.Major() && to.Minor() > from.Minor():
		return Up
	case to.Major() < from.Major() || to.Minor() < from.Minor():
		return Down
	}
	return Same
}

// loadTargetPolicy reads the target tree's upgrade-policy.json on the master; none is nil.
func loadTargetPolicy(r *Run) (*TargetPolicy, error) { return loadPolicy(r, r.ToVersion) }

// loadPolicy reads the upgrade-policy.json of version v's tree on the master; none is nil.
func loadPolicy(r *Run, v layout.Version) (*TargetPolicy, error) {
	_, share := r.Layout.Trees(v)
	file := filepath.Join(share, "cutover", "upgrade-policy.json")
	data, err := config.ReadTrusted(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("upgrade policy: %w", err)
	}
	var p TargetPolicy
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("upgrade policy %s: %w", file, err)
	}
	return &p, nil
}
