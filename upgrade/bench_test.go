package upgrade_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/nodes/sshdtest"
	"github.com/cutover/cutover/upgrade"
)

// The benchmarks compare a whole cutover run over real sshd nodes with the same fan-out done
// by pdsh, one new OpenSSH connection per node per round:
//
//	CUTOVER_BENCH_NODES=8,32,64,128,256 go test -run '^$' -bench . -benchtime 1x ./upgrade/
//
// One BenchmarkUpgradeRun op is an upgrade and a downgrade, two runs of the cutover binary
// (s/upgrade, s/downgrade); it reports the binary's peak resident memory (MB-peak-rss), its
// CPU time (cpu-s-cutover) and share of the CPU the run cost with the nodes' sshd
// (cpu-share-cutover), and the downtime window of a run, first daemon stop to last daemon
// start (s-downtime). One BenchmarkPdshRounds op is ten rounds of pdsh (s/round;
// cpu-s-client is pdsh's and its ssh clients' CPU time). Both report the CPU time the sshd
// servers spent (cpu-s-sshd): on one host the nodes share the client's cores, so that time
// is part of the run's time here and would be spent on the nodes in a real cluster.
// BenchmarkPdshRounds runs first; BenchmarkUpgradeRun then also reports its time as a
// fraction of the pdsh rounds over as many nodes, per op (x-of-pdsh) and per run
// (x-run-of-pdsh). BenchmarkUpgradeRun also reports a run's time per node
// (ms-run-per-node), the time of its switch stage, where most of its directory syncs are
// (s-switch), where half as many nodes were measured before it, what doubling the nodes cost
// (x-of-half), and a run against its floor, one round of SSH connections to the same nodes by
// cutover's own client (x-run-of-dial, s/dial-round). It logs how long each stage of a run took.
// The servers run in PID namespaces of their own (sshdtest.WithOwnProcesses), so that a check
// that reads every process of a node (the one for daemons of the wrong version) reads that
// node's, as on a real cluster, not every process of all the servers on this one host.

// benchNodes are the cluster sizes measured, sshd nodes besides the master: 8 and 32, or the
// comma-separated sizes in CUTOVER_BENCH_NODES (make bench measures 8 to 256).
var benchNodes = sizesFromEnv("CUTOVER_BENCH_NODES", []int{8, 32})

// sizesFromEnv reads a comma-separated list of cluster sizes from the environment variable
// name, or returns def when it is unset; a malformed list panics, as a benchmark's setup may.
func sizesFromEnv(name string, def []int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			panic(fmt.Sprintf("%s=%q: want sizes such as 8,32,64", name, v))
		}
		out = append(out, n)
	}
	return out
}

// downtimeRE finds the downtime window in a run's last line ("daemons down 0.4s").
var downtimeRE = regexp.MustCompile(`daemons down ([0-9.]+)s`)

// benchParallel is how many nodes every benchmark works on at once: cutover's ssh.parallel,
// pdsh's -f and the dial round's fan-out, so that the three compare like with like.
const benchParallel = 32

// pdshRounds is how many rounds of pdsh one BenchmarkPdshRounds op runs.
const pdshRounds = 10

// pdshTime holds the time per op of BenchmarkPdshRounds by node count, for x-of-pdsh.
var pdshTime = struct {
	sync.Mutex
	perOp map[int]time.Duration
}{perOp: map[int]time.Duration{}}

// runTime holds the time per op of BenchmarkUpgradeRun by node count, for x-of-half.
var runTime = struct {
	sync.Mutex
	perOp map[int]time.Duration
}{perOp: map[int]time.Duration{}}

