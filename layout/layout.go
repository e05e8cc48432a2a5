package layout

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"strings"
)

// Paths are the installation directories, as ./configure names them. Each must be an
// absolute, clean path.
type Paths struct {
	LibDir        string // arch-dependent trees live in <LibDir>/<app>/<VERSIONDIR>
	DataDir       string // arch-independent trees live in <DataDir>/<app>/<VERSIONDIR>
	SysconfDir    string // the links live in <SysconfDir>/<app>/{lib,share}
	LocalstateDir string // the application's state; layout validates it but never touches it
}

// Layout names the trees and links of one application's side-by-side installation.
// It holds no connection: every method that reads or writes takes the node's FS.
type Layout struct {
	app   string
	paths Paths
	full  bool   // version_dirs = "full": VERSIONDIR is the whole version
	root  string // prefix of every path touched; "" on a real node
}

var appPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._+-]*$`)

// New returns the Layout of app installed under paths. versionDirs is "full" (VERSIONDIR is
// the whole version, 1.2.0) or "minor" (MAJOR.MINOR, 1.2; Ganeti's default). root is "" or "/"
// on a real node; any other absolute directory is a prefix for every path layout touches (tests,
// chroots), while the link targets it writes and reads stay root-less, as a real installation
// has them.
func New(app string, paths Paths, versionDirs string, root string) (*Layout, error) {
	if !appPattern.MatchString(app) {
		return nil, fmt.Errorf("invalid application name %q: want lower-case letters, digits and ._+- starting with a letter or digit", app)
	}
	for _, p := range []struct{ name, value string }{
		{"libdir", paths.LibDir},
		{"datadir", paths.DataDir},
		{"sysconfdir", paths.SysconfDir},
		{"localstatedir", paths.LocalstateDir},
	} {
		if err := checkDir(p.value); err != nil {
			return nil, fmt.Errorf("invalid %s: %w", p.name, err)
		}
	}
	l := &Layout{app: app, paths: paths}
	switch versionDirs {
	case "full":
		l.full = true
	case "minor":
	default:
		return nil, fmt.Errorf("invalid version_dirs %q: want \"full\" or \"minor\"", versionDirs)
	}
	if root != "" && root != "/" {
		if err := checkDir(root); err != nil {
			return nil, fmt.Errorf("invalid root: %w", err)
		}
		l.root = root
	}
	return l, nil
}

// checkDir accepts an absolute, clean path without control characters.
func checkDir(p string) error {
	if !path.IsAbs(p) || path.Clean(p) != p || strings.ContainsFunc(p, isControl) {
		return fmt.Errorf("%q is not an absolute, clean path", p)
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// ValidVersion reports whether v is a version cutover accepts, as ParseVersion parses it:
// MAJOR.MINOR.PATCH or MAJOR.MINOR, numbers without leading zeros, with an optional
// -PRERELEASE of dot-separated [0-9A-Za-z-] identifiers.
func ValidVersion(v string) error {
	_, err := ParseVersion(v)
	return err
}

// DirOf returns the directory name of v's trees (VERSIONDIR): the version itself with
// version_dirs "full", MAJOR.MINOR with "minor". A VERSIONDIR read by Live parses to a
// version whose DirOf is that same name.
func (l *Layout) DirOf(v Version) string { return v.Dir(l.full) }

// Trees returns the root-less absolute paths of v's two trees:
// <libdir>/<app>/<VERSIONDIR> and <datadir>/<app>/<VERSIONDIR>.
func (l *Layout) Trees(v Version) (lib, share string) {
	dir := l.DirOf(v)
	return path.Join(l.libBase(), dir), path.Join(l.shareBase(), dir)
}

// Bases returns the root-less paths of the directories that hold the version trees:
// <libdir>/<app> and <datadir>/<app>.
func (l *Layout) Bases() (lib, share string) { return l.libBase(), l.shareBase() }

// LibLink returns the root-less path of the link to the live arch-dependent tree,
// <sysconfdir>/<app>/lib.
func (l *Layout) LibLink() string { return path.Join(l.paths.SysconfDir, l.app, "lib") }

// ShareLink returns the root-less path of the link to the live arch-independent tree,
// <sysconfdir>/<app>/share.
func (l *Layout) ShareLink() string { return path.Join(l.paths.SysconfDir, l.app, "share") }

// libBase is <libdir>/<app>, the parent of every arch-dependent tree.
func (l *Layout) libBase() string { return path.Join(l.paths.LibDir, l.app) }

// shareBase is <datadir>/<app>, the parent of every arch-independent tree.
func (l *Layout) shareBase() string { return path.Join(l.paths.DataDir, l.app) }

// at returns the path on the node's FS of the root-less path p.
func (l *Layout) at(p string) string {
	if l.root == "" {
		return p
	}
	return l.root + p
}

// link is one of the two switch links and the directory its targets must live in.
type link struct {
	name string // "lib" or "share"
	path string // root-less path of the link
	base string // root-less parent of the trees it may point to
}

// links returns the two links in the order Switch changes them.
func (l *Layout) links() []link {
	return []link{
		{name: "lib", path: l.LibLink(), base: l.libBase()},
		{name: "share", path: l.ShareLink(), base: l.shareBase()},
	}
}

// ctxErr returns ctx's error, wrapped to name the operation it interrupted.
func ctxErr(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}
