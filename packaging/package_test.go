// Package packaging holds what makes cutover's Debian package (build-deb.sh, the maintainer
// scripts, the boot-time resume) and the test that builds the package and checks it with
// Debian's tools.
package packaging

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// requireTool returns the path of a program the test needs. Without it the test is skipped,
// unless CI is "true": then it fails.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing (test/setup.sh installs it)", name)
		}
		t.Skipf("%s is missing (test/setup.sh installs it; with CI=true this is a failure)", name)
	}
	return path
}

// buildPackage returns the package $CUTOVER_DEB names (make test builds it once for every
// test), or builds one from this tree, once for all the tests of this package.
func buildPackage(t *testing.T) string {
	t.Helper()
	if deb := os.Getenv("CUTOVER_DEB"); deb != "" {
		// lintian reads only a real file, not make's link bin/cutover.deb to it.
		real, err := filepath.EvalSymlinks(deb)
		if err != nil {
			t.Fatalf("$CUTOVER_DEB: %v", err)
		}
		return real
	}
	requireTool(t, "dpkg-deb")
	deb, err := built()
	if err != nil {
		t.Fatal(err)
	}
	return deb
}

// buildDir holds the package built by this test process; TestMain removes it.
var buildDir string

var built = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(buildDir, "cutover")
	version, err := exec.Command("./version.sh").Output()
	if err != nil {
		return "", fmt.Errorf("version.sh: %v", err)
	}
	ldflags := "-s -w -X main.version=" + strings.TrimSpace(string(version))
	build := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", bin, "../cmd/cutover")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	var stderr strings.Builder
	cmd := exec.Command("./build-deb.sh", bin, buildDir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("build-deb.sh: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
})

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cutover-deb-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buildDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestPackageContents checks every file the package installs, with its mode and owner, and
// what it must not install.
func TestPackageContents(t *testing.T) {
	deb := buildPackage(t)
	out, err := exec.Command("dpkg-deb", "--contents", deb).Output()
	if err != nil {
		t.Fatalf("dpkg-deb --contents: %v", err)
	}
	got := map[string]string{} // path -> "mode owner"
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			t.Fatalf("dpkg-deb --contents line %q", line)
		}
		got[strings.TrimPrefix(f[5], ".")] = f[0] + " " + f[1]
	}
	want := map[string]string{
		"/usr/sbin/cutover": "-rwxr-xr-x root/root",
		"/etc/cutover/":     "drwx------ root/root",
		"/lib/systemd/system/cutover-resume.service":     "-rw-r--r-- root/root",
		"/usr/share/cutover/cutover.cron":                "-rw-r--r-- root/root",
		"/usr/share/man/man8/cutover.8.gz":               "-rw-r--r-- root/root",
		"/usr/share/bash-completion/completions/cutover": "-rw-r--r-- root/root",
		"/usr/share/zsh/vendor-completions/_cutover":     "-rw-r--r-- root/root",
		"/usr/share/doc/cutover/copyright":               "-rw-r--r-- root/root",
		"/usr/share/doc/cutover/changelog.gz":            "-rw-r--r-- root/root",
		"/usr/share/doc/cutover/README.md":               "-rw-r--r-- root/root",
		"/usr/share/doc/cutover/guide.md":                "-rw-r--r-- root/root",
		"/usr/share/doc/cutover/examples/ganeti.toml":    "-rw-r--r-- root/root",
		"/usr/share/doc/cutover/examples/demo.toml":      "-rw-r--r-- root/root",
	}
	for path, w := range want {
		if got[path] != w {
			t.Errorf("%s: %q, want %q", path, got[path], w)
		}
	}
	for path := range got {
		if strings.HasPrefix(path, "/etc/") && path != "/etc/" && path != "/etc/cutover/" {
			t.Errorf("the package ships %s: a live config or cron file is the operator's, or the maintainer scripts'", path)
		}
	}
	control, err := exec.Command("dpkg-deb", "--field", deb, "Package", "Version", "Architecture").Output()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^Package: cutover\nVersion: ([0-9][^\n]*)\nArchitecture: \S+$`).FindSubmatch(control)
	if m == nil {
		t.Fatalf("control fields:\n%s", control)
	}
	// The program says the version the package has.
	root := t.TempDir()
	if out, err := exec.Command("dpkg-deb", "--extract", deb, root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb --extract: %v\n%s", err, out)
	}
	out, err = exec.Command(filepath.Join(root, "usr/sbin/cutover"), "version").Output()
	if want := "cutover " + string(m[1]) + "\n"; err != nil || string(out) != want {
		t.Errorf("cutover version = %q (%v), want %q", out, err, want)
	}
}

// lintianWarnings are the warnings lintian may give, each with why it stays.
var lintianWarnings = map[string]string{
	// cutover's config holds the SSH identity paths and the commands it runs as root.
	"non-standard-dir-perm 0700 != 0755 [etc/cutover/]": "/etc/cutover is root's alone",
}

// TestLintian runs Debian's lintian on the package: no error, and no warning that is not
// explained in lintianWarnings.
func TestLintian(t *testing.T) {
	lintian := requireTool(t, "lintian")
	deb := buildPackage(t)
	out, err := exec.Command(lintian, "--tag-display-limit", "0", deb).CombinedOutput()
	t.Logf("lintian %s:\n%s", filepath.Base(deb), out)
	for _, line := range strings.Split(string(out), "\n") {
		tag, ok := strings.CutPrefix(line, "W: cutover: ")
		switch {
		case strings.HasPrefix(line, "E: "):
			t.Errorf("lintian error: %s", line)
		case ok && lintianWarnings[tag] == "":
			t.Errorf("lintian warning without a reason in lintianWarnings: %s", line)
		}
	}
	if err != nil {
		t.Errorf("lintian: %v", err)
	}
}

// TestResumeUnit checks the boot-time unit with systemd-analyze verify: the unit as the
// package installs it, its ExecStart pointed at the package's binary unpacked here.
func TestResumeUnit(t *testing.T) {
	analyze := requireTool(t, "systemd-analyze")
	deb := buildPackage(t)
	root := t.TempDir()
	if out, err := exec.Command("dpkg-deb", "--extract", deb, root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb --extract: %v\n%s", err, out)
	}
	unit, err := os.ReadFile(filepath.Join(root, "lib/systemd/system/cutover-resume.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Type=oneshot", "After=network-online.target", "Wants=network-online.target",
		"ExecStart=/usr/sbin/cutover upgrade --resume", "StandardOutput=journal", "TimeoutStartSec=infinity", "WantedBy=multi-user.target"} {
		if !strings.Contains(string(unit), want+"\n") {
			t.Errorf("cutover-resume.service lacks %q", want)
		}
	}
	local := filepath.Join(t.TempDir(), "cutover-resume.service")
	text := strings.ReplaceAll(string(unit), "/usr/sbin/cutover", filepath.Join(root, "usr/sbin/cutover"))
	if err := os.WriteFile(local, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", local).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
