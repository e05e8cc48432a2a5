package cluster

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDelayRules hands both ways of each node's SSH connections to the queue, without
// --queue-bypass, and gives nfdelay half the round trip.
func TestDelayRules(t *testing.T) {
	got := delayRules(1001, []string{"10.77.3.12", "10.77.3.13"})
	want := [][]string{
		{"OUTPUT", "-p", "tcp", "-d", "10.77.3.12", "--dport", "22", "-j", "NFQUEUE", "--queue-num", "1001"},
		{"INPUT", "-p", "tcp", "-s", "10.77.3.12", "--sport", "22", "-j", "NFQUEUE", "--queue-num", "1001"},
		{"OUTPUT", "-p", "tcp", "-d", "10.77.3.13", "--dport", "22", "-j", "NFQUEUE", "--queue-num", "1001"},
		{"INPUT", "-p", "tcp", "-s", "10.77.3.13", "--sport", "22", "-j", "NFQUEUE", "--queue-num", "1001"},
	}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("rules\n%q, want\n%q", got, want)
	}
	if args, want := nfdelayArgs(1001, 150*time.Millisecond, 0.05), []string{"-queue", "1001", "-delay", "150ms", "-loss", "0.05"}; !slices.Equal(args, want) {
		t.Errorf("nfdelay's arguments %q, want %q", args, want)
	}
}

// TestDelayRefusesBadArguments refuses a negative round trip, a loss outside [0, 1) and no
// node before it touches the cluster.
func TestDelayRefusesBadArguments(t *testing.T) {
	c := &Cluster{Name: "c1", Master: "node1", Nodes: testNodes(2), logf: t.Logf}
	for _, tt := range []struct {
		rtt   time.Duration
		loss  float64
		nodes []string
	}{
		{-time.Second, 0, []string{"node2"}},
		{time.Second, -0.1, []string{"node2"}},
		{time.Second, 1, []string{"node2"}},
		{time.Second, 0, nil},
		{time.Second, 0, []string{"node9"}},
	} {
		if _, err := c.Delay(t.Context(), tt.rtt, tt.loss, tt.nodes...); err == nil {
			t.Errorf("Delay(%s, %g, %v): no error", tt.rtt, tt.loss, tt.nodes)
		}
	}
}

// TestDelay measures a TCP connect from the master to node2's sshd and node3's, without a
// delay, with 300 ms round trip on node2, and after Lift: the connect to node2 takes at least
// the round trip while delayed and an SSH session still works through it; node3 and the
// connect after Lift stay fast.
func TestDelay(t *testing.T) {
	t.Parallel()
	RequireDelay(t)
	c := New(t, Options{Nodes: 3, Bare: true})
	ctx := t.Context()
	const rtt = 300 * time.Millisecond
	connect := func(node string) time.Duration {
		t.Helper()
		n, err := c.Node(node)
		if err != nil {
			t.Fatal(err)
		}
		// The best of three connects, timed inside the master (bash's clock, no process started).
		script := `for i in 1 2 3; do s=$EPOCHREALTIME; exec 3<>/dev/tcp/` + n.Address + `/22 || exit 1; e=$EPOCHREALTIME; exec 3<&-; echo "$s $e"; done`
		res, err := c.Exec(ctx, c.Master, "bash", "-c", script)
		if err == nil {
			err = res.Err()
		}
		if err != nil {
			t.Fatalf("connect to %s: %v", node, err)
		}
		best := time.Duration(-1)
		for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
			s, e, _ := strings.Cut(line, " ")
			a, err1 := strconv.ParseFloat(s, 64)
			b, err2 := strconv.ParseFloat(e, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("connect to %s: times %q", node, line)
			}
			if d := time.Duration((b - a) * float64(time.Second)); best < 0 || d < best {
				best = d
			}
		}
		return best
	}

	before := connect("node2")
	f, err := c.Delay(ctx, rtt, 0, "node2")
	if err != nil {
		t.Fatal(err)
	}
	delayed, other := connect("node2"), connect("node3")
	start := time.Now()
	res, err := c.Exec(ctx, c.Master, "ssh", "-o", "BatchMode=yes", "node2", "echo", "through")
	if err != nil || res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != "through" {
		t.Errorf("ssh node2 through the delay: %v, exit %d, %q %q", err, res.ExitCode, res.Stdout, res.Stderr)
	}
	session := time.Since(start)
	if err := f.Lift(ctx); err != nil {
		t.Fatal(err)
	}
	after := connect("node2")
	t.Logf("connect to node2: %s before, %s delayed (node3 %s), %s after Lift; an ssh session through the delay %s",
		before, delayed, other, after, session.Round(time.Millisecond))
	if delayed < rtt {
		t.Errorf("connect to node2 with a %s round trip took %s, want at least that", rtt, delayed)
	}
	for what, d := range map[string]time.Duration{"node2 before": before, "node3 beside the delay": other, "node2 after Lift": after} {
		if d >= rtt/3 {
			t.Errorf("connect to %s took %s, want well under %s", what, d, rtt)
		}
	}
}
