package upgrade

import (
	"context"
	"fmt"

	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/staging"
)

// verifyInstalled checks on every online node that both trees of the target version are
// installed and that the node runs the version the cluster runs, so that a node is never
// half-switched; with [policy] verify_checksums, that both trees match their manifests.
type verifyInstalled struct{}

func (verifyInstalled) Name() string { return "verify-installed" }

// ReadOnly marks a stage that changes nothing: a dry run runs it, and the operator confirms
// after it.
func (verifyInstalled) ReadOnly() {}

func (verifyInstalled) Where() Where { return OnAll }

func (verifyInstalled) Run(ctx context.Context, r *Run) error {
	if err := checkNodes(ctx, r, r.Online); err != nil {
		return err
	}
	if !r.Config.Policy.VerifyChecksums {
		return nil
	}
	return r.OnNodes(ctx, r.Online, false, func(ctx context.Context, c Conn, n nodes.Node) error {
		return verifyManifests(ctx, r, c, n, r.ToVersion)
	})
}

// verifyManifests checks the node's two trees of version against the manifests a stage kept
// beside them ([policy] verify_checksums): every entry and the SHA-256 of every file,
// computed on the node. A tree without a manifest (the package manager's) passes as it is.
func verifyManifests(ctx context.Context, r *Run, lc Conn, n nodes.Node, version layout.Version) error {
	lib, share := r.Layout.Trees(version)
	c, err := streamConn(lc)
	if err != nil {
		return onNode(n.Name, err)
	}
	for _, tree := range []string{lib, share} {
		if _, err := staging.Verify(ctx, c, tree); err != nil {
			return fmt.Errorf("%w; stage the version again with 'cutover stage --replace' or reinstall it", err)
		}
	}
	return nil
}

// checkNodes is the node check shared by verify-installed and reverify.
func checkNodes(ctx context.Context, r *Run, list []nodes.Node) error {
	return r.OnNodes(ctx, list, false, func(ctx context.Context, c Conn, n nodes.Node) error {
		return checkNode(ctx, r, c, n, r.FromDir, r.ToDir)
	})
}

// checkNode checks one node: both trees of the target (toDir) are installed, and its links
// point at the cluster's version (fromDir), or at the target in a resumed run. An empty
// fromDir, when the cluster's version is not known, checks the links only for agreeing.
func checkNode(ctx context.Context, r *Run, c Conn, n nodes.Node, fromDir, toDir string) error {
	if err := r.Layout.CheckInstalled(ctx, c, r.ToVersion); err != nil {
		return onNode(n.Name, err)
	}
	live, err := r.Layout.Live(ctx, c)
	if err != nil {
		return onNode(n.Name, err)
	}
	r.perNode.saw(n.Name, live, true)
	switch {
	case fromDir == "":
	case live == fromDir:
	case live == toDir && r.Resumed:
	case r.planPending != nil:
		// Mixed on purpose while a run is pending: the node is that run's, never one to
		// sync back.
		p := r.planPending
		return fmt.Errorf("%s runs %s, as part of pending run %d (%s -> %s): finish or abort that run first", n.Name, live, p.RunID, p.From, p.To)
	default:
		return fmt.Errorf("%s runs %s, not the cluster's %s; run 'cutover sync %s' first", n.Name, live, fromDir, n.Name)
	}
	return nil
}
