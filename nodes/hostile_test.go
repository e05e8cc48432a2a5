package nodes_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/nodes/sshdtest"
)

// hostileShell is a forced command for a node that runs every command as asked, except the
// start of a command shell (the line that holds the shell's script), for which it runs start
// instead; start may fall through to the real shell.
func hostileShell(start string) string {
	return `case "$SSH_ORIGINAL_COMMAND" in *cutover-shell-ready*)
` + start + `
esac
exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"
`
}

// TestCommandShellHostileStart: what a node sends before its command shell's ready line is
// its boot identity, and a node that sends anything else there, or more than one can be, or
// breaks the ready line's frame, has its shell refused at once (not at the command timeout),
// by an error that names the node and quotes a bounded, escaped prefix of what it sent; nothing
// of it reaches a Result, and the node's commands run in sessions of their own. Prepare returns
// the refusal.
func TestCommandShellHostileStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, start string
		want        []string // in the error, after "node1: "
	}{
		{"endless output", `exec yes`,
			[]string{"more than 64 bytes before the shell's ready line", `"y\ny\ny\n`}},
		{"a line without a newline", `yes | tr -d '\n'; exit 1`,
			[]string{"more than 64 bytes before the shell's ready line", `"yyyyyyyy`}},
		{"garbage", `printf garbage`,
			[]string{"is not a boot identity", `"garbage`}},
		{"over-long", `printf '%064d' 0`,
			[]string{"more than 64 bytes before the shell's ready line", `"0000000000`}},
		{"control characters", `printf '\033]0;owned\007\r'`,
			[]string{"is not a boot identity", `"\x1b]0;owned\a\r`}},
		{"forged", `printf '0F6C1E4A-2B3D-4E5F-8A9B-0C1D2E3F4A5B/1\ncutover-shell-ready 0\n\ncutover-shell-ready end\n'; exec cat >/dev/null`,
			[]string{"is not a boot identity", `"0F6C1E4A-2B3D-4E5F-8A9B-0C1D2E3F4A5B/1"`}},
		{"ready line without a newline", `printf '\ncutover-shell-ready '; yes | tr -d '\n'; exit 1`,
			[]string{"malformed frame: no end of line within 64 bytes", `"yyyyyyyy`}},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "-"), func(t *testing.T) {
			t.Parallel()
			c := sshdtest.Start(t, 1, sshdtest.WithForcedCommand(hostileShell(tc.start)))
			p := newPool(t, c, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			begin := time.Now()
			err := nodes.StartShell(ctx, conn(t, p, "node1"))
			took := time.Since(begin)
			if err == nil {
				t.Fatal("the node's command shell was used")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "node1: ") || len(msg) > 400 || strings.ContainsFunc(msg, func(r rune) bool { return r < ' ' || r == 0x7f }) {
				t.Errorf("error %q: want it to name the node, bounded, without control characters", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q: want it to say %q", msg, w)
				}
			}
			if took > 5*time.Second {
				t.Errorf("the shell was refused after %s, want at once", took)
			}

			// A run's connection: Prepare reports the refusal, and the commands run in sessions
			// of their own, carrying nothing the node sent before the ready line.
			run := newPool(t, c, nil)
			if err := run.SetCommandTag(uniqueTag()); err != nil {
				t.Fatal(err)
			}
			cn := conn(t, run, "node1")
			if err := cn.Prepare(ctx); err == nil || !strings.HasPrefix(err.Error(), "node1: ") || !strings.Contains(err.Error(), tc.want[0]) {
				t.Errorf("Prepare: %v, want the shell's refusal", err)
			}
			for range 2 {
				res, err := cn.RunShell(ctx, parentScript)
				if err != nil || string(res.Stdout) != "session\n" || res.Boot != "" || res.Start != 0 {
					t.Errorf("a command: ran in %.80q (%.200v), boot %q, start %d; want a session of its own, no boot, no start", res.Stdout, err, res.Boot, res.Start)
				}
			}
		})
	}
}