// BenchmarkPdshRounds runs pdshRounds rounds of `pdsh -R ssh -f 32 -w node2,... true`, each a
// new OpenSSH connection to every node.
func BenchmarkPdshRounds(b *testing.B) {
	for _, n := range benchNodes {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			requireCommands(b, "pdsh", "ssh")
			c := sshdtest.Start(b, n, sshdtest.WithOwnProcesses())
			p := newPdsh(b, c)
			ctx := context.Background()
			var client time.Duration
			sshd := sshdCPU(b)
			for b.Loop() {
				for range pdshRounds {
					cpu, err := p.round(ctx)
					if err != nil {
						b.Fatal(err)
					}
					client += cpu
				}
			}
			perOp := b.Elapsed() / time.Duration(b.N)
			pdshTime.Lock()
			pdshTime.perOp[n] = perOp
			pdshTime.Unlock()
			b.ReportMetric(perOp.Seconds()/pdshRounds, "s/round")
			b.ReportMetric(client.Seconds()/float64(b.N), "cpu-s-client")
			b.ReportMetric(sshd().Seconds()/float64(b.N), "cpu-s-sshd")
		})
	}
}

// BenchmarkUpgradeRun runs the cutover binary through a whole no-op upgrade to 1.1.0 and a
// downgrade back to 1.0.0 (one op) on the master and n sshd nodes, and reports the child's
// peak memory over all runs.
func BenchmarkUpgradeRun(b *testing.B) {
	bin := buildCutover(b)
	for _, n := range benchNodes {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			c := sshdtest.Start(b, n, sshdtest.WithOwnProcesses())
			sc := newSSHCluster(b, c, benchParallel)
			sc.ownLinks(b, c)
			ctx := context.Background()
			var peak int64
			var up, down, cpu, downtime, switching time.Duration
			var stages stageTimes
			dial := dialRound(b, c, benchParallel)
			floor, floorWindow := floorRound(b, c, sc, benchParallel)
			sshd := sshdCPU(b)
			for b.Loop() {
				for _, to := range []string{"1.1.0", "1.0.0"} {
					run := sc.runTo(ctx, b, bin, to)
					peak = max(peak, run.maxRSS)
					cpu += run.cpu
					if m := downtimeRE.FindStringSubmatch(run.stdout); m != nil {
						d, _ := strconv.ParseFloat(m[1], 64)
						downtime += time.Duration(d * float64(time.Second))
					}
					switching += sc.switchTime(ctx, b)
					stages.add(sc.lastRun(ctx, b))
					if to == "1.1.0" {
						up += run.wall
					} else {
						down += run.wall
					}
				}
			}
			b.Logf("%d nodes, the stages of a run: %v", n, &stages)
			b.ReportMetric(float64(peak)/1e6, "MB-peak-rss")
			b.ReportMetric(up.Seconds()/float64(b.N), "s/upgrade")
			b.ReportMetric(down.Seconds()/float64(b.N), "s/downgrade")
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s-cutover")
			sshdTime := sshd()
			b.ReportMetric(sshdTime.Seconds()/float64(b.N), "cpu-s-sshd")
			// cutover's own share of the CPU the run cost, its nodes' sshd included.
			b.ReportMetric(cpu.Seconds()/(cpu+sshdTime).Seconds(), "cpu-share-cutover")
			// The downtime window, first daemon stop to last daemon start, per run.
			b.ReportMetric(downtime.Seconds()/float64(2*b.N), "s-downtime")
			// The switch stage of a run, where its directory syncs are.
			b.ReportMetric(switching.Seconds()/float64(2*b.N), "s-switch")
			perOp := b.Elapsed() / time.Duration(b.N)
			// A run against its floor: one SSH connection to every node.
			b.ReportMetric(dial.Seconds(), "s/dial-round")
			b.ReportMetric(float64(perOp/2)/float64(dial), "x-run-of-dial")
			// The floor of a run with cutover's transport: the nodes' own work of a run and
			// nothing else, against the dial round and against the run (floorRound).
			b.ReportMetric(floor.Seconds(), "s/floor")
			b.ReportMetric(floorWindow.Seconds(), "s-downtime-floor")
			b.ReportMetric(float64(floor)/float64(dial), "x-floor-of-dial")
			b.ReportMetric(float64(perOp/2)/float64(floor), "x-run-of-floor")
			// The time of a run per node: constant while the cost grows linearly.
			b.ReportMetric(float64(perOp.Milliseconds())/float64(2*n), "ms-run-per-node")
			runTime.Lock()
			runTime.perOp[n] = perOp
			half, ok := runTime.perOp[n/2]
			runTime.Unlock()
			if ok && n%2 == 0 {
				// What doubling the nodes cost, when half as many were measured too.
				b.ReportMetric(float64(perOp)/float64(half), "x-of-half")
			}
			pdshTime.Lock()
			pdsh, ok := pdshTime.perOp[n]
			pdshTime.Unlock()
			if ok {
				b.ReportMetric(float64(perOp)/float64(pdsh), "x-of-pdsh")
				// One run (an upgrade or a downgrade) against the ten pdsh rounds.
				b.ReportMetric(float64(perOp/2)/float64(pdsh), "x-run-of-pdsh")
			}
		})
	}
}

