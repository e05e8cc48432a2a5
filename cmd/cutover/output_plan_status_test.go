package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/upgrade"
)

// TestPlanStatusOutput prints a plan's config migrations and a status whose boot resume would
// not run with both printers, compares each with its golden file in testdata/output/
// (-update rewrites them), and checks the lines an operator relies on.
func TestPlanStatusOutput(t *testing.T) {
	plan := samplePlan(false)
	plan.From, plan.To = "2.3.0", "2.5.0"
	plan.Migrations = []upgrade.MigrationStep{
		{From: "2.3", To: "2.4", File: "/usr/share/shop/2.5.0/cutover/migrations/2.3-2.4.json",
			Ops: []string{"move /queue/dir to /queue/path", "set /queue/workers"}},
		{From: "2.4", To: "2.5"},
	}
	plan.Checks = append(plan.Checks, upgrade.Check{Name: "migrations", Node: "node1", OK: true, Warning: true,
		Message: "/usr/share/shop/2.5.0/cutover/migration is not read: cutover reads migrations/*.json and upgrade-policy.json there"})
	noCron := sampleStatus(false)
	noCron.Resume = upgrade.BootResume{Cron: []string{"/etc/cron.d/cutover"}}
	noCron.ResumeProblems = []string{"the @reboot line in /etc/cron.d/cutover does not run at boot: no cron daemon is installed (cron, cronie or busybox's crond): install one (apt-get install cron)"}
	tests := []struct {
		name  string
		print func(o output) error
		want  []string // lines of the text output
	}{
		{"plan-migrations", func(o output) error { return o.plan(plan) }, []string{
			"config migrations",
			"  2.3 -> 2.4  2.3-2.4.json  move /queue/dir to /queue/path; set /queue/workers",
			"  2.4 -> 2.5  no file       no change between 2.4 and 2.5",
			"  warning  migrations        node1  /usr/share/shop/2.5.0/cutover/migration is not read: cutover reads migrations/*.json and upgrade-policy.json there",
		}},
		{"status-cron-no-daemon", func(o output) error { return o.status(noCron) }, []string{
			"resume at boot: @reboot in /etc/cron.d/cutover, which would not run",
			"warning: " + noCron.ResumeProblems[0],
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, format := range []string{"text", "json"} {
				var b bytes.Buffer
				var o output = &textOutput{w: &b}
				if format == "json" {
					o = &jsonOutput{w: &b, now: func() time.Time { return sampleTime }}
				}
				if err := tt.print(o); err != nil {
					t.Fatal(err)
				}
				if format == "json" {
					checkJSON(t, b.Bytes())
				} else {
					lines := strings.Split(b.String(), "\n")
					for _, want := range tt.want {
						if !containsLine(lines, want) {
							t.Errorf("the text output has no line %q:\n%s", want, b.String())
						}
					}
				}
				golden(t, "output/"+tt.name+"."+format, b.Bytes())
			}
		})
	}
}

func containsLine(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}
