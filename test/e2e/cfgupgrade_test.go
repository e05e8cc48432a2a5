package e2e

import (
	"strings"
	"testing"

	"github.com/cutover/cutover/test/cluster"
)

// TestCfgupgradeByHand migrates the master's config by hand after the operator switched the
// master's links himself, as with Ganeti's cfgupgrade, then downgrades it again.
func TestCfgupgradeByHand(t *testing.T) {
	t.Parallel()
	c := cluster.New(t, cluster.Options{})
	before := must(t, c, c.Master, "cat /var/lib/demoapp/config.json")
	must(t, c, c.Master, "ln -sfn /usr/lib/demoapp/1.1.0 /etc/demoapp/lib && ln -sfn /usr/share/demoapp/1.1.0 /etc/demoapp/share")

	res := cutover(t, c, "cfgupgrade", "--dry-run")
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "master_address") {
		t.Errorf("dry run: exit %d, want 0 and the diff", res.ExitCode)
	}
	if got := must(t, c, c.Master, "cat /var/lib/demoapp/config.json"); got != before {
		t.Errorf("a dry run changed the config")
	}
	if res := cutover(t, c, "cfgupgrade"); res.ExitCode != 0 {
		t.Fatalf("cfgupgrade: exit %d", res.ExitCode)
	}
	// The 1.1.0 daemon accepts the migrated config.
	must(t, c, c.Master, demoapp+" daemon stop && "+demoapp+" daemon start")
	if st := stateOf(t, c, c.Master); st.Daemon != "running 1.1.0" {
		t.Errorf("master daemon after cfgupgrade: %q, want running 1.1.0", st.Daemon)
	}

	must(t, c, c.Master, demoapp+" daemon stop")
	if res := cutover(t, c, "cfgupgrade", "--downgrade"); res.ExitCode != 0 {
		t.Fatalf("cfgupgrade --downgrade: exit %d", res.ExitCode)
	}
	if got := must(t, c, c.Master, "cat /var/lib/demoapp/config.json"); got != before {
		t.Errorf("config after upgrade and downgrade:\n%s\nwant\n%s", got, before)
	}
}