// syncNodes are the cluster sizes BenchmarkSyncCost measures: 32, or the comma-separated
// sizes in CUTOVER_BENCH_SYNC_NODES (make bench measures 32 and 256).
var syncNodes = sizesFromEnv("CUTOVER_BENCH_SYNC_NODES", []int{32})

// syncPairs is how many upgrade-and-downgrade pairs one BenchmarkSyncCost op runs each way.
const syncPairs = 3

// BenchmarkSyncCost measures what the syncs of the nodes' file operations cost a whole run:
// the no-op upgrade and downgrade of BenchmarkUpgradeRun, once with every sync and once with
// the node seam's syncs skipped (nodes.SkipSyncEnv, a test hook: the directory syncs on the
// master and the nodes, and the file syncs of atomic writes), alternating on one cluster
// syncPairs times so that both meet the same load. It reports a synced and an unsynced run's
// time (s/run-synced, s/run-unsynced), the switch stage's, where most directory syncs are
// (s-switch-synced, s-switch-unsynced), and the synced run against the unsynced one
// (x-sync-cost; the target is at most 1.10).
func BenchmarkSyncCost(b *testing.B) {
	bin := buildCutover(b)
	for _, n := range syncNodes {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			c := sshdtest.Start(b, n, sshdtest.WithOwnProcesses())
			sc := newSSHCluster(b, c, benchParallel)
			sc.ownLinks(b, c)
			ctx := context.Background()
			var wall, switching [2]time.Duration // [0] synced, [1] unsynced
			for b.Loop() {
				for range syncPairs {
					for i, env := range [][]string{nil, {nodes.SkipSyncEnv + "=1"}} {
						sc.env = env
						for _, to := range []string{"1.1.0", "1.0.0"} {
							run := sc.runTo(ctx, b, bin, to)
							wall[i] += run.wall
							switching[i] += sc.switchTime(ctx, b)
						}
					}
				}
			}
			runs := float64(2 * syncPairs * b.N)
			b.ReportMetric(wall[0].Seconds()/runs, "s/run-synced")
			b.ReportMetric(wall[1].Seconds()/runs, "s/run-unsynced")
			b.ReportMetric(switching[0].Seconds()/runs, "s-switch-synced")
			b.ReportMetric(switching[1].Seconds()/runs, "s-switch-unsynced")
			b.ReportMetric(float64(wall[0])/float64(wall[1]), "x-sync-cost")
		})
	}
}

// runTo runs the cutover binary bin through a whole upgrade (or downgrade) of the cluster to
// version, and fails tb unless it exits 0 with the cluster at version.
func (sc *sshCluster) runTo(ctx context.Context, tb testing.TB, bin, version string) cutoverRun {
	tb.Helper()
	run := sc.cutover(ctx, tb, bin, "upgrade", "--to="+version, "--yes")
	if run.code != 0 {
		tb.Fatalf("exit %d, want 0\n%v", run.code, run)
	}
	if err := sc.checkAt(version); err != nil {
		tb.Fatalf("%v\n%v", err, run)
	}
	return run
}

// switchTime returns how long the switch stage of the journal's last run took: where a run
// changes the nodes' directories, and so where most of its directory syncs are.
func (sc *sshCluster) switchTime(ctx context.Context, tb testing.TB) time.Duration {
	tb.Helper()
	e, ok := sc.lastRun(ctx, tb).LastEvent("switch")
	if !ok || e.State != journal.Done {
		tb.Fatalf("the last run's switch stage: %+v", e)
	}
	return e.Duration
}

