package upgrade

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBootProbe: status says what keeps the boot resume from running, for each way the host
// can lack it, and nothing when it would run.
func TestBootProbe(t *testing.T) {
	const (
		cronFile = "/etc/cron.d/cutover"
		wants    = "etc/systemd/system/multi-user.target.wants/"
	)
	cronOnly := BootResume{Cron: []string{cronFile}}
	unitOnly := BootResume{Unit: true}
	tests := []struct {
		name   string
		resume BootResume
		files  []string          // executables, or directories when ending in /
		links  map[string]string // link -> target beneath the root
		want   []string          // a part of each problem, in order
	}{
		{"nothing installed", BootResume{}, nil, nil, nil},
		{"cron without a daemon", cronOnly, []string{"etc/init.d/"}, nil,
			[]string{"/etc/cron.d/cutover does not run at boot: no cron daemon is installed"}},
		{"cron daemon started by its init script", cronOnly, []string{"usr/sbin/cron", "etc/init.d/cron"}, nil, nil},
		{"cronie", cronOnly, []string{"usr/sbin/crond", "etc/init.d/crond"}, nil, nil},
		{"busybox crond and /etc/cron.d", cronOnly, []string{"bin/busybox", "etc/init.d/crond"},
			map[string]string{"usr/sbin/crond": "/bin/busybox"}, []string{"busybox's crond, which reads users' crontabs only"}},
		{"busybox crond and root's crontab", BootResume{Cron: []string{"/var/spool/cron/crontabs/root"}}, []string{"bin/busybox", "etc/init.d/crond"},
			map[string]string{"usr/sbin/crond": "/bin/busybox"}, nil},
		{"cron daemon that no init script starts", cronOnly, []string{"usr/sbin/cron"}, nil,
			[]string{"no init script starts it"}},
		{"cron daemon with its unit enabled", cronOnly, []string{"usr/sbin/cron", "run/systemd/system/"},
			map[string]string{wants + "cron.service": "/lib/systemd/system/cron.service"}, nil},
		{"cron daemon with its unit disabled", cronOnly, []string{"usr/sbin/cron", "etc/init.d/cron", "run/systemd/system/"}, nil,
			[]string{"systemctl enable cron"}},
		{"unit enabled under systemd", unitOnly, []string{"run/systemd/system/", "lib/systemd/system/cutover-resume.service"},
			map[string]string{wants + ResumeUnit: "/lib/systemd/system/cutover-resume.service"}, nil},
		{"unit enabled without systemd", unitOnly, []string{"lib/systemd/system/cutover-resume.service"},
			map[string]string{wants + ResumeUnit: "/lib/systemd/system/cutover-resume.service"},
			[]string{"systemd does not run this host"}},
		{"unit file gone", unitOnly, []string{"run/systemd/system/"},
			map[string]string{wants + ResumeUnit: "/lib/systemd/system/cutover-resume.service"},
			[]string{"/lib/systemd/system/cutover-resume.service is missing"}},
		{"both, neither runs", BootResume{Unit: true, Cron: []string{cronFile}}, nil,
			map[string]string{wants + ResumeUnit: "/lib/systemd/system/cutover-resume.service"},
			[]string{"is missing", "systemd does not run", "no cron daemon"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for _, f := range tt.files {
				p := filepath.Join(root, f)
				if strings.HasSuffix(f, "/") {
					mustDo(t, os.MkdirAll(p, 0o755))
					continue
				}
				mustDo(t, os.MkdirAll(filepath.Dir(p), 0o755))
				mustDo(t, os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755))
			}
			for link, target := range tt.links {
				p := filepath.Join(root, link)
				mustDo(t, os.MkdirAll(filepath.Dir(p), 0o755))
				mustDo(t, os.Symlink(root+target, p))
			}
			// The crontab files lie under the root, as findBootResume names them.
			resume := BootResume{Unit: tt.resume.Unit}
			for _, f := range tt.resume.Cron {
				resume.Cron = append(resume.Cron, filepath.Join(root, f))
			}
			got := bootProbe{etc: filepath.Join(root, "etc"), root: root}.problems(resume)
			if len(got) != len(tt.want) {
				t.Fatalf("problems = %q, want %d containing %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
