package demoapp

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
)

// Release writes version's lib and share trees as a vendor would ship them: a gzipped tar
// with usr/lib/demoapp/V and usr/share/demoapp/V under their real paths, the source that
// `cutover stage` takes. The trees are the ones [Stage] installs.
func Release(w io.Writer, bins *Binaries, version string) error {
	if !slices.Contains(Versions, version) {
		return fmt.Errorf("release %s: not a demo application version %v", version, Versions)
	}
	if bins == nil || bins.Paths[version] == "" {
		return fmt.Errorf("release %s: no binary built for it", version)
	}
	tmp, err := os.MkdirTemp("", "demoapp-release-")
	if err != nil {
		return fmt.Errorf("release %s: %w", version, err)
	}
	defer os.RemoveAll(tmp)
	t := tree{root: tmp}
	t.version(bins, version)
	if t.err != nil {
		return fmt.Errorf("release %s: %w", version, t.err)
	}
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	for _, top := range []string{path.Join(libDir, version), path.Join(shareDir, version)} {
		if err := addTree(tw, tmp, top[1:]); err != nil {
			return fmt.Errorf("release %s: %w", version, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("release %s: %w", version, err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("release %s: %w", version, err)
	}
	return nil
}

// addTree writes the tree at root/rel into tw under the name rel.
func addTree(tw *tar.Writer, root, rel string) error {
	return filepath.WalkDir(filepath.Join(root, rel), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		name, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name, h.Uid, h.Gid, h.Uname, h.Gname = filepath.ToSlash(name), 0, 0, "root", "root"
		if d.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
}
