package ganeti

import (
	"strings"
	"testing"
	"time"
)

// cutAfterPONR upgrades to to with node cut off the network once the config is migrated
// (cutover is held at ensure-dirs, the first stage past the point of no return, while the link
// goes down): the run pushes through and exits 3 naming the node, with its intent kept. Once
// the link is back, `cutover upgrade --resume` converges the whole cluster on to.
func cutAfterPONR(t testing.TB, c *cluster, to, node string) {
	t.Helper()
	c.must(t, master, "rm -rf /tmp/hold /tmp/upgrade.rc && mkdir -p /tmp/hold/hold && touch /tmp/hold/hold/ensure-dirs")
	c.must(t, master, "(CUTOVER_HOLD_DIR=/tmp/hold /usr/sbin/cutover upgrade --to="+to+" --yes >/tmp/upgrade.log 2>&1; echo $? >/tmp/upgrade.rc) </dev/null >/dev/null 2>&1 &")
	c.waitHeld(t, "ensure-dirs")
	healed := false
	c.link(t, "cut", node)
	defer func() {
		if !healed {
			c.link(t, "heal", node)
		}
	}()
	start := time.Now()
	c.must(t, master, "rm /tmp/hold/hold/ensure-dirs")
	c.waitFor(t, "test -s /tmp/upgrade.rc", 20*time.Minute)
	out := c.must(t, master, "cat /tmp/upgrade.log")
	rc := strings.TrimSpace(c.must(t, master, "cat /tmp/upgrade.rc"))
	t.Logf("cutover upgrade --to=%s with %s cut off: exit %s in %s after the PONR", to, node, rc, time.Since(start).Round(time.Second))
	if rc != "3" {
		t.Fatalf("cutover upgrade --to=%s with %s cut off after the PONR: exit %s, want 3\n%s", to, node, rc, out)
	}
	if !strings.Contains(out, node+": ") && !strings.Contains(out, node+"."+domain+": ") {
		t.Errorf("the failed run does not name %s:\n%s", node, out)
	}
	if res := c.run(t, master, "test -e /var/lib/cutover/intent.json"); res.code != 0 {
		t.Errorf("the intent is gone after a run that exited 3")
	}

	c.link(t, "heal", node)
	healed = true
	c.waitFor(t, "timeout 2 bash -c '</dev/tcp/"+node+"."+domain+"/22'", 2*time.Minute)
	start = time.Now()
	res := c.run(t, master, "/usr/sbin/cutover upgrade --resume")
	if res.code != 0 {
		t.Fatalf("cutover upgrade --resume after healing %s: exit %d\n%s", node, res.code, res.output())
	}
	t.Logf("cutover upgrade --resume after healing %s: exit 0 in %s", node, time.Since(start).Round(time.Second))
}

// link cuts a node off the network or heals it.
func (c *cluster) link(t testing.TB, action, node string) {
	t.Helper()
	if out, err := c.script(action, node); err != nil {
		t.Fatalf("%s %s: %v\n%s", action, node, err, out)
	}
}
