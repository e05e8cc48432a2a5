package cluster

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cutover/cutover/test/demoapp"
)

// systemDirModes are the modes (as in a tar header) of directories the node image already has.
// A staged tree's directory entries overwrite the modes of existing directories, so these are
// fixed whatever modes the staging directory happened to get.
var systemDirModes = map[string]int64{
	".":          0o755,
	"etc":        0o755,
	"etc/cron.d": 0o755,
	"etc/ssh":    0o755,
	"home":       0o755,
	"opt":        0o755,
	"root":       0o700,
	"srv":        0o755,
	"tmp":        0o1777,
	"usr":        0o755,
	"usr/bin":    0o755,
	"usr/lib":    0o755,
	"usr/local":  0o755,
	"usr/sbin":   0o755,
	"usr/share":  0o755,
	"var":        0o755,
	"var/cache":  0o755,
	"var/lib":    0o755,
	"var/log":    0o755,
}

// mergedUsr are the node image's top-level symlinks into /usr. A staged directory of the same
// name would replace the link, so staging refuses it.
var mergedUsr = []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// stage writes node n's installation into its (created, not yet started) container: the demo
// application (unless spec is nil), root's SSH files and, on the master, cutover's package
// (installed after boot).
func (c *Cluster) stage(ctx context.Context, n Node, art *artifacts, spec *demoapp.NodeSpec, key masterKey) error {
	root, err := os.MkdirTemp("", "cutover-stage-"+n.Name+"-")
	if err != nil {
		return fmt.Errorf("%s: stage: %w", n.Name, err)
	}
	defer os.RemoveAll(root)
	if err := stageTree(root, art, spec, key, n.Name == c.Master); err != nil {
		return fmt.Errorf("%s: stage: %w", n.Name, err)
	}
	if err := copyTree(ctx, root, n.Container); err != nil {
		return fmt.Errorf("%s: stage: %w", n.Name, err)
	}
	return nil
}

// stageTree writes under root what one node gets, as it will lie under the node's /: the demo
// application as spec says, none when spec is nil.
func stageTree(root string, art *artifacts, spec *demoapp.NodeSpec, key masterKey, master bool) error {
	if spec != nil {
		if err := demoapp.Stage(root, art.bins, *spec); err != nil {
			return fmt.Errorf("demo application: %w", err)
		}
	}
	type file struct {
		path string
		data []byte
		mode fs.FileMode
	}
	files := []file{{"root/.ssh/authorized_keys", key.public, 0o600}}
	if master {
		deb, err := os.ReadFile(art.deb)
		if err != nil {
			return fmt.Errorf("cutover package: %w", err)
		}
		files = append(files,
			file{"root/.ssh/id_ed25519", key.private, 0o600},
			file{"root/.ssh/id_ed25519.pub", key.public, 0o644},
			file{strings.TrimPrefix(debPath, "/"), deb, 0o644},
		)
	}
	if err := os.MkdirAll(filepath.Join(root, "root/.ssh"), 0o700); err != nil {
		return err
	}
	if err := os.Chmod(filepath.Join(root, "root/.ssh"), 0o700); err != nil {
		return err
	}
	for _, f := range files {
		path := filepath.Join(root, f.path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, f.data, f.mode); err != nil {
			return err
		}
		if err := os.Chmod(path, f.mode); err != nil {
			return err
		}
	}
	return nil
}

// copyTree copies the tree under root into container's / as a tar stream owned by root.
func copyTree(ctx context.Context, root, container string) error {
	for _, name := range mergedUsr {
		if fi, err := os.Lstat(filepath.Join(root, name)); err == nil && !fi.Mode().IsRegular() {
			return fmt.Errorf("staged /%s would replace the node's /%s -> usr/%s link; install under /usr", name, name, name)
		}
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeTar(pw, root)) }()
	_, err := docker(ctx, pr, "cp", "-", container+":/")
	pr.CloseWithError(err)
	if err != nil {
		return fmt.Errorf("copy into %s: %w", container, err)
	}
	return nil
}

// writeTar writes the tree under root to w: directories, regular files and symlinks, with
// their modes, owned by root.
func writeTar(w io.Writer, root string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(path); err != nil {
				return err
			}
		} else if !fi.Mode().IsRegular() && !fi.IsDir() {
			return fmt.Errorf("staged %s: not a file, directory or symlink", rel)
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = "./" + rel
		if rel == "." {
			hdr.Name = "./"
		} else if fi.IsDir() {
			hdr.Name += "/"
		}
		if mode, ok := systemDirModes[rel]; ok && fi.IsDir() {
			hdr.Mode = mode
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "root", "root"
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return fmt.Errorf("archive %s: %w", root, err)
	}
	return tw.Close()
}
