package cluster

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
)

// CopyIn copies the local file or directory src to dst on node, as cp -R would: a directory
// with everything in it, links as links, modes kept, everything owned by root. A dst that is
// an existing directory receives src under its own name; otherwise src becomes dst, whose
// parent must exist. dst must be absolute.
func (c *Cluster) CopyIn(ctx context.Context, node, src, dst string) error {
	n, err := c.Node(node)
	if err != nil {
		return err
	}
	if !path.IsAbs(dst) {
		return fmt.Errorf("%s: copy to %q: want an absolute path on the node", node, dst)
	}
	if _, err := os.Lstat(src); err != nil {
		return fmt.Errorf("%s: copy %w", node, err)
	}
	// docker cp reads a path with a colon as CONTAINER:PATH and "-" as a tar stream on stdin,
	// unless it is absolute or starts with "./".
	if !filepath.IsAbs(src) {
		src = "./" + src
	}
	if _, err := docker(ctx, nil, "cp", src, n.Container+":"+dst); err != nil {
		return fmt.Errorf("%s: copy %s to %s: %w", node, src, dst, err)
	}
	return nil
}
