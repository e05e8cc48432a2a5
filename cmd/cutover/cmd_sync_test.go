package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/cutover/cutover/journal"
)

// addUnreachableNode adds node2 to the local cluster's config, at a port of 127.0.0.1 that
// hangs up on every connection, with the SSH settings a pool needs.
func (lc *localCluster) addUnreachableNode() {
	lc.t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		lc.t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(key, "")
	if err != nil {
		lc.t.Fatal(err)
	}
	lc.write("id_ed25519", string(pem.EncodeToMemory(block)))
	if err := os.Chmod(lc.path("id_ed25519"), 0o600); err != nil {
		lc.t.Fatal(err)
	}
	lc.write("known_hosts", "")
	// node2 hangs up on every connection, as a node whose sshd is broken.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		lc.t.Fatal(err)
	}
	lc.t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	node := fmt.Sprintf("[[cluster.node]]\nname = \"node2\"\naddress = \"127.0.0.1\"\nport = %d\n"+
		"[ssh]\nuser = \"root\"\nidentity_files = [%q]\nknown_hosts = [%q]\nconnect_timeout = \"2s\"\n[commands]",
		port, lc.path("id_ed25519"), lc.path("known_hosts"))
	lc.writeConfig(strings.Replace(lc.read("cutover.toml"), "[commands]", node, 1))
}

// TestSyncRefusals: bad input, the wrong host, a pending run and a node that cannot be reached
// are refused with their exit codes, and nothing changes. The cluster is the local master and
// node2, which does not answer.
func TestSyncRefusals(t *testing.T) {
	t.Setenv("SSH_AUTH_SOCK", "")
	host, _ := os.Hostname()
	tests := []struct {
		name     string
		setup    func(lc *localCluster)
		args     []string
		wantCode int
		wantErr  string
		wantOut  string
	}{
		{"no node", nil, []string{"sync"}, exitUsage, "at least one NODE", ""},
		{"flag after a node", nil, []string{"sync", "--yes", "node2", "--dry-run"}, exitUsage, "flags go before", ""},
		{"the master", nil, []string{"sync", "--yes", host}, exitUsage, "is the master", ""},
		{"unknown node", nil, []string{"sync", "--yes", "node9"}, exitUsage, `unknown node "node9"`, ""},
		{"hostile name", nil, []string{"sync", "--yes", "node9; touch /tmp/pwned"}, exitUsage, `unknown node "node9; touch /tmp/pwned"`, ""},
		{"not the master", func(lc *localCluster) {
			lc.writeConfig(strings.ReplaceAll(lc.read("cutover.toml"), fmt.Sprintf("%q", host), `"elsewhere"`))
		}, []string{"sync", "--yes", "node2"}, exitNotMaster, "not the cluster's master", ""},
		{"run pending", func(lc *localCluster) {
			lc.mkdir("state")
			if err := journal.WriteIntent(lc.path("state/intent.json"), journal.Intent{RunID: 7, From: "1.0.0", To: "1.1.0", Direction: "upgrade"}); err != nil {
				t.Fatal(err)
			}
		}, []string{"sync", "--yes", "node2"}, exitFailed, "run 7 (1.0.0 -> 1.1.0) is pending", ""},
		{"node unreachable", nil, []string{"sync", "--yes", "node2"}, exitFailed, "node2: ", "nothing was changed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lc := newLocalCluster(t, "1.1.0", "1.0.0", "1.1.0")
			lc.addUnreachableNode()
			if tt.setup != nil {
				tt.setup(lc)
			}
			before := lc.snapshot()
			code, out, errOut := lc.cutover(tt.args...)
			t.Logf("exit %d\n%s%s", code, out, errOut)
			if code != tt.wantCode || !strings.Contains(errOut, tt.wantErr) || !strings.Contains(out, tt.wantOut) {
				t.Errorf("exit %d, stderr %q, stdout %q; want exit %d, %q and %q", code, errOut, out, tt.wantCode, tt.wantErr, tt.wantOut)
			}
			if !strings.HasPrefix(errOut, "cutover: ") || strings.Contains(errOut, "panic") {
				t.Errorf("stderr %q is not a cutover: error", errOut)
			}
			if after := lc.snapshot(); after != before {
				t.Errorf("a refused sync changed the cluster:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if runs, _ := journal.NewStore(lc.path("state/journal.db")).Runs(context.Background()); len(runs) > 0 {
				t.Errorf("a refused sync journaled %d runs", len(runs))
			}
		})
	}
}

// TestSyncLocked: a sync while another run holds the lock exits 4, naming the holder.
func TestSyncLocked(t *testing.T) {
	t.Setenv("SSH_AUTH_SOCK", "")
	lc := newLocalCluster(t, "1.1.0", "1.0.0", "1.1.0")
	lc.addUnreachableNode()
	lc.mkdir("state")
	lock, err := journal.AcquireLock(lc.path("state/lock"), journal.Holder{Host: "node9", PID: 4242})
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	code, _, errOut := lc.cutover("sync", "--yes", "node2")
	if code != exitLocked || !strings.Contains(errOut, "4242") {
		t.Errorf("exit %d, stderr %q; want %d naming pid 4242", code, errOut, exitLocked)
	}
}

// TestSyncJSON: the last line of --output json is a done event with the sync's fields.
func TestSyncJSON(t *testing.T) {
	t.Setenv("SSH_AUTH_SOCK", "")
	lc := newLocalCluster(t, "1.1.0", "1.0.0", "1.1.0")
	lc.addUnreachableNode()
	start := time.Now()
	code, out, _ := lc.cutover("--output", "json", "sync", "--yes", "node2")
	if code != exitFailed {
		t.Fatalf("exit %d, want %d\n%s", code, exitFailed, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var done map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &done); err != nil {
		t.Fatalf("last line %q: %v", lines[len(lines)-1], err)
	}
	if done["type"] != "done" || done["exit"] != float64(exitFailed) || done["to"] != "1.1.0" || !strings.Contains(fmt.Sprint(done["error"]), "node2") {
		t.Errorf("done event = %v", done)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("refusing an unreachable node took %s", d)
	}
}
