package ganeti

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// configVersions are config.data's "version" per minor.
var configVersions = map[string]string{"3.0": "3000000", "3.1": "3010000"}

// checkAt asserts that the whole cluster runs minor: the links on every node, the daemons
// running from that tree, config.data's version, gnt-cluster verify, the queue undrained, the
// watcher not paused, no intent left, and the last run of the journal (if any) done.
func (c *cluster) checkAt(t testing.TB, minor string) {
	t.Helper()
	for _, n := range nodeNames {
		links := c.must(t, n, "readlink /etc/ganeti/lib /etc/ganeti/share")
		if want := fmt.Sprintf("/usr/lib/ganeti/%s\n/usr/share/ganeti/%s\n", minor, minor); links != want {
			t.Errorf("%s: links %q, want %q", n, links, want)
		}
		daemons := "ganeti-confd ganeti-mond"
		if n == master {
			daemons += " ganeti-wconfd ganeti-luxid"
		}
		out := c.must(t, n, `for d in `+daemons+`; do p=$(pgrep -x -o "$d") && echo "$d $(readlink /proc/$p/exe)" || echo "$d not running"; done; `+
			`pgrep -f /usr/sbin/ganeti-noded >/dev/null && echo "ganeti-noded running" || echo "ganeti-noded not running"`)
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			d, exe, _ := strings.Cut(line, " ")
			switch {
			case d == "ganeti-noded":
				if exe != "running" {
					t.Errorf("%s: ganeti-noded %s", n, exe)
				}
			case exe != "/usr/lib/ganeti/"+minor+"/usr/sbin/"+d:
				t.Errorf("%s: %s runs %q, want the %s tree", n, d, exe, minor)
			}
		}
	}
	v := c.must(t, master, `python3 -c 'import json; print(json.load(open("/var/lib/ganeti/config.data"))["version"])'`)
	if strings.TrimSpace(v) != configVersions[minor] {
		t.Errorf("config.data version %s, want %s", strings.TrimSpace(v), configVersions[minor])
	}
	if res := c.run(t, master, verifyCommand); res.code != 0 {
		t.Errorf("gnt-cluster verify: exit %d\n%s", res.code, res.output())
	}
	if out := c.must(t, master, "/usr/sbin/gnt-cluster queue info"); !strings.Contains(out, "drain flag is unset") {
		t.Errorf("queue: %s", out)
	}
	if out := c.must(t, master, "/usr/sbin/gnt-cluster watcher info"); !strings.Contains(out, "not paused") {
		t.Errorf("watcher: %s", out)
	}
	if res := c.run(t, master, "ls /var/lib/ganeti/intent-to-upgrade /var/lib/cutover/intent* 2>/dev/null"); res.stdout != "" {
		t.Errorf("intent left: %s", res.stdout)
	}
	if last := c.lastRun(t); last != "no runs yet" && !strings.Contains(last, " done ") {
		t.Errorf("journal: last run %q, want done", last)
	}
}

// lastRun is the last line of `cutover journal`.
func (c *cluster) lastRun(t testing.TB) string {
	t.Helper()
	out := strings.TrimSpace(c.must(t, master, "/usr/sbin/cutover journal"))
	return out[strings.LastIndex(out, "\n")+1:]
}

// upgrade runs `cutover upgrade --to=to --yes` on the master, which must exit 0, and returns
// its output.
func (c *cluster) upgrade(t testing.TB, to string) string {
	t.Helper()
	start := time.Now()
	res := c.run(t, master, "/usr/sbin/cutover upgrade --to="+to+" --yes")
	if res.code != 0 {
		t.Fatalf("cutover upgrade --to=%s: exit %d\n%s", to, res.code, res.output())
	}
	t.Logf("cutover upgrade --to=%s: exit 0 in %s", to, time.Since(start).Round(time.Second))
	return res.stdout
}
