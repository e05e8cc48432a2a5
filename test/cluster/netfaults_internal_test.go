package cluster

import (
	"slices"
	"testing"
)

// TestParseSSHPorts reads the master's connections to a node's sshd from a /proc/net/tcp
// table: established and closing ones count, TIME_WAIT and other peers do not.
func TestParseSSHPorts(t *testing.T) {
	const table = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0B4D0A0A:B3F2 0C4D0A0A:0016 01 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 20 4 30 10 -1
   1: 0B4D0A0A:B3F4 0C4D0A0A:0016 06 00000000:00000000 03:00000F9B 00000000     0        0 0 3 0000000000000000
   2: 0B4D0A0A:B3F6 0D4D0A0A:0016 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 20 4 30 10 -1
   3: 0B4D0A0A:B3F8 0C4D0A0A:0016 04 00000010:00000000 01:00000064 00000003     0        0 0 1 0000000000000000
`
	got, err := parseSSHPorts(table, "10.10.77.12")
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{0xB3F2, 0xB3F8}; !slices.Equal(got, want) {
		t.Errorf("ports %v, want %v", got, want)
	}
	if _, err := parseSSHPorts(table, "10.10.77"); err == nil {
		t.Error("a malformed address: no error")
	}
}
