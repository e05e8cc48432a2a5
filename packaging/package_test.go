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
	build := exec.Command("go", "build", "-tags", "release", "-trimpath", "-ldflags", ldflags, "-o", bin, "../cmd/cutover")
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
		// Every directory, the root entry ./ included, is what dpkg gives a directory it
		// creates: 0755 root:root. A ./ of another mode changes / itself on install.
		if strings.HasPrefix(f[0], "d") && f[0]+" "+f[1] != "drwxr-xr-x root/root" {
			t.Errorf("directory %s: %s %s, want drwxr-xr-x root/root", f[5], f[0], f[1])
		}
		if !strings.HasPrefix(f[0], "d") && f[1] != "root/root" {
			t.Errorf("%s: owned by %s, want root/root", f[5], f[1])
		}
	}
	if got["/"] == "" {
		t.Errorf("the data archive has no root entry ./:\n%s", out)
	}
	want := map[string]string{
		"/usr/sbin/cutover": "-rwxr-xr-x root/root",
		"/etc/cutover/":     "drwxr-xr-x root/root",
		"/lib/systemd/system/cutover-resume.service":        "-rw-r--r-- root/root",
		"/usr/share/cutover/cutover.cron":                   "-rw-r--r-- root/root",
		"/usr/share/man/man8/cutover.8.gz":                  "-rw-r--r-- root/root",
		"/usr/share/bash-completion/completions/cutover":    "-rw-r--r-- root/root",
		"/usr/share/zsh/vendor-completions/_cutover":        "-rw-r--r-- root/root",
		"/usr/share/doc/cutover/copyright":                  "-rw-r--r-- root/root",
		"/usr/share/doc/cutover/changelog.gz":               "-rw-r--r-- root/root",
		"/usr/share/doc/cutover/README.md":                  "-rw-r--r-- root/root",
		"/usr/share/doc/cutover/guide.md":                   "-rw-r--r-- root/root",
		"/usr/share/doc/cutover/configuration.md":           "-rw-r--r-- root/root",
		"/usr/share/doc/cutover/migrations.md":              "-rw-r--r-- root/root",
		"/usr/share/doc/cutover/examples/demo-rolling.toml": "-rw-r--r-- root/root",
		"/usr/share/doc/cutover/examples/ganeti.toml":       "-rw-r--r-- root/root",
		"/usr/share/doc/cutover/examples/demo.toml":         "-rw-r--r-- root/root",
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

// TestPackageDocLinks: every relative link of the Markdown documents the package installs
// names a file or directory the package installs.
func TestPackageDocLinks(t *testing.T) {
	deb := buildPackage(t)
	root := t.TempDir()
	if out, err := exec.Command("dpkg-deb", "--extract", deb, root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb --extract: %v\n%s", err, out)
	}
	docs, err := filepath.Glob(filepath.Join(root, "usr/share/doc/cutover/*.md"))
	if err != nil || len(docs) < 4 {
		t.Fatalf("the package installs %d documents (%v), want README.md, guide.md and the others", len(docs), err)
	}
	link := regexp.MustCompile(`\]\(([^)\s#]+)[^)]*\)`)
	code := regexp.MustCompile("`[^`]*`")
	for _, doc := range docs {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		fenced := false
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fenced = !fenced
			}
			if fenced {
				continue
			}
			for _, m := range link.FindAllStringSubmatch(code.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`).MatchString(target) {
					continue
				}
				p := filepath.Join(filepath.Dir(doc), target)
				if _, err := os.Stat(p); err != nil || !strings.HasPrefix(p, root+"/") {
					t.Errorf("the installed %s links to %s, which the package does not install", strings.TrimPrefix(doc, root), target)
				}
			}
		}
	}
}

// lintianWarnings are the warnings lintian may give, each with why it stays.
var lintianWarnings = map[string]string{}

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
		"ExecStart=/usr/sbin/cutover upgrade --resume", "StandardOutput=journal", "WantedBy=multi-user.target",
		// The daemons the resumed run starts outlive the unit.
		"KillMode=process"} {
		if !strings.Contains(string(unit), "\n"+want+"\n") {
			t.Errorf("cutover-resume.service lacks %q", want)
		}
	}
	// A bounded start: a number of seconds, minutes, hours or days, never infinity.
	if m := regexp.MustCompile(`(?m)^TimeoutStartSec=([0-9]+(s|min|h|d)?)$`).FindStringSubmatch(string(unit)); m == nil {
		t.Errorf("cutover-resume.service has no bounded TimeoutStartSec:\n%s", unit)
	}
	// Nothing that would keep cutover from writing /etc/<app>, /usr/lib/<app>, /usr/share/<app>
	// and the state, or from reaching the nodes.
	for _, never := range []string{"ProtectSystem=", "ProtectHome=yes", "ReadOnlyPaths=/", "PrivateNetwork=yes", "IPAddressDeny="} {
		if strings.Contains(string(unit), "\n"+never) {
			t.Errorf("cutover-resume.service has %q: cutover must write the application's trees and reach its nodes", never)
		}
	}
	// Nothing the application's daemons, started by the resumed run, would inherit.
	for _, never := range []string{"PrivateTmp=", "NoNewPrivileges=", "ProtectKernelTunables=", "ProtectKernelModules=",
		"ProtectKernelLogs=", "ProtectControlGroups=", "RestrictRealtime=", "SystemCallFilter=", "SystemCallArchitectures=",
		"LockPersonality=", "MemoryDenyWriteExecute=", "PrivateDevices=", "RestrictNamespaces="} {
		if strings.Contains(string(unit), "\n"+never) {
			t.Errorf("cutover-resume.service has %q: the daemons the resumed run starts would inherit it", never)
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

// TestCronLog runs the package's @reboot line with a stand-in for cutover, as cron hands it to
// the shell (a "\%" read as "%") and as a cron that passes it unchanged: every line of the
// resume's output, errors and a last line without a newline included, is appended to the log
// behind its RFC 3339 UTC time; a link in the log's place is never written through, and the
// resume still runs to its end.
func TestCronLog(t *testing.T) {
	data, err := os.ReadFile("cutover.cron")
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(l, "@reboot root "); ok {
			line = rest
		}
	}
	if line == "" || !strings.Contains(line, "/var/log/cutover-resume.log") || !strings.Contains(line, "oflag=append,nofollow") {
		t.Fatalf("cutover.cron has no @reboot line appending to /var/log/cutover-resume.log with O_NOFOLLOW:\n%s", data)
	}
	asCron, err := cronCommand(line)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	stub := filepath.Join(dir, "cutover")
	done := filepath.Join(dir, "done")
	// Much output, so that a reader that stopped would stop the stand-in too.
	script := "#!/bin/sh\necho \"resumed: $*\"\nhead -c 300000 /dev/zero | tr '\\000' x\necho\nprintf '%s\\n' 'cutover: node3: 100% \\n not a newline' >&2\ntouch " + done + "\nprintf 'last'\n"
	if err := os.WriteFile(stub, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "cutover-resume.log")
	stamped := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ (.*)$`)
	for _, tt := range []struct{ name, line string }{{"as cron passes it", asCron}, {"unchanged", line}} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := strings.NewReplacer("/usr/sbin/cutover", stub, "/var/log/cutover-resume.log", log).Replace(tt.line)
			run := func() {
				t.Helper()
				os.Remove(done)
				// cron runs the line with /bin/sh.
				if out, err := exec.Command("/bin/sh", "-c", cmd).CombinedOutput(); err != nil && len(out) > 0 {
					t.Logf("the @reboot line: %v\n%s", err, out)
				}
				if _, err := os.Stat(done); err != nil {
					t.Errorf("the resume did not run to its end: %v", err)
				}
			}

			os.Remove(log)
			os.WriteFile(log, []byte("earlier\n"), 0o644)
			run()
			got, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
			want := []string{"resumed: upgrade --resume", strings.Repeat("x", 300000), `cutover: node3: 100% \n not a newline`, "last"}
			if len(lines) != len(want)+1 || lines[0] != "earlier" {
				t.Fatalf("the log after a resume: %.80q (%d lines); want the earlier line and %d lines appended", got, len(lines), len(want))
			}
			for i, w := range want {
				m := stamped.FindStringSubmatch(lines[i+1])
				if m == nil || m[1] != w {
					t.Errorf("log line %d = %.80q, want an RFC 3339 UTC time and %.40q", i+2, lines[i+1], w)
				}
			}

			target := filepath.Join(dir, "shadow")
			if err := os.WriteFile(target, []byte("root's\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			os.Remove(log)
			if err := os.Symlink(target, log); err != nil {
				t.Fatal(err)
			}
			run()
			if got, _ := os.ReadFile(target); string(got) != "root's\n" {
				t.Errorf("the @reboot line wrote through a link in the log's place: %.60q", got)
			}
			if fi, err := os.Lstat(log); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Errorf("the log's link was replaced: %v, %v", fi, err)
			}
		})
	}
}