// lastRun returns the journal's last run.
func (sc *sshCluster) lastRun(ctx context.Context, tb testing.TB) journal.Run {
	tb.Helper()
	runs, err := journal.NewStore(sc.path("state/journal.db")).Runs(ctx)
	if err != nil || len(runs) == 0 {
		tb.Fatalf("the journal's last run: %v (%d runs)", err, len(runs))
	}
	return runs[len(runs)-1]
}

// stageTimes adds up, stage by stage in the order they ran, how long the stages of runs took.
type stageTimes struct {
	order []string
	took  map[string]time.Duration
	runs  int
}

// add adds the stages of run that ended done.
func (st *stageTimes) add(run journal.Run) {
	if st.took == nil {
		st.took = map[string]time.Duration{}
	}
	st.runs++
	for _, e := range run.Events {
		if e.State != journal.Done {
			continue
		}
		if _, ok := st.took[e.Stage]; !ok {
			st.order = append(st.order, e.Stage)
		}
		st.took[e.Stage] += e.Duration
	}
}

// String says how long each stage took per run: where a run's time goes.
func (st *stageTimes) String() string {
	var parts []string
	for _, name := range st.order {
		parts = append(parts, fmt.Sprintf("%s %.2fs", name, st.took[name].Seconds()/float64(st.runs)))
	}
	return strings.Join(parts, ", ")
}

// serverPools returns the servers of c as nodes, and a function that makes a new pool of
// cutover's SSH client for them (beside a local master), which dials each node afresh.
func serverPools(tb testing.TB, c *sshdtest.Cluster) ([]nodes.Node, func() *nodes.Pool) {
	tb.Helper()
	var list []nodes.Node
	for _, s := range c.Servers {
		list = append(list, nodes.Node{Name: s.Name, Address: s.Addr, Port: s.Port})
	}
	inv, err := nodes.NewInventory("master", append([]nodes.Node{{Name: "master"}}, list...))
	if err != nil {
		tb.Fatal(err)
	}
	return list, func() *nodes.Pool {
		p, err := nodes.NewPool(inv, nodes.SSHConfig{User: c.User, IdentityFiles: []string{c.IdentityFile}, KnownHosts: []string{c.KnownHosts}})
		if err != nil {
			tb.Fatal(err)
		}
		return p
	}
}

// dialRound returns the time it takes to connect to every node of c, parallel at a time, with
// cutover's own SSH client (handshake, host key check, login; no command), as a run's
// preflight does first: the floor of a run's cost, since every run needs one connection per
// node. It is the best of three rounds, each dialing anew.
func dialRound(tb testing.TB, c *sshdtest.Cluster, parallel int) time.Duration {
	tb.Helper()
	list, newPool := serverPools(tb, c)
	best := time.Duration(math.MaxInt64)
	for range 3 {
		p := newPool()
		start := time.Now()
		_, err := nodes.Each(context.Background(), list, parallel, "", func(ctx context.Context, n nodes.Node) error {
			_, err := p.Conn(ctx, n.Name)
			return err
		})
		best = min(best, time.Since(start))
		p.Close()
		if err != nil {
			tb.Fatal(err)
		}
	}
	return best
}

