package ganeti

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rebootWait bounds how long the @reboot line may take to finish a run after a reboot.
const rebootWait = 12 * time.Minute

// rebootDuring starts `cutover upgrade --to=to` on the master, holds it as stage starts,
// restarts the master hard, and waits for the @reboot line installed as the guide says (with
// cron's own PATH) to finish the run: it must converge on to with no human.
func rebootDuring(t testing.TB, c *cluster, to, stage string) {
	t.Helper()
	rebootAt(t, c, to, stage, false)
}

// rebootTwice is rebootDuring with a second hard restart of the master right after the
// first, while its boot starts the daemons of the version the links named then, and while
// the @reboot resume the first boot started runs.
func rebootTwice(t testing.TB, c *cluster, to, stage string) {
	t.Helper()
	rebootAt(t, c, to, stage, true)
}

func rebootAt(t testing.TB, c *cluster, to, stage string, twice bool) {
	t.Helper()
	runs := strings.Count(strings.TrimSpace(c.must(t, master, "/usr/sbin/cutover journal")), "\n")
	c.must(t, master, "rm -rf /tmp/hold /tmp/upgrade.rc && mkdir -p /tmp/hold/hold && touch /tmp/hold/hold/"+stage+" && : >/var/log/cutover-resume.log")
	c.must(t, master, "(CUTOVER_HOLD_DIR=/tmp/hold setsid /usr/sbin/cutover upgrade --to="+to+" --yes >/tmp/upgrade.log 2>&1 </dev/null; echo $? >/tmp/upgrade.rc) </dev/null >/dev/null 2>&1 &")
	c.waitHeld(t, stage)
	booted := strings.Count(c.must(t, master, "cat /var/log/boot.log 2>/dev/null || true"), " booted\n")
	c.reboot(t, master)
	if twice {
		// The boot script starts noded first and the master daemons last, waiting for the
		// nodes' votes: the second restart lands while it starts them.
		c.waitFor(t, "pgrep -f ganeti-noded >/dev/null || pgrep -x ganeti-confd >/dev/null", 2*time.Minute)
		if n := strings.Count(c.must(t, master, "cat /var/log/boot.log"), " booted\n"); n > booted {
			t.Logf("the first boot had started every daemon before the second restart")
		}
		c.reboot(t, master)
	}
	start := time.Now()
	want := strconv.Itoa(runs + 1)
	for {
		last := strings.Fields(c.lastRun(t))
		if len(last) > 0 && last[0] == want && strings.Contains(c.lastRun(t), " done ") {
			break
		}
		if log := c.run(t, master, "cat /var/log/cutover-resume.log").stdout; stampedLine("cutover: ").MatchString(log) {
			t.Fatalf("the @reboot resume failed:\n%s", log)
		}
		if time.Since(start) > rebootWait {
			t.Fatalf("run %s not done %s after the reboot: %v", want, rebootWait, last)
		}
		time.Sleep(2 * time.Second)
	}
	// The run is journaled done before cutover prints its summary and exits.
	for time.Since(start) < rebootWait && c.run(t, master, "grep -qE '^[0-9TZ:-]+ done: ' /var/log/cutover-resume.log").code != 0 {
		time.Sleep(time.Second)
	}
	log := c.must(t, master, "cat /var/log/cutover-resume.log")
	if !stampedLine("done: ").MatchString(log) {
		t.Errorf("the @reboot resume did not finish with done:\n%s", log)
	}
	t.Logf("resumed after the reboot to %s in %s", to, time.Since(start).Round(time.Second))
}

// stampedLine matches a line of the boot resume's log that starts with prefix after the time
// stamp the package's @reboot line puts in front of every line.
func stampedLine(prefix string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]+Z ` + regexp.QuoteMeta(prefix))
}
