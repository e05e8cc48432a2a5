package upgrade

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/upgrade/staging"
)

// stagingCheck refuses, on any online node and before anything is sent, a version that is live
// there, an existing copy that differs from the source (unless --replace) and a file system
// without room for the trees; it notes the nodes that hold the version already.
type stagingCheck struct{ job *stagingJob }

func (stagingCheck) Name() string { return "check" }
func (stagingCheck) Where() Where { return OnAll }

// ReadOnly marks a stage that changes nothing.
func (stagingCheck) ReadOnly() {}

// treeState is what a node holds of one tree of the version to stage.
type treeState int

const (
	treeMissing    treeState = iota
	treeSame                 // the tree, contents and manifest included
	treeUnrecorded           // the tree, contents included, without its manifest: place records it
	treeDiffers
)

// held reports whether a node holds the tree already: nothing is sent for it.
func (s treeState) held() bool { return s == treeSame || s == treeUnrecorded }

func (s stagingCheck) Run(ctx context.Context, r *Run) error {
	j := s.job
	dir := r.Layout.DirOf(j.version)
	var differ []string
	err := r.OnNodes(ctx, r.Online, false, func(ctx context.Context, lc Conn, n nodes.Node) error {
		c, err := streamConn(lc)
		if err != nil {
			return onNode(n.Name, err)
		}
		// One command reads the trees on the node, their manifests and the version's links:
		// a restage of an unchanged version costs the node that one round trip.
		links := []string{r.Layout.LibLink(), r.Layout.ShareLink()}
		finals, err := staging.ReadFinals(ctx, c, []string{j.libDir, j.shareDir}, links)
		if err != nil {
			return onNode(n.Name, err)
		}
		live, err := r.Layout.Live(ctx, readLinks{lc, links, finals.Links})
		switch {
		case err == nil && live == dir:
			// A refusal of the check, like every other command's (exit 1), not bad input.
			return onNode(n.Name, fmt.Errorf("%s is the live version: staging never touches the live version", j.version))
		case err != nil && !layout.IsNotSideBySide(err):
			return onNode(n.Name, err)
		}
		// The trees are judged by their content (the checksum of every file, computed there)
		// and their manifests, never by sizes and times: an altered or half-written copy
		// differs.
		trees := []*staging.Tree{j.lib, j.share}
		got, errs := finals.Compare(ctx, c, trees)
		var states [2]treeState
		var diffs []string
		var lacking []string
		var lackingAt []int
		var need []int64
		for i, st := range got {
			err := errs[i]
			switch {
			case st == staging.Differs:
				states[i] = treeDiffers
				diffs = append(diffs, err.Error())
			case err != nil:
				return onNode(n.Name, err)
			case st == staging.Same:
				states[i] = treeSame
			case st == staging.Unrecorded:
				states[i] = treeUnrecorded
			default:
				states[i] = treeMissing
			}
			if !states[i].held() {
				lacking, need = append(lacking, []string{j.libDir, j.shareDir}[i]), append(need, trees[i].Bytes)
				lackingAt = append(lackingAt, i)
			}
		}
		if err := checkFinalsRoom(ctx, c, finals, lackingAt, lacking, need); err != nil {
			return onNode(n.Name, err)
		}
		j.mu.Lock()
		defer j.mu.Unlock()
		j.states[n.Name] = states
		if states[0].held() && states[1].held() {
			j.already[n.Name] = true
		}
		if len(diffs) > 0 {
			differ = append(differ, strings.Join(diffs, "; "))
			if j.replace {
				j.replacing[n.Name] = true
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(differ) > 0 && !j.replace {
		return fmt.Errorf("%s is installed but differs from what is to be staged: %s; pass --replace to replace it", j.version, strings.Join(differ, "; "))
	}
	if n := len(j.already); n > 0 {
		r.Note("%s already staged on %s", j.version, plural(n, "node"))
	}
	return nil
}

// readLinks is a node's file system whose links at paths are those read (staging.Link), in
// the command that read the node's trees, so that the layout's reading of the live version
// costs no round trip of its own; anything else, and a path that is there without being a
// link (which the layout's error describes), is asked of the node.
type readLinks struct {
	layout.FS
	paths []string
	links []staging.Link
}

// read returns what was read at name, if it was.
func (f readLinks) read(name string) (staging.Link, bool) {
	for i, p := range f.paths {
		if p == name && (f.links[i].IsLink || !f.links[i].Exists) {
			return f.links[i], true
		}
	}
	return staging.Link{}, false
}

func (f readLinks) Lstat(name string) (fs.FileInfo, error) {
	l, ok := f.read(name)
	switch {
	case !ok:
		return f.FS.Lstat(name)
	case !l.Exists:
		return nil, &fs.PathError{Op: "lstat", Path: name, Err: fs.ErrNotExist}
	}
	return linkInfo(path.Base(name)), nil
}

func (f readLinks) Readlink(name string) (string, error) {
	if l, ok := f.read(name); ok && l.IsLink {
		return l.Target, nil
	}
	return f.FS.Readlink(name)
}

// linkInfo describes a symbolic link of that name.
type linkInfo string

func (l linkInfo) Name() string     { return string(l) }
func (linkInfo) Size() int64        { return 0 }
func (linkInfo) Mode() fs.FileMode  { return fs.ModeSymlink | 0o777 }
func (linkInfo) ModTime() time.Time { return time.Time{} }
func (linkInfo) IsDir() bool        { return false }
func (linkInfo) Sys() any           { return nil }

// spaceScript prints, a line for each argument, the kilobytes available to the file system of
// that directory or, while it does not exist, of its nearest existing parent.
const spaceScript = `n=$#
for d in "$@"; do
	while [ ! -d "$d" ]; do d=${d%/*}; [ -n "$d" ] || d=/; done
	set -- "$@" "$d"
done
shift "$n"
df -P -k -- "$@" | awk 'NR > 1 { print $4 }'`

// checkSpace refuses, in one command (in a session of its own, as the check's reading of the
// node), a tree of need[i] bytes where the file system of dirs[i] has less room, with a tenth
// more for directories and metadata.
func checkSpace(ctx context.Context, c staging.Conn, dirs []string, need []int64) error {
	if len(dirs) == 0 {
		return nil
	}
	res, err := staging.RunOwnSession(ctx, c, append([]string{"sh", "-c", spaceScript, "cutover-stage"}, dirs...)...)
	if err != nil {
		return fmt.Errorf("free space for %s: %w", strings.Join(dirs, " and "), err)
	}
	lines := strings.Fields(string(res.Stdout))
	if len(lines) != len(dirs) {
		return fmt.Errorf("free space for %s: unexpected df output %s", strings.Join(dirs, " and "), nodes.QuotedPrefix(res.Stdout))
	}
	var free []int64
	for i, dir := range dirs {
		kb, err := strconv.ParseInt(lines[i], 10, 64)
		if err != nil {
			return fmt.Errorf("free space for %s: unexpected df output %s", dir, nodes.QuotedPrefix(res.Stdout))
		}
		free = append(free, kb)
	}
	return checkRoom(dirs, need, free)
}

// checkRoom refuses a tree of need[i] bytes where the file system of dirs[i] has less than
// free[i] kilobytes available, with a tenth more for directories and metadata.
func checkRoom(dirs []string, need, free []int64) error {
	for i, dir := range dirs {
		if want := need[i] + need[i]/10; free[i]*1024 < want {
			return fmt.Errorf("%s has %s free, the version needs %s there: free some space (cutover prune removes versions no run needs)", dir, megabytes(free[i]*1024), megabytes(want))
		}
	}
	return nil
}

// checkFinalsRoom is checkSpace for the trees lacking on a node, with the free space the
// check's reading of the node found where nothing was at a tree's place (staging.Finals.Free),
// which is every lacking tree at a first stage; otherwise (a tree to replace) it asks the
// node in a command of its own.
func checkFinalsRoom(ctx context.Context, c staging.Conn, finals *staging.Finals, lacking []int, dirs []string, need []int64) error {
	var free []int64
	for _, i := range lacking {
		kb, ok := finals.Free(i)
		if !ok {
			return checkSpace(ctx, c, dirs, need)
		}
		free = append(free, kb)
	}
	return checkRoom(dirs, need, free)
}