// TestCommandShellOutputIsItsOwn: processes that a command leaves running with its standard
// output and error open, one in the command's process group and one in a session of its own,
// each printing to both every 10 ms (and living on when that fails), never write into a later
// command's output: each command gets exactly its own output, and the processes still run.
func TestCommandShellOutputIsItsOwn(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1)
	p := newPool(t, c, nil)
	cn := conn(t, p, "node1")
	ctx := context.Background()
	marker := fmt.Sprintf("chatty-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() {
		for _, pid := range processesWith(t, marker) {
			if n, err := strconv.Atoi(pid); err == nil {
				syscall.Kill(n, syscall.SIGKILL)
			}
		}
	})
	chatty := `trap '' PIPE; while :; do echo "$0 out"; echo "$0 err" >&2; sleep 0.01; done`
	res, err := cn.RunShell(ctx, "sh -c "+nodes.Quote(chatty)+" "+marker+"-group &\n"+
		"setsid sh -c "+nodes.Quote(chatty)+" "+marker+"-session &\n"+
		"sleep 0.05; echo started")
	if err != nil {
		t.Fatal(err)
	}
	// What they print while it runs is its output.
	if !strings.Contains(string(res.Stdout), "started\n") || res.Boot == "" {
		t.Fatalf("the command that leaves them running: %.200q, boot %q; want it in the shell", res.Stdout, res.Boot)
	}
	for i := range 20 {
		res, err := cn.RunShell(ctx, fmt.Sprintf("sleep 0.02; echo out %d; echo err %d >&2; sleep 0.02", i, i))
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("out %d\n", i); string(res.Stdout) != want || res.Boot == "" {
			t.Errorf("command %d: stdout %.200q, boot %q; want %q in the shell", i, res.Stdout, res.Boot, want)
		}
		if want := fmt.Sprintf("err %d\n", i); string(res.Stderr) != want {
			t.Errorf("command %d: stderr %.200q, want %q", i, res.Stderr, want)
		}
	}
	if res, err := cn.Run(ctx, "sh", "-c", "echo program"); err != nil || string(res.Stdout) != "program\n" || len(res.Stderr) != 0 {
		t.Errorf("a program: %.200q, %.200q (%v); want its own output only", res.Stdout, res.Stderr, err)
	}
	for _, which := range []string{"-group", "-session"} {
		if len(processesWith(t, marker+which)) == 0 {
			t.Errorf("the process left running (%s) is gone, want it to live on", which)
		}
	}
}

// TestCommandShellStart: a command that ran to an exit in the command shell carries its start
// time in the node's clock ticks: no later than that of a process it runs, no earlier than that
// of a process an earlier command left running; one stopped by its timeout, or run in a session
// of its own, carries none.
func TestCommandShellStart(t *testing.T) {
	t.Parallel()
	c := sshdtest.Start(t, 1)
	p := newPool(t, c, func(cfg *nodes.SSHConfig) { cfg.CommandTimeout = 3 * time.Second })
	cn := conn(t, p, "node1")
	ctx := context.Background()
	marker := uniqueSleep()
	res, err := cn.RunShell(ctx, "sleep "+marker+" >/dev/null 2>&1 & echo $!")
	if err != nil {
		t.Fatal(err)
	}
	earlier := strings.TrimSpace(string(res.Stdout))
	t.Cleanup(func() {
		if n, err := strconv.Atoi(earlier); err == nil {
			syscall.Kill(n, syscall.SIGKILL)
		}
	})
	earlierStart := statStart(t, earlier)
	time.Sleep(30 * time.Millisecond)

	// A process of the command reads its own start time: in a script, and as a program.
	const self = `read -r l </proc/$$/stat; echo "$l"`
	for _, run := range []func() (nodes.Result, error){
		func() (nodes.Result, error) { return cn.RunShell(ctx, self) },
		func() (nodes.Result, error) { return cn.Run(ctx, "sh", "-c", self) },
		func() (nodes.Result, error) { return cn.RunShell(ctx, self+"; exit 3") },
	} {
		res, err := run()
		if code, _ := nodes.ExitCode(err); err != nil && code != 3 {
			t.Fatal(err)
		}
		own := statField(t, string(res.Stdout))
		if res.Start == 0 || res.Start > own || res.Start < earlierStart {
			t.Errorf("Start = %d, want it between %d (a process of an earlier command) and %d (a process of the command)", res.Start, earlierStart, own)
		}
	}

	if res, err := cn.RunShell(ctx, "sleep 30"); !nodes.IsTimeout(err) || res.Start != 0 {
		t.Errorf("a command stopped by its timeout: start %d (%v), want none", res.Start, err)
	}
	plain := newPool(t, c, nil)
	nodes.NoCommandShell(plain)
	if res, err := conn(t, plain, "node1").RunShell(ctx, self); err != nil || res.Start != 0 {
		t.Errorf("a command with a session of its own: start %d (%v), want none", res.Start, err)
	}
}

// statStart returns the start time of process pid, in clock ticks since boot.
func statStart(t *testing.T, pid string) uint64 {
	t.Helper()
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	return statField(t, string(stat))
}

// statField returns the start time (field 22) of a /proc/PID/stat line.
func statField(t *testing.T, stat string) uint64 {
	t.Helper()
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		t.Fatalf("not a stat line: %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 20 {
		t.Fatalf("not a stat line: %q", stat)
	}
	n, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		t.Fatal(errors.Join(fmt.Errorf("stat line %q", stat), err))
	}
	return n
}
