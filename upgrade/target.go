package upgrade

import (
	"fmt"
	"strings"

	"github.com/cutover/cutover/layout"
)

// Target is a run's two versions, parsed once with one grammar (layout.ValidVersion) and
// read by every stage: the versions, their version directories and the direction between
// them.
type Target struct {
	From, To  string
	Direction Direction
	// FromDir and ToDir are the version directories of From and To (VERSIONDIR).
	FromDir, ToDir string
}

// newTarget parses a run from one installed version to another.
func newTarget(lay *layout.Layout, from, to string) (Target, error) {
	t := Target{From: from, To: to}
	var err error
	if t.FromDir, err = lay.VersionDir(from); err != nil {
		return Target{}, fmt.Errorf("from: %w", err)
	}
	if t.ToDir, err = lay.VersionDir(to); err != nil {
		return Target{}, fmt.Errorf("to: %w", err)
	}
	if full := t.FromDir == from && t.ToDir == to; full && numbers(from) != numbers(to) {
		return Target{}, fmt.Errorf("--to=%s: with version_dirs = \"full\" a version is named in full, as the cluster's %s is; name the target the same way (such as %s.0)", to, from, to)
	}
	if t.Direction, err = direction(from, to); err != nil {
		return Target{}, err
	}
	return t, nil
}

// numbers counts the dot-separated numbers of a version, before any prerelease.
func numbers(v string) int {
	return strings.Count(strings.SplitN(v, "-", 2)[0], ".") + 1
}

// FromMinor and ToMinor are MAJOR.MINOR of the two versions.
func (t Target) FromMinor() string { return minorOf(t.From) }

// ToMinor is MAJOR.MINOR of the target version.
func (t Target) ToMinor() string { return minorOf(t.To) }
