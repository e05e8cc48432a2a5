package upgrade

import (
	"context"
	"fmt"

	"github.com/cutover/cutover/nodes"
)

// verifyInstalled checks on every online node that both trees of the target version are
// installed and that the node runs the version the cluster runs, so that a node is never
// half-switched.
type verifyInstalled struct{}

func (verifyInstalled) Name() string { return "verify-installed" }

// ReadOnly marks a stage that changes nothing: a dry run runs it, and the operator confirms
// after it.
func (verifyInstalled) ReadOnly() {}

func (verifyInstalled) Where() Where { return OnAll }

func (verifyInstalled) Run(ctx context.Context, r *Run) error {
	return checkNodes(ctx, r, r.Online)
}

// checkNodes is the node check shared by verify-installed and reverify.
func checkNodes(ctx context.Context, r *Run, list []nodes.Node) error {
	fromDir, err := r.Layout.VersionDir(r.From)
	if err != nil {
		return err
	}
	toDir, err := r.Layout.VersionDir(r.To)
	if err != nil {
		return err
	}
	return r.OnNodes(ctx, list, false, func(ctx context.Context, c Conn, n nodes.Node) error {
		return checkNode(ctx, r, c, n, fromDir, toDir)
	})
}

// checkNode checks one node: both trees of the target (toDir) are installed, and its links
// point at the cluster's version (fromDir), or at the target in a resumed run. An empty
// fromDir, when the cluster's version is not known, checks the links only for agreeing.
func checkNode(ctx context.Context, r *Run, c Conn, n nodes.Node, fromDir, toDir string) error {
	if err := r.Layout.CheckInstalled(ctx, c, r.To); err != nil {
		return onNode(n.Name, err)
	}
	live, err := r.Layout.Live(ctx, c)
	if err != nil {
		return onNode(n.Name, err)
	}
	switch {
	case fromDir == "":
	case live == fromDir:
	case live == toDir && r.Resumed:
	default:
		return fmt.Errorf("%s runs %s, not the cluster's %s; run 'cutover sync %s' first", n.Name, live, fromDir, n.Name)
	}
	return nil
}
