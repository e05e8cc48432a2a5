package upgrade

import (
	"context"
	"slices"
	"strings"

	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/upgrade/staging"
)

// checkInstalledManifests checks every version ns lists as installed against the manifests
// a stage kept beside its two trees: a version whose tree differs from its manifest (altered,
// or half-written) is taken out of ns.Installed and ns.Error says what differs. Trees without
// a manifest (the package manager's) stay as they are. A connection that cannot run the
// check (a test's) changes nothing.
func checkInstalledManifests(ctx context.Context, r *Run, lc Conn, ns *NodeStatus) {
	c, err := streamConn(lc)
	if err != nil {
		return
	}
	var problems []string
	ns.Installed = slices.DeleteFunc(ns.Installed, func(v string) bool {
		// An installed VERSIONDIR parses: Installed lists no other name.
		parsed, err := layout.ParseVersion(v)
		if err != nil {
			return false
		}
		lib, share := r.Layout.Trees(parsed)
		for _, tree := range []string{lib, share} {
			if _, err := staging.Verify(ctx, c, tree); err != nil {
				problems = append(problems, v+" is not counted as installed: "+strings.TrimPrefix(err.Error(), ns.Name+": "))
				return true
			}
		}
		return false
	})
	if len(problems) > 0 {
		if ns.Error != "" {
			problems = append([]string{ns.Error}, problems...)
		}
		ns.Error = strings.Join(problems, "; ")
	}
}
