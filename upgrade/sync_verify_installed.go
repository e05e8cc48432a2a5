package upgrade

import (
	"context"

	"github.com/cutover/cutover/nodes"
)

// syncVerifyInstalled checks on every node a sync works on that both trees of the cluster's
// live version are installed, before anything is stopped: a node that lacks one is refused,
// named, and nothing changes.
type syncVerifyInstalled struct{}

func (syncVerifyInstalled) Name() string { return "verify-installed" }

// ReadOnly marks a stage that changes nothing: a dry run runs it, and the operator confirms
// after it.
func (syncVerifyInstalled) ReadOnly() {}

func (syncVerifyInstalled) Where() Where { return OnAll }

func (syncVerifyInstalled) Run(ctx context.Context, r *Run) error {
	return r.OnNodes(ctx, r.Online, false, func(ctx context.Context, c Conn, n nodes.Node) error {
		return onNode(n.Name, r.Layout.CheckInstalled(ctx, c, r.ToVersion))
	})
}
