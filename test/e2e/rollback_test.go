package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/test/cluster"
)

// verifyUnless12 is the verify command of TestAutomaticRollback: the demo's verify, except that
// it fails while the master's links name 1.2.0 and /var/tmp/fail-at-1.2.0 exists, so that an
// upgrade to 1.2.0 fails its final verify and the way back passes it.
const verifyUnless12 = `#!/bin/sh
if [ -e /var/tmp/fail-at-1.2.0 ] && [ "$(readlink /etc/demoapp/lib)" = /usr/lib/demoapp/1.2.0 ]; then
  echo "verify fails at 1.2.0 on demand" >&2
  exit 1
fi
exec /usr/lib/demoapp/default/usr/sbin/demoapp verify
`

// TestAutomaticRollback runs [policy] on_failure = "rollback" on the real cluster: an upgrade
// whose final verify fails is taken back to its source by a linked downgrade run (exit 6), and
// so is a run whose resume at boot fails after the master was rebooted past the point of no
// return. Each time every node ends on the source's links, config and daemons, and the journal
// links the two runs.
func TestAutomaticRollback(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{Live: "1.1.0"})
	all := online(c)
	ctx := context.Background()
	if err := c.WriteFile(ctx, c.Master, "/usr/local/bin/verify-unless-1.2", []byte(verifyUnless12)); err != nil {
		t.Fatal(err)
	}
	must(t, c, c.Master, `chmod 755 /usr/local/bin/verify-unless-1.2 && touch /var/tmp/fail-at-1.2.0 && `+
		`sed -i -e 's#^verify = .*#verify = "/usr/local/bin/verify-unless-1.2"#' -e 's#^\[policy\]$#[policy]\non_failure = "rollback"#' /etc/cutover/cutover.toml && `+
		`grep -q '^on_failure = "rollback"' /etc/cutover/cutover.toml`)

	linked := func(when string) {
		t.Helper()
		rs := runs(t, c)
		if len(rs) < 2 {
			t.Fatalf("%s: journal has %d runs, want the failed run and its rollback", when, len(rs))
		}
		failed, back := rs[len(rs)-2], rs[len(rs)-1]
		if failed.From != "1.1.0" || failed.To != "1.2.0" || failed.Outcome != journal.RolledBack || failed.Facts["rollback-run"] != fmt.Sprint(back.ID) {
			t.Errorf("%s: failed run %d: %s -> %s %s, facts %v; want 1.1.0 -> 1.2.0 rolled-back by run %d", when, failed.ID, failed.From, failed.To, failed.Outcome, failed.Facts, back.ID)
		}
		if back.From != "1.2.0" || back.To != "1.1.0" || back.Outcome != journal.Succeeded || back.Facts["rollback-of"] != fmt.Sprint(failed.ID) {
			t.Errorf("%s: rollback run %d: %s -> %s %s, facts %v; want 1.2.0 -> 1.1.0 done, rollback-of %d", when, back.ID, back.From, back.To, back.Outcome, back.Facts, failed.ID)
		}
		if sh(t, c, c.Master, "test -e /var/lib/cutover/intent.json").ExitCode == 0 {
			t.Errorf("%s: the intent is left", when)
		}
	}

	// The final verify fails: the run goes back at once.
	res := cutover(t, c, "upgrade", "--to=1.2.0", "--yes")
	if res.ExitCode != 6 || !strings.Contains(res.Stderr, `on_failure = "rollback"`) || !strings.Contains(res.Stdout, "rolled back: demoapp 1.1.0") {
		t.Fatalf("upgrade whose final verify fails: exit %d, want 6 and the rollback said\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	checkAt(t, c, "1.1.0", all...)
	linked("final verify")

	// The master reboots past the point of no return; the resume at boot fails its final
	// verify, and the rollback takes the cluster back.
	h := startHeld(t, c, "finish", "upgrade", "--to=1.2.0", "--yes")
	if err := c.Reboot(ctx, c.Master); err != nil {
		t.Fatal(err)
	}
	h.wait(t)
	deadline := time.Now().Add(4 * time.Minute)
	for sh(t, c, c.Master, "test -e /var/lib/cutover/intent.json").ExitCode == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the @reboot resume and its rollback did not end:\n%s", sh(t, c, c.Master, "cat /var/log/cutover-resume.log").Stdout)
		}
		time.Sleep(time.Second)
	}
	log := must(t, c, c.Master, "cat /var/log/cutover-resume.log")
	t.Logf("resume at boot:\n%s", log)
	if !strings.Contains(log, "rolled back: demoapp 1.1.0") {
		t.Errorf("the resume log does not say the cluster was rolled back")
	}
	checkAt(t, c, "1.1.0", all...)
	linked("boot resume")
}
