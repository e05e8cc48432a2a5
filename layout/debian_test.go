package layout

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// ganetiPackages are Debian bookworm's Ganeti packages. What they ship (3.0.2-3, dpkg -c):
//
//   - ganeti: /etc/ganeti/ (a directory with two scripts), /usr/lib/ganeti/default ->
//     /etc/ganeti/lib, /usr/share/ganeti/default -> /etc/ganeti/share, and the commands in
//     /usr/sbin, /usr/bin and /usr/lib/ganeti as relative links through those default links.
//     It does NOT ship /etc/ganeti/lib or /etc/ganeti/share: its postinst creates them with
//     `ln -snf /usr/${target}/ganeti/3.0 /etc/ganeti/${target}` for target in lib and share.
//   - ganeti-3.0: the trees /usr/lib/ganeti/3.0 and /usr/share/ganeti/3.0, plus
//     /usr/share/ganeti/2.16/ganeti/utils/version.py (a diversion of the 2.16 package), a
//     share tree without a lib tree, so 2.16 is not an installed version.
var ganetiPackages = []string{"ganeti", "ganeti-3.0"}

// TestDebianGaneti reads and switches a real Debian ganeti installation, unpacked from the
// packages into a temporary root.
func TestDebianGaneti(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, deb := range debianPackages(t, ganetiPackages) {
		run(t, "", "dpkg-deb", "-x", deb, root)
	}
	ctx := context.Background()
	l, err := New("ganeti", Paths{LibDir: "/usr/lib", DataDir: "/usr/share", SysconfDir: "/etc", LocalstateDir: "/var"}, "minor", root)
	if err != nil {
		t.Fatal(err)
	}

	defaults := map[string]string{"usr/lib/ganeti/default": "/etc/ganeti/lib", "usr/share/ganeti/default": "/etc/ganeti/share"}
	for p, want := range defaults {
		if got := readlink(t, root, p); got != want {
			t.Fatalf("package ships %s -> %q, want %q", p, got, want)
		}
	}
	// Make the switch links as the postinst does, unless a package ships them.
	for _, target := range []string{"lib", "share"} {
		link := filepath.Join(root, "etc/ganeti", target)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink("/usr/"+target+"/ganeti/3.0", link); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(root, "usr/share/ganeti/2.16")); err != nil {
		t.Errorf("ganeti-3.0 no longer ships the share-only tree 2.16: %v", err)
	}

	if live, err := l.Live(ctx, OSFS{}); err != nil || live != "3.0" {
		t.Fatalf("Live = %q, %v, want 3.0", live, err)
	}
	assertInstalled(t, l, "3.0")
	if err := l.CheckInstalled(ctx, OSFS{}, mustParse(t, "3.0.2")); err != nil {
		t.Errorf("CheckInstalled(3.0.2) = %v", err)
	}
	if err := l.CheckInstalled(ctx, OSFS{}, mustParse(t, "2.16.2")); !IsNotInstalled(err) || !strings.Contains(err.Error(), "missing /usr/lib/ganeti/2.16") {
		t.Errorf("CheckInstalled(2.16.2) = %v, want 2.16 not installed, its lib tree missing", err)
	}

	// A second version, as its package would install it next to the first.
	for _, base := range []string{"usr/lib/ganeti", "usr/share/ganeti"} {
		run(t, "", "cp", "-a", filepath.Join(root, base, "3.0"), filepath.Join(root, base, "3.1"))
	}
	assertInstalled(t, l, "3.0", "3.1")
	for _, v := range []string{"3.1.0", "3.0.2"} {
		if err := switchTo(ctx, l, OSFS{}, v); err != nil {
			t.Fatalf("Switch(%s) = %v", v, err)
		}
		dir := l.DirOf(mustParse(t, v))
		for _, target := range []string{"lib", "share"} {
			if got, want := readlink(t, root, "etc/ganeti/"+target), "/usr/"+target+"/ganeti/"+dir; got != want {
				t.Errorf("after Switch(%s): /etc/ganeti/%s -> %q, want %q", v, target, got, want)
			}
		}
		if live, err := l.Live(ctx, OSFS{}); err != nil || live != dir {
			t.Errorf("after Switch(%s): Live = %q, %v, want %s", v, live, err, dir)
		}
		for p, want := range defaults {
			if got := readlink(t, root, p); got != want {
				t.Errorf("after Switch(%s): %s -> %q, want %q (untouched)", v, p, got, want)
			}
		}
		assertNoTemps(t, root, "etc/ganeti")
	}
	// The package's own files in /etc/ganeti are still there.
	for _, f := range []string{"kvm-ifup-os", "xen-ifup-os"} {
		if _, err := os.Stat(filepath.Join(root, "etc/ganeti", f)); err != nil {
			t.Errorf("switching lost /etc/ganeti/%s: %v", f, err)
		}
	}
}