// floorRound returns the time the nodes' own work of a no-op run takes with nothing of
// cutover's around it (no stage machine, journal, run log, crash points, hooks on the master
// or config migration), and the part of it from the first stop to the last start: the floor
// that a run and its downtime window can reach on this machine with cutover's transport. It
// works on every node in fan-outs of parallel nodes, each fan-out ending before the next
// begins as a run's stages do: the connection and the clock (date, in a session of its own);
// the check of the target's trees and the links; the command shell's start; the same check
// again; the daemons' stop (a command); the switch of the links; the config's atomic write
// (to a file of its own, so that the runs' config is left as it is); ensure-dirs and the
// start (a command each); the check for daemons of another version, twice. It switches to
// 1.1.0 and back twice, each round dialing anew, and returns the best round.
func floorRound(tb testing.TB, c *sshdtest.Cluster, sc *sshCluster, parallel int) (run, window time.Duration) {
	tb.Helper()
	lay, err := layout.New("app", layout.Paths{LibDir: sc.path("usr/lib"), DataDir: sc.path("usr/share"), SysconfDir: sc.path("etc"), LocalstateDir: sc.path("var")}, "full", "")
	if err != nil {
		tb.Fatal(err)
	}
	config, err := os.ReadFile(sc.path("var/lib/app/config.json"))
	if err != nil {
		tb.Fatal(err)
	}
	lib, share := lay.Bases()
	check := []string{"sh", "-c", upgrade.ProcScript, "cutover-check", lib, share, lay.LibLink(), lay.ShareLink(), "root"}
	list, newPool := serverPools(tb, c)
	run, window = time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
	for _, to := range []string{"1.1.0", "1.0.0", "1.1.0", "1.0.0"} {
		version, err := layout.ParseVersion(to)
		if err != nil {
			tb.Fatal(err)
		}
		p := newPool()
		if err := p.SetCommandTag("bench-floor"); err != nil {
			tb.Fatal(err)
		}
		ctx := context.Background()
		fan := func(f func(ctx context.Context, cn *nodes.Conn) error) {
			_, err := nodes.Each(ctx, list, parallel, "", func(ctx context.Context, n nodes.Node) error {
				cn, err := p.Conn(ctx, n.Name)
				if err != nil {
					return err
				}
				return f(ctx, cn)
			})
			if err != nil {
				tb.Fatalf("the floor of a run to %s: %v", to, err)
			}
		}
		command := func(argv ...string) func(context.Context, *nodes.Conn) error {
			return func(ctx context.Context, cn *nodes.Conn) error {
				_, err := cn.Run(ctx, argv...)
				return err
			}
		}
		verify := func(ctx context.Context, cn *nodes.Conn) error {
			if err := lay.CheckInstalled(ctx, cn, version); err != nil {
				return err
			}
			_, err := lay.Live(ctx, cn)
			return err
		}
		start := time.Now()
		fan(func(ctx context.Context, cn *nodes.Conn) error {
			_, err := cn.RunInput(ctx, strings.NewReader(""), "date", "+%s.%N")
			return err
		})
		fan(verify)
		fan(func(ctx context.Context, cn *nodes.Conn) error { return cn.Prepare(ctx) })
		fan(verify)
		down := time.Now()
		fan(func(ctx context.Context, cn *nodes.Conn) error {
			_, err := cn.RunShell(ctx, "true")
			return err
		})
		fan(func(ctx context.Context, cn *nodes.Conn) error {
			// As the switch stage, which reads the links first; the nodes share theirs, so
			// they may be halfway through another node's switch.
			lay.Live(ctx, cn)
			return lay.Switch(ctx, cn, version)
		})
		fan(func(ctx context.Context, cn *nodes.Conn) error {
			return cn.WriteFileAtomic(sc.path("var/lib/app/floor.json"), config, 0o644)
		})
		for range 2 { // ensure-dirs, the start
			fan(func(ctx context.Context, cn *nodes.Conn) error {
				_, err := cn.RunShell(ctx, "true")
				return err
			})
		}
		window = min(window, time.Since(down))
		fan(command(check...))
		fan(command(check...))
		run = min(run, time.Since(start))
		p.Close()
	}
	return run, window
}

// requireCommands skips (or fails under CI=true) unless every named program is installed.
func requireCommands(tb testing.TB, names ...string) {
	tb.Helper()
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			if os.Getenv("CI") == "true" {
				tb.Fatalf("%s is not installed (run test/setup.sh): %v", name, err)
			}
			tb.Skipf("%s is not installed (run test/setup.sh): %v", name, err)
		}
	}
}

// pdsh runs commands on an sshdtest cluster with pdsh's ssh module. The servers are named
// node2, node3, ... like the cutover cluster's nodes; an ssh_config maps each name to its
// port and makes OpenSSH check host keys strictly against the cluster's known_hosts.
type pdsh struct {
	hosts string   // the -w list
	env   []string // the environment pdsh runs in
}

