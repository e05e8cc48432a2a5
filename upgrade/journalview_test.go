package upgrade

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/upgrade/config"
	"github.com/cutover/cutover/upgrade/upgradetest"
)

// testConfig parses a one-node config whose paths are under root and whose master is this
// host. verify is the configured verify command.
func testConfig(t *testing.T, root, verify string) *config.Config {
	t.Helper()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(upgradetest.TOML{Root: root, Master: host, Commands: [][2]string{{"verify", verify}}, NoRedistribute: true}.Render()))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestParseRunID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"1", 1, true},
		{"42", 42, true},
		{"18446744073709551615", 18446744073709551615, true},
		{"18446744073709551616", 0, false},
		{"", 0, false},
		{"0", 0, false},
		{"01", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{" 1", 0, false},
		{"1 ", 0, false},
		{"abc", 0, false},
		{"1;rm -rf /", 0, false},
		{"1e3", 0, false},
		{"0x10", 0, false},
		{"１", 0, false}, // a full-width digit
	}
	for _, tt := range tests {
		got, err := ParseRunID(tt.in)
		if tt.ok && (err != nil || got != tt.want) {
			t.Errorf("ParseRunID(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
		if !tt.ok && (err == nil || !IsBadInput(err)) {
			t.Errorf("ParseRunID(%q) = %d, %v; want a bad-input error", tt.in, got, err)
		}
	}
}

func TestReadJournal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	cfg := testConfig(t, root, "false")

	// No journal yet: no runs, and nothing is created.
	rep, err := ReadJournal(ctx, cfg, JournalOptions{})
	if err != nil || len(rep.Runs) != 0 || rep.Runs == nil {
		t.Fatalf("ReadJournal without a journal = %+v, %v; want an empty list", rep, err)
	}
	if _, err := ReadJournal(ctx, cfg, JournalOptions{Run: "1"}); !IsBadInput(err) || !strings.Contains(err.Error(), "no run 1 in the journal") {
		t.Errorf("ReadJournal(1) without a journal = %v, want bad input: no run 1", err)
	}
	if _, err := os.Stat(JournalPath(cfg)); !os.IsNotExist(err) {
		t.Fatalf("reading created the journal: %v", err)
	}

	store := journal.NewStore(JournalPath(cfg))
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	done, err := store.CreateRun(ctx, journal.Run{Kind: "upgrade", From: "1.0.0", To: "1.1.0", Direction: "upgrade", Host: "node1", PID: 7, Started: start, Offline: []string{"node4"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []journal.Event{
		{Stage: "preflight", Index: 1, State: journal.Started},
		{Stage: "preflight", Index: 1, State: journal.Done, Duration: 300 * time.Millisecond,
			Nodes: []journal.NodeResult{{Node: "node1", OK: true, Duration: time.Millisecond}}},
		{Stage: "stop-nodes", Index: 8, State: journal.Failed, Message: "node3 failed",
			Nodes: []journal.NodeResult{{Node: "node3", ExitCode: 7, Error: "node3: exit 7", StderrTail: "cannot stop"}}},
	} {
		if _, err := store.Record(ctx, done.ID, ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.SetFacts(ctx, done.ID, map[string]string{"backup": "/b.tar.gz"}); err != nil {
		t.Fatal(err)
	}
	if err := store.Finish(ctx, done.ID, journal.RolledBack, start.Add(90*time.Second)); err != nil {
		t.Fatal(err)
	}
	pending, err := store.CreateRun(ctx, journal.Run{Kind: "upgrade", From: "1.0.0", To: "1.1.0", Direction: "upgrade"})
	if err != nil {
		t.Fatal(err)
	}
	if err := journal.WriteIntent(IntentPath(cfg), journal.Intent{RunID: pending.ID, From: "1.0.0", To: "1.1.0"}); err != nil {
		t.Fatal(err)
	}

	rep, err = ReadJournal(ctx, cfg, JournalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 2 || rep.Detail {
		t.Fatalf("ReadJournal = %+v, want two runs, no detail", rep)
	}
	r1, r2 := rep.Runs[0], rep.Runs[1]
	if r1.ID != 1 || r1.Outcome != "rolled-back" || r1.Duration != 90*time.Second || r1.Pending || len(r1.Offline) != 1 || r1.Events != nil || r1.Facts != nil {
		t.Errorf("run 1 = %+v, want rolled-back after 90s, offline node4, no events or facts in the list", r1)
	}
	if r2.ID != 2 || r2.Outcome != OutcomeInterrupted || !r2.Pending || r2.Duration != 0 || r2.Offline == nil {
		t.Errorf("run 2 = %+v, want interrupted and pending, no duration, an empty offline list", r2)
	}

	// While a process holds the run lock, the run that has not ended is running.
	lock, err := journal.AcquireLock(LockPath(cfg), journal.Holder{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err = ReadJournal(ctx, cfg, JournalOptions{})
	lock.Release()
	if err != nil || rep.Runs[1].Outcome != OutcomeRunning {
		t.Errorf("ReadJournal under the lock: run 2 = %+v, %v; want running", rep.Runs[1], err)
	}

	rep, err = ReadJournal(ctx, cfg, JournalOptions{Run: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Detail || len(rep.Runs) != 1 {
		t.Fatalf("ReadJournal(1) = %+v, want the one run in detail", rep)
	}
	d := rep.Runs[0]
	if len(d.Events) != 3 || d.Events[0].State != "started" || d.Events[1].Duration != 300*time.Millisecond || d.Facts["backup"] != "/b.tar.gz" {
		t.Fatalf("run 1 in detail = %+v", d)
	}
	if n := d.Events[2].Nodes; len(n) != 1 || n[0].Node != "node3" || n[0].OK || n[0].ExitCode != 7 || n[0].StderrTail != "cannot stop" || n[0].Error != "node3: exit 7" {
		t.Errorf("stop-nodes node results = %+v, want node3 failed with exit 7 and its stderr", n)
	}
	for _, id := range []string{"3", "99999"} {
		if _, err := ReadJournal(ctx, cfg, JournalOptions{Run: id}); !IsBadInput(err) || !strings.Contains(err.Error(), "no run "+id+" in the journal") {
			t.Errorf("ReadJournal(%s) = %v, want bad input: no run %s", id, err, id)
		}
	}
	for _, id := range []string{"abc", "-1", "1;rm"} {
		if _, err := ReadJournal(ctx, cfg, JournalOptions{Run: id}); !IsBadInput(err) || !strings.Contains(err.Error(), "not a run id") {
			t.Errorf("ReadJournal(%q) = %v, want bad input: not a run id", id, err)
		}
	}
}

func TestReadJournalCorrupt(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	cfg := testConfig(t, root, "false")
	if err := os.MkdirAll(filepath.Dir(JournalPath(cfg)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(JournalPath(cfg), []byte("not a journal"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := ReadJournal(context.Background(), cfg, JournalOptions{})
	if !journal.IsCorrupt(err) || IsBadInput(err) {
		t.Errorf("ReadJournal of a corrupt journal = %v, want a corrupt-journal error", err)
	}
	if data, _ := os.ReadFile(JournalPath(cfg)); string(data) != "not a journal" {
		t.Errorf("the corrupt journal was changed: %q", data)
	}
}
