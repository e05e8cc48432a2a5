package layout

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// Live returns the live VERSIONDIR of the node, read from both links. A link target may be
// absolute or relative; a relative one is resolved against the link's directory, as the
// kernel does. Live does not check that the tree it names exists (CheckInstalled does).
//
// Errors: IsNotSideBySide when a link is missing, is not a symlink, or does not point to a
// version directory directly inside <libdir>/<app>/ (resp. <datadir>/<app>/); IsDisagree when
// the two links point to different versions. Each message names the link and what it found;
// when both links are wrong, both errors are joined.
func (l *Layout) Live(ctx context.Context, fsys FS) (string, error) {
	var dirs []string
	var errs []error
	for _, lk := range l.links() {
		if err := ctxErr(ctx, "read "+lk.path); err != nil {
			return "", err
		}
		dir, err := l.readLink(fsys, lk)
		dirs = append(dirs, dir)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	if dirs[0] != dirs[1] {
		return "", newError(kindDisagree, "%s points to version %s but %s points to version %s",
			l.LibLink(), dirs[0], l.ShareLink(), dirs[1])
	}
	return dirs[0], nil
}

// readLink returns the VERSIONDIR that lk points to.
func (l *Layout) readLink(fsys FS, lk link) (string, error) {
	fi, err := fsys.Lstat(l.at(lk.path))
	if errors.Is(err, fs.ErrNotExist) {
		return "", newError(kindNotSideBySide, "%s is missing: not a side-by-side installation", lk.path)
	}
	if err != nil {
		return "", fmt.Errorf("inspect %s: %w", lk.path, err)
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		return "", newError(kindNotSideBySide, "%s is %s, not a symlink: not a side-by-side installation",
			lk.path, describe(fi))
	}
	target, err := fsys.Readlink(l.at(lk.path))
	if err != nil {
		return "", fmt.Errorf("read link %s: %w", lk.path, err)
	}
	if dotDotAfterName(target) {
		return "", newError(kindNotSideBySide,
			"%s points to %q: a '..' after a directory name is resolved through that directory, which may itself be a link, so the text does not say where the link leads: not a side-by-side installation",
			lk.path, target)
	}
	resolved := target
	if !path.IsAbs(resolved) {
		resolved = path.Join(path.Dir(lk.path), resolved)
	}
	parent, dir := path.Split(path.Clean(resolved))
	if parent != lk.base+"/" || !l.IsVersionDir(dir) {
		return "", newError(kindNotSideBySide,
			"%s points to %q, not to a version directory in %s/ (version_dirs %s): not a side-by-side installation",
			lk.path, target, lk.base, l.mode())
	}
	return dir, nil
}

// dotDotAfterName reports whether target has a ".." element after a directory name, as in
// /usr/lib/app/x/../1.0: the kernel resolves it through x, wherever x leads, while a lexical
// clean would drop x. Leading ".." elements of a relative target climb from the link's own
// directory and are resolved as written.
func dotDotAfterName(target string) bool {
	named := false
	for _, el := range strings.Split(target, "/") {
		switch el {
		case "", ".":
		case "..":
			if named {
				return true
			}
		default:
			named = true
		}
	}
	return false
}

// describe names the kind of file fi is, for messages.
func describe(fi fs.FileInfo) string {
	switch {
	case fi.IsDir():
		return "a directory"
	case fi.Mode().IsRegular():
		return "a regular file"
	default:
		return fmt.Sprintf("a special file (%s)", fi.Mode().Type())
	}
}

// IsVersionDir reports whether name is a VERSIONDIR in this layout's version_dirs mode.
func (l *Layout) IsVersionDir(name string) bool {
	v, err := ParseVersion(name)
	return err == nil && l.DirOf(v) == name
}

// mode returns the version_dirs setting, for messages.
func (l *Layout) mode() string {
	if l.full {
		return "full"
	}
	return "minor"
}

// Installed returns the VERSIONDIRs installed on the node: those for which both trees exist
// as directories. Entries that are not VERSIONDIRs in this layout's version_dirs mode (such
// as "default", or "1.2.0" with "minor") are ignored. The result is sorted by version, so
// "1.10" comes after "1.9". A node without <libdir>/<app> has none installed.
func (l *Layout) Installed(ctx context.Context, fsys FS) ([]string, error) {
	libs, err := l.versionDirs(ctx, fsys, l.libBase())
	if err != nil {
		return nil, err
	}
	shares, err := l.versionDirs(ctx, fsys, l.shareBase())
	if err != nil {
		return nil, err
	}
	var installed []string
	for _, dir := range libs {
		if !slices.Contains(shares, dir) {
			continue
		}
		// A VERSIONDIR parses: versionDirs lists only names IsVersionDir accepts.
		v, _ := ParseVersion(dir)
		err := l.CheckInstalled(ctx, fsys, v)
		if IsNotInstalled(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		installed = append(installed, dir)
	}
	SortVersionDirs(installed)
	return installed, nil
}

// SortVersionDirs sorts VERSIONDIRs by version (go-version order), then by spelling, so
// "1.10" comes after "1.9"; each name is parsed once, and a name that is no version is
// ordered by its spelling.
func SortVersionDirs(names []string) {
	versions := make(map[string]Version, len(names))
	for _, name := range names {
		if v, err := ParseVersion(name); err == nil {
			versions[name] = v
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		va, okA := versions[a]
		vb, okB := versions[b]
		if okA && okB {
			if c := va.Compare(vb); c != 0 {
				return c
			}
		}
		return strings.Compare(a, b)
	})
}

// versionDirs returns the names in dir that are VERSIONDIRs; a missing dir has none.
func (l *Layout) versionDirs(ctx context.Context, fsys FS, dir string) ([]string, error) {
	if err := ctxErr(ctx, "list "+dir); err != nil {
		return nil, err
	}
	entries, err := fsys.ReadDir(l.at(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var names []string
	for _, e := range entries {
		if l.IsVersionDir(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// CheckInstalled returns nil if both trees of version v exist as directories (symlinks to
// directories count). Otherwise the error satisfies IsNotInstalled and names the missing
// tree or trees; an error reading the node does not.
func (l *Layout) CheckInstalled(ctx context.Context, fsys FS, v Version) error {
	lib, share := l.Trees(v)
	var missing []string
	for _, tree := range []string{lib, share} {
		if err := ctxErr(ctx, "inspect "+tree); err != nil {
			return err
		}
		fi, err := fsys.Stat(l.at(tree))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			missing = append(missing, tree)
		case err != nil:
			return fmt.Errorf("inspect %s: %w", tree, err)
		case !fi.IsDir():
			missing = append(missing, tree+" (not a directory)")
		}
	}
	if len(missing) > 0 {
		return newError(kindNotInstalled, "%s %s is not installed: missing %s",
			l.app, v, strings.Join(missing, " and "))
	}
	return nil
}