// assertInstalled fails unless Installed returns want.
func assertInstalled(t *testing.T, l *Layout, want ...string) {
	t.Helper()
	got, err := l.Installed(context.Background(), OSFS{})
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("Installed = %q, %v, want %q", got, err, want)
	}
}

// prereq skips the test for a missing prerequisite, or fails it when CI is "true".
func prereq(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("missing prerequisite: "+format, args...)
	}
	t.Skipf("missing prerequisite: "+format, args...)
}

// run runs a command in dir and returns its standard output, failing the test on error.
func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	out, err := command(dir, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// command runs a command in dir with a time limit and returns its standard output; the
// error includes its standard error.
func command(dir, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// debianPackages returns the paths of the .deb files of pkgs, downloaded with apt-get into a
// cache directory kept between runs (keyed by file name, checked against apt's SHA256).
func debianPackages(t *testing.T, pkgs []string) []string {
	t.Helper()
	for _, tool := range []string{"apt-get", "dpkg-deb", "cp"} {
		if _, err := exec.LookPath(tool); err != nil {
			prereq(t, "%s: %v", tool, err)
		}
	}
	cache := debCacheDir(t)
	uris, err := printURIs(pkgs)
	if err != nil && os.Geteuid() == 0 {
		// No package lists yet (a fresh machine): fetch them once.
		if _, uerr := command("", "apt-get", "update", "-qq"); uerr == nil {
			uris, err = printURIs(pkgs)
		}
	}
	if err != nil {
		prereq(t, "apt cannot locate %s: %v", strings.Join(pkgs, " "), err)
	}
	var paths []string
	for _, u := range uris {
		p := filepath.Join(cache, u.file)
		if fileSHA256(p) != u.sha256 {
			download(t, cache, u)
		}
		paths = append(paths, p)
	}
	return paths
}

// debCacheDir returns the directory downloaded packages are kept in, creating it.
func debCacheDir(t *testing.T) string {
	t.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		base = "/var/cache"
	}
	dir := filepath.Join(base, "cutover-test", "debs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		prereq(t, "package cache: %v", err)
	}
	return dir
}

// debURI is one package file as apt-get download --print-uris names it.
type debURI struct {
	pkg, file, sha256 string
}

// printURIs asks apt which files it would download for pkgs, without downloading.
func printURIs(pkgs []string) ([]debURI, error) {
	// apt-get skips files already in its working directory: ask from an empty one.
	dir, err := os.MkdirTemp("", "cutover-apt-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out, err := command(dir, "apt-get", append([]string{"download", "--print-uris"}, pkgs...)...)
	if err != nil {
		return nil, err
	}
	var uris []debURI
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		// 'http://.../ganeti_3.0.2-3_all.deb' ganeti_3.0.2-3_all.deb 96212 SHA256:5d3b...
		f := strings.Fields(line)
		if len(f) != 4 || !strings.HasPrefix(f[3], "SHA256:") || filepath.Base(f[1]) != f[1] {
			return nil, fmt.Errorf("unexpected apt-get output line %q", line)
		}
		pkg, _, _ := strings.Cut(f[1], "_")
		uris = append(uris, debURI{pkg: pkg, file: f[1], sha256: strings.TrimPrefix(f[3], "SHA256:")})
	}
	if len(uris) != len(pkgs) {
		return nil, fmt.Errorf("apt-get names %d files for %d packages: %q", len(uris), len(pkgs), out)
	}
	return uris, nil
}

// download fetches u into cache, checks it and renames it into place.
func download(t *testing.T, cache string, u debURI) {
	t.Helper()
	tmp, err := os.MkdirTemp(cache, "download-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	// Root's apt drops privileges to _apt, which cannot write here; keep root for this call.
	if _, err := command(tmp, "apt-get", "download", "-q", "-o", "APT::Sandbox::User=root", u.pkg); err != nil {
		prereq(t, "download %s: %v", u.pkg, err)
	}
	got := filepath.Join(tmp, u.file)
	if sum := fileSHA256(got); sum != u.sha256 {
		t.Fatalf("downloaded %s has SHA256 %q, want %q", u.file, sum, u.sha256)
	}
	if err := os.Rename(got, filepath.Join(cache, u.file)); err != nil {
		t.Fatal(err)
	}
}

// fileSHA256 returns the hex SHA256 of the file at p, or "" if it cannot be read.
func fileSHA256(p string) string {
	data, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
