package upgrade

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cutover/cutover/upgrade/config"
)

// ResumeUnit is the systemd unit cutover's package installs to finish an interrupted run at
// boot, after the network is up.
const ResumeUnit = "cutover-resume.service"

// BootResume says how the master finishes an interrupted run when it boots: the systemd unit
// cutover's package enables where systemd runs, or an @reboot line in a crontab.
type BootResume struct {
	// Unit is true when cutover-resume.service is enabled.
	Unit bool
	// Cron lists the crontab files that run 'cutover upgrade --resume' @reboot.
	Cron []string
}

// None reports whether nothing resumes a run at boot.
func (b BootResume) None() bool { return !b.Unit && len(b.Cron) == 0 }

// Both reports whether a run would be resumed twice at boot, by the unit and by cron.
func (b BootResume) Both() bool { return b.Unit && len(b.Cron) > 0 }

// findBootResume looks for the boot-time resume under the configured sysconfdir (the unit's
// enablement, /etc/cron.d, /etc/crontab) and localstatedir (root's crontab).
func findBootResume(paths config.PathsConfig) BootResume {
	var b BootResume
	wants := filepath.Join(paths.SysconfDir, "systemd/system/multi-user.target.wants", ResumeUnit)
	if _, err := os.Lstat(wants); err == nil {
		b.Unit = true
	}
	files, _ := filepath.Glob(filepath.Join(paths.SysconfDir, "cron.d", "*"))
	sort.Strings(files)
	files = append(files, filepath.Join(paths.SysconfDir, "crontab"), filepath.Join(paths.LocalstateDir, "spool/cron/crontabs/root"))
	for _, f := range files {
		if resumesAtBoot(f) {
			b.Cron = append(b.Cron, f)
		}
	}
	return b
}

// resumesAtBoot reports whether the crontab file has an @reboot line that runs
// 'cutover upgrade --resume'. Only the first 64 KiB of a regular file are read.
func resumesAtBoot(path string) bool {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 64<<10))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "@reboot") && strings.Contains(line, "cutover upgrade --resume") {
			return true
		}
	}
	return false
}
