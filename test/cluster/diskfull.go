package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"path"
	"strings"
	"time"
)

// fillScript, run by /bin/sh inside a node's mount namespace with the directory as $1, puts a
// small tmpfs over the directory with what the directory held, then fills the tmpfs's blocks
// and inodes: anything that then creates a file, a link or data there fails with ENOSPC. The
// fillers are under $1/.full, which Free removes.
const fillScript = `set -e
dir=$1
test -d "$dir" && test ! -L "$dir"
tmp=$(mktemp -d /tmp/cutover-full.XXXXXX)
mount -t tmpfs -o size=256k,nr_inodes=64,mode=0755 cutover-full "$tmp"
cp -a "$dir"/. "$tmp"/
chmod --reference="$dir" "$tmp"
chown --reference="$dir" "$tmp"
mount --move "$tmp" "$dir"
rmdir "$tmp"
mkdir "$dir"/.full
dd if=/dev/zero of="$dir"/.full/blocks bs=4k 2>/dev/null || true
i=0
while touch "$dir"/.full/inode.$i 2>/dev/null; do i=$((i+1)); done
if touch "$dir"/.full/one-more 2>/dev/null; then echo "$dir: not full" >&2; exit 1; fi
`

// A FullDisk is a node's directory on a full file system, made by [Cluster.FillDisk].
type FullDisk struct {
	c          *Cluster
	Node, Path string
}

// FillDisk makes the file system under dir on node full, as a node's full disk is: a tmpfs
// mounted over dir (from the host, in the node's mount namespace, so the node needs no
// privilege) holds what dir held and nothing more fits, neither data nor a new file or link.
// Free makes room again; the tmpfs stays until the node is removed or rebooted.
func (c *Cluster) FillDisk(ctx context.Context, node, dir string) (*FullDisk, error) {
	if !path.IsAbs(dir) || path.Clean(dir) != dir || dir == "/" {
		return nil, fmt.Errorf("%s: fill %q: want a clean absolute path below /", node, dir)
	}
	if err := c.inNodeMountNS(ctx, node, "/bin/sh", "-c", fillScript, "cutover-fill", dir); err != nil {
		return nil, fmt.Errorf("%s: fill %s: %w", node, dir, err)
	}
	c.logf("cluster %s: %s's %s is full", c.Name, node, dir)
	return &FullDisk{c: c, Node: node, Path: dir}, nil
}

// Free removes what FillDisk put into the directory: the file system has room again.
func (d *FullDisk) Free(ctx context.Context) error {
	if err := d.c.inNodeMountNS(ctx, d.Node, "rm", "-rf", "--", d.Path+"/.full"); err != nil {
		return fmt.Errorf("%s: free %s: %w", d.Node, d.Path, err)
	}
	d.c.logf("cluster %s: %s's %s has room again", d.c.Name, d.Node, d.Path)
	return nil
}

// inNodeMountNS runs argv on the host in node's mount namespace (so with the node's files and
// programs, and the host's privileges).
func (c *Cluster) inNodeMountNS(ctx context.Context, node string, argv ...string) error {
	n, err := c.Node(node)
	if err != nil {
		return err
	}
	pid, err := docker(ctx, nil, "inspect", "-f", "{{.State.Pid}}", n.Container)
	if err != nil {
		return fmt.Errorf("%s's pid: %w", node, err)
	}
	ctx, cancel := withDefaultTimeout(ctx, 30*time.Second)
	defer cancel()
	args := append([]string{"-t", strings.TrimSpace(pid), "-m", "--"}, argv...)
	if out, err := exec.CommandContext(ctx, "nsenter", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("nsenter %s: %w: %s", argv[0], err, strings.TrimSpace(string(out)))
	}
	return nil
}
