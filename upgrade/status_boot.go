package upgrade

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cutover/cutover/upgrade/config"
)

// cronDaemons are where cron daemons install their programs, relative to the root: Debian's
// cron, cronie, and busybox's crond applet linked under its name.
var cronDaemons = []string{"usr/sbin/cron", "usr/sbin/crond", "sbin/crond", "usr/bin/crond", "bin/crond", "usr/sbin/cronie"}

// cronUnits are the systemd units of those daemons, and cronScripts their System V init
// scripts.
var (
	cronUnits   = []string{"cron.service", "crond.service", "cronie.service"}
	cronScripts = []string{"cron", "crond", "cronie"}
)

// bootProbe looks at a host's files to tell whether what would resume a run at boot can run
// there. etc is the host's configuration directory (the configured sysconfdir, where the
// unit's enablement and the crontab files were found); root is the host's root directory,
// "/" on a real host, beneath which the daemons' programs and /run are read.
type bootProbe struct {
	etc, root string
}

// hostBootProbe probes the host where the boot resume was looked for: its configuration
// directory is the configured sysconfdir, and its root the directory that holds it when that
// is named etc ("/" for /etc), otherwise "/".
func hostBootProbe(paths config.PathsConfig) bootProbe {
	root := "/"
	if filepath.Base(paths.SysconfDir) == "etc" {
		root = filepath.Dir(paths.SysconfDir)
	}
	return bootProbe{etc: paths.SysconfDir, root: root}
}

// problems says what keeps each way of b from resuming a run at boot, each with what to do;
// none when everything it needs is there. A crontab line needs a cron daemon installed and
// started at boot (its systemd unit enabled where systemd runs, its init script elsewhere);
// the systemd unit needs its unit file and systemd running.
func (p bootProbe) problems(b BootResume) []string {
	var out []string
	if b.Unit {
		out = append(out, p.unitProblems()...)
	}
	if len(b.Cron) > 0 {
		if msg := p.cronProblem(b.Cron); msg != "" {
			out = append(out, fmt.Sprintf("the @reboot line in %s does not run at boot: %s", strings.Join(b.Cron, ", "), msg))
		}
	}
	return out
}

// systemd reports whether systemd runs the host.
func (p bootProbe) systemd() bool {
	fi, err := os.Stat(filepath.Join(p.root, "run/systemd/system"))
	return err == nil && fi.IsDir()
}

// unitProblems checks the enabled cutover-resume.service: its unit file exists and systemd
// runs the host.
func (p bootProbe) unitProblems() []string {
	var out []string
	wants := filepath.Join(p.etc, "systemd/system/multi-user.target.wants", ResumeUnit)
	if target, err := os.Readlink(wants); err == nil {
		if _, err := os.Stat(wants); err != nil {
			out = append(out, fmt.Sprintf("%s is enabled but its unit file %s is missing, so it does not run at boot: reinstall cutover's package (apt-get install --reinstall cutover)", ResumeUnit, target))
		}
	}
	if !p.systemd() {
		out = append(out, fmt.Sprintf("%s is enabled but systemd does not run this host (no /run/systemd/system), so nothing starts it at boot: reinstall cutover's package (apt-get install --reinstall cutover), which installs /etc/cron.d/cutover instead where systemd does not run", ResumeUnit))
	}
	return out
}

// cronProblem says what keeps a cron daemon from running the crontab files at boot, or ""
// when one is installed and started at boot. busybox's crond reads users' crontabs only, not
// the system's (/etc/cron.d, /etc/crontab), which need a cron of their own.
func (p bootProbe) cronProblem(files []string) string {
	system, busybox := false, false
	for _, d := range cronDaemons {
		path := filepath.Join(p.root, d)
		fi, err := os.Stat(path)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			continue
		}
		if real, err := filepath.EvalSymlinks(path); err == nil && filepath.Base(real) == "busybox" {
			busybox = true
		} else {
			system = true
		}
	}
	onlySystemFiles := true
	for _, f := range files {
		if !strings.HasPrefix(f, filepath.Join(p.etc, "cron.d")+"/") && f != filepath.Join(p.etc, "crontab") {
			onlySystemFiles = false
		}
	}
	switch {
	case !system && !busybox:
		return "no cron daemon is installed (cron, cronie or busybox's crond): install one (apt-get install cron)"
	case !system && onlySystemFiles:
		return "the only cron daemon is busybox's crond, which reads users' crontabs only, not /etc/cron.d or /etc/crontab: install cron (apt-get install cron), or put the line in root's crontab (crontab -e, without the root field)"
	}
	if p.systemd() {
		for _, u := range cronUnits {
			if _, err := os.Lstat(filepath.Join(p.etc, "systemd/system/multi-user.target.wants", u)); err == nil {
				return ""
			}
		}
		return fmt.Sprintf("the cron daemon is installed but no unit of it is enabled (%s): enable it (systemctl enable cron)", strings.Join(cronUnits, ", "))
	}
	for _, s := range cronScripts {
		if _, err := os.Stat(filepath.Join(p.etc, "init.d", s)); err == nil {
			return ""
		}
	}
	return fmt.Sprintf("the cron daemon is installed but no init script starts it (%s/init.d/cron): have the host's init start it at boot", p.etc)
}
