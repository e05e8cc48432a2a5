package backup

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
)

// Scope is what a backup covers and what a restore may write: the directories archived, the
// application's version trees that its links may point into, and where on disk it all is.
type Scope struct {
	// Base is the directory every absolute path of the scope and the archives lies under: ""
	// or "/" on a real host, a temporary root in tests. Link targets are read and written
	// without it, as a real installation has them.
	Base string
	// Roots are the directories archived and restored, absolute and clean, none inside
	// another: the application's state and its directory in sysconfdir. A root that is a
	// link is followed, once, on purpose.
	Roots []string
	// Links are the switch links, each with the directory whose version trees it must point
	// at: <sysconfdir>/<app>/lib -> <libdir>/<app>, <sysconfdir>/<app>/share -> <datadir>/<app>.
	Links map[string]string
	// Trees are the directories holding the application's version trees, <libdir>/<app> and
	// <datadir>/<app>: other links may point into a version tree below them.
	Trees []string
	// IsVersionDir reports whether a name is a VERSIONDIR of the application.
	IsVersionDir func(name string) bool
	// Exclude are paths below the roots that a backup leaves out (listed as skipped, with
	// everything below them); a restore leaves them as they are.
	Exclude []string
}

// maxPath bounds every path an archive holds and every link target.
const maxPath = 4096

// check refuses a scope that cannot describe an archive.
func (sc Scope) check() error {
	if len(sc.Roots) == 0 {
		return errors.New("backup: no directories to back up")
	}
	for i, r := range sc.Roots {
		if !cleanAbs(r) || r == "/" {
			return fmt.Errorf("backup: %q is not a clean absolute directory", r)
		}
		for _, o := range sc.Roots[i+1:] {
			if within(r, o) || within(o, r) {
				return fmt.Errorf("backup: %s and %s overlap", r, o)
			}
		}
	}
	for _, x := range sc.Exclude {
		inside := false
		for _, r := range sc.Roots {
			inside = inside || (x != r && within(x, r))
		}
		if !cleanAbs(x) || !inside {
			return fmt.Errorf("backup: excluded %q is not a clean absolute path below %s", x, strings.Join(sc.Roots, " or "))
		}
	}
	if sc.Base != "" && !cleanAbs(sc.Base) {
		return fmt.Errorf("backup: base %q is not a clean absolute directory", sc.Base)
	}
	return nil
}

// abs is where the absolute path p of the scope is on disk.
func (sc Scope) abs(p string) string {
	if sc.Base == "" || sc.Base == "/" {
		return p
	}
	return sc.Base + p
}

// rootOf returns the root p lies in (or is), or "".
func (sc Scope) rootOf(p string) string {
	for _, r := range sc.Roots {
		if within(p, r) {
			return r
		}
	}
	return ""
}

func (sc Scope) isRoot(p string) bool { return slices.Contains(sc.Roots, p) }

func (sc Scope) isVersionDir(name string) bool {
	return sc.IsVersionDir != nil && name != "" && name != "." && name != ".." && sc.IsVersionDir(name)
}

// CheckLink reports whether the symlink p (a path of the scope) may point at target, and
// why not. The rules, in order:
//
//   - target is not empty, holds no NUL and is at most 4096 bytes;
//   - no ".." follows a name in target: "a/../b" is resolved through a, wherever a leads,
//     so the text would not say where the link goes;
//   - a switch link (Links) must point at a version tree of its directory, exactly:
//     <libdir>/<app>/<VERSIONDIR>;
//   - an absolute target must lie in a version tree of the application
//     (<libdir>/<app>/<VERSIONDIR>/..., <datadir>/<app>/<VERSIONDIR>/...) or in one of the
//     roots;
//   - a relative target, resolved from the link's directory, must stay inside the root that
//     holds the link: its leading ".." may climb inside it, never out of it (the root may
//     be a link to another disk, where ".." would lead elsewhere).
func (sc Scope) CheckLink(p, target string) error {
	switch {
	case target == "" || strings.ContainsRune(target, 0) || len(target) > maxPath:
		return fmt.Errorf("%s -> %q: not a link target", p, target)
	case dotDotAfterName(target):
		return fmt.Errorf("%s -> %s: a '..' after a name is resolved through that name, wherever it leads", p, target)
	}
	resolved := path.Clean(target)
	if !path.IsAbs(target) {
		resolved = path.Join(path.Dir(p), target)
	}
	if tree, ok := sc.Links[p]; ok {
		if path.Dir(resolved) != tree || !sc.isVersionDir(path.Base(resolved)) {
			return fmt.Errorf("%s -> %s: a switch link must point at a version tree of this application, %s/<VERSIONDIR>", p, target, tree)
		}
		return nil
	}
	if path.IsAbs(target) {
		for _, t := range sc.Trees {
			rest, ok := strings.CutPrefix(resolved, t+"/")
			if ok && sc.isVersionDir(strings.SplitN(rest, "/", 2)[0]) {
				return nil
			}
		}
		if sc.rootOf(resolved) != "" {
			return nil
		}
		return fmt.Errorf("%s -> %s: leads out of the directories backed up and the application's version trees", p, target)
	}
	// Climb the leading ".." one at a time: never above the root, even to come back in.
	root, dir := sc.rootOf(p), path.Dir(p)
	for _, el := range strings.Split(target, "/") {
		if el == ".." {
			dir = path.Dir(dir)
		}
		if root == "" || !within(dir, root) {
			return fmt.Errorf("%s -> %s: leads out of %s", p, target, root)
		}
	}
	return nil
}

// dotDotAfterName reports whether target has a ".." element after a name, as in a/../b.
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

// within reports whether p is dir or lies below it; both are clean absolute paths.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// cleanAbs reports whether p is an absolute, clean path without control characters.
func cleanAbs(p string) bool {
	return path.IsAbs(p) && path.Clean(p) == p && !strings.ContainsFunc(p, isControl)
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }
