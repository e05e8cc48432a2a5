package e2e

import (
	"strings"
	"testing"

	"github.com/cutover/cutover/test/cluster"
)

// TestPackage checks cutover's Debian package as the cluster's master has it: installed with
// dpkg -i, the files with their modes, the resume at boot by cron where systemd does not run
// (by the unit where it does), status naming it, and what dpkg -r and dpkg --purge leave.
func TestPackage(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{Nodes: 2})
	m := c.Master

	if got := must(t, c, m, "dpkg-query -W -f '${Status}' cutover"); got != "install ok installed" {
		t.Fatalf("dpkg-query cutover = %q, want install ok installed", got)
	}
	if v, got := must(t, c, m, "dpkg-query -W -f '${Version}' cutover"), must(t, c, m, "cutover version"); got != "cutover "+v {
		t.Errorf("cutover version = %q, want the package's version %s", got, v)
	}
	modes := map[string]string{
		"/usr/sbin/cutover":                              "755 root root",
		"/etc/cutover":                                   "700 root root",
		"/etc/cron.d/cutover":                            "644 root root",
		"/lib/systemd/system/cutover-resume.service":     "644 root root",
		"/usr/share/man/man8/cutover.8.gz":               "644 root root",
		"/usr/share/bash-completion/completions/cutover": "644 root root",
		"/usr/share/zsh/vendor-completions/_cutover":     "644 root root",
		"/usr/share/doc/cutover/examples/ganeti.toml":    "644 root root",
	}
	for path, want := range modes {
		if got := must(t, c, m, "stat -c '%a %U %G' "+path); got != want {
			t.Errorf("%s: %s, want %s", path, got, want)
		}
	}
	cron := must(t, c, m, "cat /etc/cron.d/cutover")
	for _, want := range []string{"\nPATH=/usr/sbin:/usr/bin:/sbin:/bin\n", "\n@reboot root [ -x /usr/sbin/cutover ] && /usr/sbin/cutover upgrade --resume"} {
		if !strings.Contains(cron, want) {
			t.Errorf("/etc/cron.d/cutover lacks %q:\n%s", want, cron)
		}
	}
	wants := "/etc/systemd/system/multi-user.target.wants/cutover-resume.service"
	if res := sh(t, c, m, "test -e "+wants+" -o -L "+wants); res.ExitCode == 0 {
		t.Errorf("without systemd the unit is enabled too: a run would be resumed twice")
	}
	status := cutover(t, c, "status", "--no-verify")
	if !strings.Contains(status.Stdout, "resume at boot: @reboot in /etc/cron.d/cutover\n") || strings.Contains(status.Stdout, "warning: nothing resumes") {
		t.Errorf("status does not name the cron resume:\n%s", status.Stdout)
	}

	// A run leaves its journal and backup in /var/lib/cutover.
	if res := cutover(t, c, "upgrade", "--to=1.1.0", "--yes"); res.ExitCode != 0 {
		t.Fatalf("upgrade: exit %d", res.ExitCode)
	}
	state := must(t, c, m, "cd /var/lib/cutover && ls -d journal.db backups/*.tar.gz | sort | sha256sum")

	// Where systemd runs, the package enables the unit and removes its cron file; where it
	// no longer runs, the other way round. Never both.
	// The environment is dpkg's, which deb-systemd-helper asks for.
	postinst := "DPKG_MAINTSCRIPT_PACKAGE=cutover DPKG_MAINTSCRIPT_NAME=postinst /var/lib/dpkg/info/cutover.postinst configure </dev/null"
	must(t, c, m, "mkdir -p /run/systemd/system && "+postinst)
	if res := sh(t, c, m, "test -L "+wants+" && ! test -e /etc/cron.d/cutover"); res.ExitCode != 0 {
		t.Errorf("with systemd: want the unit enabled and no cron file:\n%s", must(t, c, m, "ls -l /etc/cron.d "+wants+" 2>&1 || true"))
	}
	if out := cutover(t, c, "status", "--no-verify").Stdout; !strings.Contains(out, "resume at boot: cutover-resume.service\n") {
		t.Errorf("status with the unit enabled:\n%s", out)
	}
	must(t, c, m, "rmdir /run/systemd/system && "+postinst)
	if res := sh(t, c, m, "! test -L "+wants+" && grep -q '^@reboot' /etc/cron.d/cutover"); res.ExitCode != 0 {
		t.Errorf("without systemd again: want the cron file back and the unit disabled")
	}

	// dpkg -r removes the program and its resume at boot, and keeps the state and the config.
	if res := sh(t, c, m, "DEBIAN_FRONTEND=noninteractive dpkg -r cutover </dev/null"); res.ExitCode != 0 {
		t.Fatalf("dpkg -r cutover: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	for _, gone := range []string{"/usr/sbin/cutover", "/etc/cron.d/cutover", "/lib/systemd/system/cutover-resume.service"} {
		if res := sh(t, c, m, "test -e "+gone); res.ExitCode == 0 {
			t.Errorf("dpkg -r left %s", gone)
		}
	}
	if got := must(t, c, m, "cd /var/lib/cutover && ls -d journal.db backups/*.tar.gz | sort | sha256sum"); got != state {
		t.Errorf("dpkg -r changed /var/lib/cutover")
	}
	must(t, c, m, "test -f /etc/cutover/cutover.toml")

	// dpkg --purge asks nothing and removes only what the package made.
	if res := sh(t, c, m, "DEBIAN_FRONTEND=noninteractive dpkg --purge cutover </dev/null"); res.ExitCode != 0 {
		t.Fatalf("dpkg --purge cutover: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if got := must(t, c, m, "cd /var/lib/cutover && ls -d journal.db backups/*.tar.gz | sort | sha256sum"); got != state {
		t.Errorf("dpkg --purge changed /var/lib/cutover")
	}
	must(t, c, m, "test -f /etc/cutover/cutover.toml")
	if got := sh(t, c, m, "dpkg-query -W -f '${Status}' cutover 2>/dev/null").Stdout; strings.Contains(got, "installed") && !strings.Contains(got, "not-installed") {
		t.Errorf("after --purge dpkg-query says %q", got)
	}
}