func newPdsh(tb testing.TB, c *sshdtest.Cluster) *pdsh {
	tb.Helper()
	var conf strings.Builder
	var hosts []string
	for i, s := range c.Servers {
		name := fmt.Sprintf("node%d", i+2)
		hosts = append(hosts, name)
		fmt.Fprintf(&conf, "Host %s\n  HostName %s\n  Port %d\n", name, s.Addr, s.Port)
	}
	// known_hosts lists each server as [127.0.0.1]:PORT, what OpenSSH looks up for
	// HostName 127.0.0.1 and Port PORT, so no HostKeyAlias is needed.
	fmt.Fprintf(&conf, `Host *
  User %s
  IdentityFile %s
  IdentitiesOnly yes
  UserKnownHostsFile %s
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  UpdateHostKeys no
  BatchMode yes
  LogLevel ERROR
`, c.User, c.IdentityFile, c.KnownHosts)
	cfg := filepath.Join(tb.TempDir(), "ssh_config")
	if err := os.WriteFile(cfg, []byte(conf.String()), 0o600); err != nil {
		tb.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SSH_AUTH_SOCK=") && !strings.HasPrefix(kv, "PDSH_") {
			env = append(env, kv)
		}
	}
	// PDSH_SSH_ARGS replaces the module's default "-2 -a -x -l%u %h"; the command follows.
	env = append(env, "PDSH_SSH_ARGS=-F "+cfg+" -oBatchMode=yes %h")
	return &pdsh{hosts: strings.Join(hosts, ","), env: env}
}

// round runs `true` on every node, benchParallel connections in flight, and returns the CPU
// time of pdsh and its ssh clients, or an error unless every node ran the command.
func (p *pdsh) round(ctx context.Context) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, "pdsh", "-S", "-R", "ssh", "-f", strconv.Itoa(benchParallel), "-w", p.hosts, "true")
	cmd.Env = p.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil || stdout.Len() > 0 || stderr.Len() > 0 {
		return 0, fmt.Errorf("pdsh -w %s true: %v\nstdout:\n%s\nstderr:\n%s", p.hosts, err, stdout.String(), stderr.String())
	}
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), nil
}

// sshdCPU starts counting the CPU time the sshd servers of this process spend, with the
// connection processes they forked, and returns a function that waits until every
// connection process has ended and returns the time spent since. On one host the servers
// share the client's cores, so this is the part of a run's time that a real cluster spends
// on its nodes instead.
func sshdCPU(tb testing.TB) func() time.Duration {
	tb.Helper()
	start, _ := sshdTicks()
	return func() time.Duration {
		ticks, live := sshdTicks()
		for deadline := time.Now().Add(5 * time.Second); live > 0 && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
			ticks, live = sshdTicks()
		}
		if live > 0 {
			tb.Logf("sshd CPU: %d connection processes still running; their time is not counted", live)
		}
		// /proc counts in USER_HZ, 100 per second on Linux.
		return time.Duration(ticks-start) * 10 * time.Millisecond
	}
}

// sshdTicks returns the CPU ticks of the sshd listeners started by this process, their own
// and those of the connection processes they have reaped, and how many connection processes
// still run.
func sshdTicks() (ticks int64, live int) {
	type proc struct {
		ppid, ticks    int64
		sshd, unshared bool
	}
	procs := map[int64]proc{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime stime cutime cstime: fields 14-17, 1-based.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 15 {
			continue
		}
		p := proc{sshd: strings.HasSuffix(s[:i], "(sshd"), unshared: strings.HasSuffix(s[:i], "(unshare")}
		p.ppid, _ = strconv.ParseInt(f[1], 10, 64)
		for _, field := range f[11:15] {
			v, _ := strconv.ParseInt(field, 10, 64)
			p.ticks += v
		}
		procs[pid] = p
	}
	// A listener is this process's sshd child, or the child of its unshare child when the
	// servers have their own processes (sshdtest.WithOwnProcesses).
	self := int64(os.Getpid())
	listener := func(p proc) bool {
		if !p.sshd {
			return false
		}
		parent, ok := procs[p.ppid]
		return p.ppid == self || ok && parent.unshared && parent.ppid == self
	}
	for _, p := range procs {
		if listener(p) {
			ticks += p.ticks
		}
	}
	for _, p := range procs {
		if parent, ok := procs[p.ppid]; ok && listener(parent) {
			live++
		}
	}
	return ticks, live
}