// cronCommand returns the command of a crontab line as Debian's cron hands it to the shell:
// "\%" becomes "%" and "\\" becomes "\". A bare "%" would end the command there (what
// follows becomes its input), so it is an error.
func cronCommand(line string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && (line[i+1] == '%' || line[i+1] == '\\'):
			b.WriteByte(line[i+1])
			i++
		case line[i] == '%':
			return "", fmt.Errorf("the @reboot line has a bare %% at byte %d: cron ends the command there; write \\%%", i)
		default:
			b.WriteByte(line[i])
		}
	}
	return b.String(), nil
}

// TestPackageIsTheReleaseBuild: the binary the package ships is the release build, which has
// no test hooks (crash points, stage holds; cmd/cutover's TestReleaseIgnoresTestHooks runs it
// with them asked for).
func TestPackageIsTheReleaseBuild(t *testing.T) {
	deb := buildPackage(t)
	root := t.TempDir()
	if out, err := exec.Command("dpkg-deb", "--extract", deb, root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb --extract: %v\n%s", err, out)
	}
	out, err := exec.Command("go", "version", "-m", filepath.Join(root, "usr/sbin/cutover")).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)^\s*build\s+-tags=(.*,)?release(,.*)?$`).Match(out) {
		t.Errorf("the package's cutover is not built with the release tag:\n%s", out)
	}
}
