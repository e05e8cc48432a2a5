package nodes_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/nodes/sshdtest"
)

// TestLocalResultStart: a command run on the master carries the master's boot identity and
// its start time, which is no later than the start of a process the command started.
func TestLocalResultStart(t *testing.T) {
	c := conn(t, newPool(t, sshdtest.Start(t, 1), nil), localMaster)
	res, err := c.RunShell(context.Background(), "sleep 30 >/dev/null 2>&1 & echo $!")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		t.Fatalf("stdout %q: %v", res.Stdout, err)
	}
	defer syscall.Kill(pid, syscall.SIGKILL)
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	started, _ := strconv.ParseUint(f[19], 10, 64)
	if res.Start == 0 || res.Start > started {
		t.Errorf("Result.Start = %d, want a start time no later than its process's %d", res.Start, started)
	}
	id, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if want := strings.TrimSpace(string(id)) + "/"; !strings.HasPrefix(res.Boot, want) || res.Boot != nodes.LocalBoot() {
		t.Errorf("Result.Boot = %q, want %q...", res.Boot, want)
	}
}
