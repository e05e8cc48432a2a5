package upgrade

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/hashicorp/go-version"
)

// TargetPolicy is what a target version's tree says about which versions may reach it:
// <datadir>/<app>/<VERSIONDIR>/cutover/upgrade-policy.json.
type TargetPolicy struct {
	// BlockedFrom are exact source versions refused.
	BlockedFrom []string `json:"blocked_from"`
	// AllowedFrom is a version constraint (">= 2.16, < 3.0") of sources admitted even where
	// the default policy would refuse them, such as a major hop.
	AllowedFrom string `json:"allowed_from"`
}

// CheckPath decides whether a cluster may move from one version to another: the default
// policy (same major; any higher minor, or only the next one without allow_minor_jump; the
// same minor either way; the previous minor down, or never), narrowed by the target's block
// list and widened by its allowed sources. It returns every refusal.
func CheckPath(from, to string, p PolicyConfig, target *TargetPolicy) []error {
	f, err := version.NewVersion(from)
	if err != nil {
		return []error{fmt.Errorf("live version %q: %w", from, err)}
	}
	t, err := version.NewVersion(to)
	if err != nil {
		return []error{fmt.Errorf("target version %q: %w", to, err)}
	}
	if target != nil && slices.Contains(target.BlockedFrom, from) {
		return []error{fmt.Errorf("upgrade from %s to %s is blocked by %s's upgrade policy", from, to, to)}
	}
	if target != nil && target.AllowedFrom != "" {
		c, err := version.NewConstraint(target.AllowedFrom)
		if err != nil {
			return []error{fmt.Errorf("%s's upgrade policy: allowed_from %q: %w", to, target.AllowedFrom, err)}
		}
		if c.Check(f) {
			return nil
		}
	}
	fs, ts := f.Segments(), t.Segments()
	switch {
	case fs[0] != ts[0]:
		return []error{fmt.Errorf("%s -> %s changes the major version, which the policy does not allow", from, to)}
	case ts[1] > fs[1]+1 && !p.AllowMinorJump:
		return []error{fmt.Errorf("%s -> %s skips a minor version; the policy allows only %d.%d (allow_minor_jump = false)", from, to, fs[0], fs[1]+1)}
	case ts[1] < fs[1] && p.Downgrade == "never":
		return []error{fmt.Errorf("%s -> %s is a downgrade, which the policy does not allow (downgrade = \"never\")", from, to)}
	case ts[1] < fs[1]-1:
		return []error{fmt.Errorf("%s -> %s: a downgrade can only go to the previous minor version, %d.%d", from, to, fs[0], fs[1]-1)}
	}
	return nil
}

// direction says which way from -> to goes, by MAJOR.MINOR.
func direction(from, to string) (Direction, error) {
	f, err := version.NewVersion(from)
	if err != nil {
		return "", err
	}
	t, err := version.NewVersion(to)
	if err != nil {
		return "", err
	}
	fs, ts := f.Segments(), t.Segments()
	switch {
	case ts[0] > fs[0] || ts[0] == fs[0] && ts[1] > fs[1]:
		return Up, nil
	case ts[0] < fs[0] || ts[1] < fs[1]:
		return Down, nil
	}
	return Same, nil
}

// loadTargetPolicy reads the target tree's upgrade-policy.json on the master; none is nil.
func loadTargetPolicy(r *Run) (*TargetPolicy, error) {
	_, share, err := r.Layout.Trees(r.To)
	if err != nil {
		return nil, err
	}
	file := filepath.Join(share, "cutover", "upgrade-policy.json")
	data, err := os.ReadFile(file)
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
