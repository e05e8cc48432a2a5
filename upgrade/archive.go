package upgrade

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Manifest describes a backup archive; it is the archive's first entry, cutover-manifest.json.
type Manifest struct {
	App     string            `json:"app"`
	Run     uint64            `json:"run"`
	From    string            `json:"from"`
	To      string            `json:"to"`
	Created time.Time         `json:"created"`
	Links   map[string]string `json:"links"`
	Files   []ManifestFile    `json:"files"`
}

// ManifestFile is one archived file with its checksum.
type ManifestFile struct {
	Path   string      `json:"path"`
	Size   int64       `json:"size"`
	Mode   fs.FileMode `json:"mode"`
	SHA256 string      `json:"sha256"`
}

// ManifestName is the name of the manifest inside an archive.
const ManifestName = "cutover-manifest.json"

// WriteBackup archives dirs (absolute; a missing one is skipped) into a new tar.gz in dir,
// named after m, mode 0600. It writes a temporary file, syncs it and renames it, so an
// archive that exists is complete. It returns the archive's path.
func WriteBackup(ctx context.Context, dir string, dirs []string, m Manifest) (string, error) {
	name := fmt.Sprintf("%s-%s-to-%s-%s.tar.gz", m.App, m.From, m.To, m.Created.UTC().Format(backupStamp))
	return writeArchive(ctx, dir, name, dirs, m)
}

// backupStamp is the layout of the UTC time that ends every archive's name.
const backupStamp = "20060102T150405Z"

// writeArchive is WriteBackup with the archive's file name given.
func writeArchive(ctx context.Context, dir, name string, dirs []string, m Manifest) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	final := filepath.Join(dir, name)
	type entry struct {
		path string
		info fs.FileInfo
	}
	var entries []entry
	for _, root := range dirs {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) && p == root {
					return filepath.SkipDir
				}
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			entries = append(entries, entry{p, info})
			return nil
		})
		if err != nil {
			return "", fmt.Errorf("backup: read %s: %w", root, err)
		}
	}
	// Checksum the regular files first: the manifest leads the archive.
	for _, e := range entries {
		if !e.info.Mode().IsRegular() {
			continue
		}
		sum, err := fileSum(e.path)
		if err != nil {
			return "", fmt.Errorf("backup: %w", err)
		}
		m.Files = append(m.Files, ManifestFile{Path: e.path, Size: e.info.Size(), Mode: e.info.Mode().Perm(), SHA256: sum})
	}
	tmp, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return "", fmt.Errorf("backup: %w", err)
	}
	gz := gzip.NewWriter(tmp)
	tw := tar.NewWriter(gz)
	err = func() error {
		mdata, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: ManifestName, Mode: 0o600, Size: int64(len(mdata)), ModTime: m.Created, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(mdata); err != nil {
			return err
		}
		for _, e := range entries {
			link := ""
			if e.info.Mode()&fs.ModeSymlink != 0 {
				if link, err = os.Readlink(e.path); err != nil {
					return err
				}
			}
			hdr, err := tar.FileInfoHeader(e.info, link)
			if err != nil {
				return err
			}
			hdr.Name = strings.TrimPrefix(e.path, "/")
			if e.info.IsDir() {
				hdr.Name += "/"
			}
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			if e.info.Mode().IsRegular() {
				if err := copyFile(tw, e.path, e.info.Size()); err != nil {
					return err
				}
			}
		}
		if err := tw.Close(); err != nil {
			return err
		}
		return gz.Close()
	}()
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), final)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return "", fmt.Errorf("backup: write %s: %w", final, err)
	}
	return final, nil
}

// maxManifestSize bounds the manifest ReadManifest accepts: about 64 bytes per archived file
// plus its path, so room for hundreds of thousands of files.
const maxManifestSize = 64 << 20

// ReadManifest reads the manifest of the backup archive at path, its first entry, without
// reading the rest of the archive. It checks that the manifest is there and parses, not the
// files' checksums.
func ReadManifest(path string) (Manifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return Manifest{}, fmt.Errorf("read manifest: %w", err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return Manifest{}, fmt.Errorf("read manifest of %s: %w", path, err)
	}
	m, err := readManifest(tar.NewReader(gz))
	if err != nil {
		return Manifest{}, fmt.Errorf("read manifest of %s: %w", path, err)
	}
	return m, nil
}

// readManifest reads the manifest from the first entry of tr.
func readManifest(tr *tar.Reader) (Manifest, error) {
	hdr, err := tr.Next()
	if err != nil {
		return Manifest{}, fmt.Errorf("not a backup archive: %w", err)
	}
	if hdr.Name != ManifestName || hdr.Typeflag != tar.TypeReg {
		return Manifest{}, fmt.Errorf("not a backup archive: the first entry is %q, not %s", hdr.Name, ManifestName)
	}
	if hdr.Size > maxManifestSize {
		return Manifest{}, fmt.Errorf("%s is %d bytes, more than the %d a manifest may have", ManifestName, hdr.Size, maxManifestSize)
	}
	data, err := io.ReadAll(tr)
	if err != nil {
		return Manifest{}, fmt.Errorf("%s: %w", ManifestName, err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return Manifest{}, fmt.Errorf("%s: %w", ManifestName, err)
	}
	return m, nil
}

// copyFile copies exactly size bytes: a file that changes while it is archived is an error.
func copyFile(w io.Writer, path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(w, io.LimitReader(f, size))
	if err == nil && n != size {
		err = fmt.Errorf("%s changed while it was archived", path)
	}
	return err
}

func fileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// PruneBackups removes the oldest archives of app in dir beyond keep, but never the newest
// archive taken from the live version. It returns the removed paths.
func PruneBackups(dir, app string, keep int, live string) ([]string, error) {
	matches, err := filepath.Glob(filepath.Join(dir, app+"-*-to-*.tar.gz"))
	if err != nil {
		return nil, err
	}
	// Names end in a UTC time stamp: newest first by that, then by name.
	sort.Slice(matches, func(i, j int) bool { return stamp(matches[i]) > stamp(matches[j]) })
	protect := ""
	for _, p := range matches {
		if strings.HasPrefix(filepath.Base(p), app+"-"+live+"-to-") {
			protect = p
			break
		}
	}
	var removed []string
	var errs []error
	for i, p := range matches {
		if i < keep || p == protect {
			continue
		}
		if err := os.Remove(p); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}

func stamp(p string) string {
	base := strings.TrimSuffix(filepath.Base(p), ".tar.gz")
	if i := strings.LastIndex(base, "-"); i >= 0 {
		return base[i+1:] + base
	}
	return base
}
