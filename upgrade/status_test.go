package upgrade

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/layout"
)

func TestBehindNodes(t *testing.T) {
	list := []NodeStatus{
		{Name: "node1", Reachable: true, Live: "1.1.0"},
		{Name: "node2", Reachable: true, Live: "1.0.0"},
		{Name: "node3", Reachable: true, LinkError: "links disagree"},
		{Name: "node4"},
		{Name: "node5", Reachable: true, Live: "1.2.0"},
	}
	got := behindNodes("1.1.0", list)
	want := []BehindNode{{Node: "node2", Version: "1.0.0", Command: "cutover sync node2"}, {Node: "node5", Version: "1.2.0", Command: "cutover sync node5"}}
	if !slices.Equal(got, want) {
		t.Errorf("behindNodes = %+v, want %+v", got, want)
	}
	if got := behindNodes("1.1.0", list[:1]); got != nil {
		t.Errorf("behindNodes of a cluster in step = %+v, want none", got)
	}
}

// TestUnconfirmedNodes: a node that a done run left in a state it could not confirm stays
// behind until a done sync switched it; a failed sync, or a sync of other nodes, does not count.
func TestUnconfirmedNodes(t *testing.T) {
	switched := func(nodes ...string) []journal.Event {
		var res []journal.NodeResult
		for _, n := range nodes {
			res = append(res, journal.NodeResult{Node: n, OK: true})
		}
		return []journal.Event{{Stage: "switch", State: journal.Done, Nodes: res}}
	}
	left := map[string]string{factUnknownPrefix + "node3": "batch-2"}
	for _, tc := range []struct {
		name string
		runs []journal.Run
		want map[string]uint64
	}{
		{"none", []journal.Run{{ID: 1, Kind: "upgrade", Outcome: journal.Succeeded}}, map[string]uint64{}},
		{"left by a done run", []journal.Run{{ID: 4, Kind: "upgrade", Outcome: journal.Succeeded, Facts: left}}, map[string]uint64{"node3": 4}},
		{"synced since", []journal.Run{{ID: 4, Kind: "upgrade", Outcome: journal.Succeeded, Facts: left},
			{ID: 5, Kind: "sync", Outcome: journal.Succeeded, Events: switched("node3")}}, map[string]uint64{}},
		{"another node synced", []journal.Run{{ID: 4, Kind: "upgrade", Outcome: journal.Succeeded, Facts: left},
			{ID: 5, Kind: "sync", Outcome: journal.Succeeded, Events: switched("node2")}}, map[string]uint64{"node3": 4}},
		{"the sync failed", []journal.Run{{ID: 4, Kind: "upgrade", Outcome: journal.Succeeded, Facts: left},
			{ID: 5, Kind: "sync", Outcome: journal.FailedPastPONR, Events: switched("node3")}}, map[string]uint64{"node3": 4}},
	} {
		if got := unconfirmedNodes(tc.runs); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestLinkVersion(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"usr/lib/app/1.0.0", "usr/share/app/1.0.0", "usr/lib/app/1.1", "etc/app", "opt/elsewhere/1.0.0"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	paths := layout.Paths{LibDir: root + "/usr/lib", DataDir: root + "/usr/share", SysconfDir: root + "/etc", LocalstateDir: root + "/var"}
	full, err := layout.New("app", paths, "full", "")
	if err != nil {
		t.Fatal(err)
	}
	minor, err := layout.New("app", paths, "minor", "")
	if err != nil {
		t.Fatal(err)
	}
	link := full.LibLink()
	tests := []struct {
		name   string
		lay    *layout.Layout
		target string // "" for no link
		lib    bool
		want   string
	}{
		{"absolute", full, root + "/usr/lib/app/1.0.0", true, "1.0.0"},
		{"relative", full, "../../usr/lib/app/1.0.0", true, "1.0.0"},
		{"share tree behind the lib link", full, root + "/usr/share/app/1.0.0", true, root + "/usr/share/app/1.0.0"},
		{"share link", full, root + "/usr/share/app/1.0.0", false, "1.0.0"},
		{"outside the trees", full, root + "/opt/elsewhere/1.0.0", true, root + "/opt/elsewhere/1.0.0"},
		{"not a version", full, root + "/usr/lib/app/default", true, root + "/usr/lib/app/default"},
		{"minor directories", minor, root + "/usr/lib/app/1.1", true, "1.1"},
		{"missing", full, "", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(link)
			if tt.target != "" {
				if err := os.Symlink(tt.target, link); err != nil {
					t.Fatal(err)
				}
			}
			if got := linkVersion(layout.OSFS{}, tt.lay, link, tt.lib); got != tt.want {
				t.Errorf("linkVersion(-> %q) = %q, want %q", tt.target, got, tt.want)
			}
		})
	}
}
