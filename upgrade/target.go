package upgrade

import (
	"fmt"
	"strings"

	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/nodes"
)

// Target is a run's two versions, parsed once with one grammar (layout.ParseVersion) and
// read by every stage: the versions, their version directories and the direction between
// them.
type Target struct {
	// From and To are the two versions as they were given, which messages print.
	From, To string
	// FromVersion and ToVersion are From and To parsed.
	FromVersion, ToVersion layout.Version
	Direction              Direction
	// FromDir and ToDir are the version directories of From and To (VERSIONDIR).
	FromDir, ToDir string
}

// newTarget parses a run from one installed version to another, as the cluster's links and
// the journal give them.
func newTarget(lay *layout.Layout, from, to string) (Target, error) {
	tv, err := layout.ParseVersion(to)
	if err != nil {
		return Target{}, fmt.Errorf("to: %w", err)
	}
	return targetTo(lay, from, tv)
}

// targetTo is a run from the installed version from, as the cluster's links give it, to the
// version tv, parsed where it entered cutover (--to).
func targetTo(lay *layout.Layout, from string, tv layout.Version) (Target, error) {
	fv, err := layout.ParseVersion(from)
	if err != nil {
		return Target{}, fmt.Errorf("from: %w", err)
	}
	to := tv.String()
	t := versionTarget(lay, fv, tv)
	if full := t.FromDir == from && t.ToDir == to; full && fv.Numbers() != tv.Numbers() {
		return Target{}, fmt.Errorf("--to=%s: with version_dirs = \"full\" a version is named in full, as the cluster's %s is; name the target the same way (such as %s.0)", to, from, to)
	}
	return t, nil
}

// versionTarget is the Target between two parsed versions.
func versionTarget(lay *layout.Layout, from, to layout.Version) Target {
	return Target{
		From: from.String(), To: to.String(),
		FromVersion: from, ToVersion: to,
		Direction: direction(from, to),
		FromDir:   lay.DirOf(from), ToDir: lay.DirOf(to),
	}
}

// FromMinor is MAJOR.MINOR of the source version.
func (t Target) FromMinor() string { return t.FromVersion.MajorMinor() }

// ToMinor is MAJOR.MINOR of the target version.
func (t Target) ToMinor() string { return t.ToVersion.MajorMinor() }

// expand replaces the placeholders {from}, {to} and {node} of a configured command with
// shell-quoted values: the target's versions and node.
func (t Target) expand(command, node string) string {
	return strings.NewReplacer(
		"{from}", nodes.Quote(t.From),
		"{to}", nodes.Quote(t.To),
		"{node}", nodes.Quote(node),
	).Replace(command)
}
