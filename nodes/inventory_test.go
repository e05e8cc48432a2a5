package nodes_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cutover/cutover/nodes"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// TestParseNodeList parses every testdata/nodelists/*.txt (its first line
// names the master: "# master: NAME") and compares the inventory, or the
// error, with the .golden file next to it.
func TestParseNodeList(t *testing.T) {
	t.Parallel()
	inputs, err := filepath.Glob("testdata/nodelists/*.txt")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no node list fixtures: %v", err)
	}
	for _, in := range inputs {
		t.Run(filepath.Base(in), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := bytes.Cut(data, []byte("\n"))
			master, ok := strings.CutPrefix(string(first), "# master: ")
			if !ok {
				t.Fatalf("%s: first line must be '# master: NAME'", in)
			}
			inv, err := nodes.ParseNodeList(master, data)
			got := formatInventory(inv, err)
			compareGolden(t, strings.TrimSuffix(in, ".txt")+".golden", got)
		})
	}
}

// formatInventory renders an inventory, or the error, for golden files.
func formatInventory(inv *nodes.Inventory, err error) string {
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "master %s\n", inv.Master)
	for _, n := range inv.Nodes {
		fmt.Fprintf(&b, "%s address=%s port=%d offline=%v\n", n.Name, n.Address, n.Port, n.Offline)
	}
	return b.String()
}

// compareGolden compares got with the golden file, rewriting it with -update.
func compareGolden(t *testing.T, golden, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("got:\n%s\nwant (%s):\n%s", got, golden, want)
	}
}

func TestNewInventory(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		master  string
		list    []nodes.Node
		want    []nodes.Node // with defaults filled
		wantErr string
	}{
		{name: "defaults", master: "n1",
			list: []nodes.Node{{Name: "n1"}, {Name: "n2", Address: "10.0.0.2", Port: 2222}, {Name: "n3.example", Offline: true}},
			want: []nodes.Node{{Name: "n1", Address: "n1", Port: 22}, {Name: "n2", Address: "10.0.0.2", Port: 2222},
				{Name: "n3.example", Address: "n3.example", Port: 22, Offline: true}}},
		{name: "ipv6 address", master: "n1", list: []nodes.Node{{Name: "n1", Address: "fd00::1"}},
			want: []nodes.Node{{Name: "n1", Address: "fd00::1", Port: 22}}},
		{name: "no nodes", master: "n1", wantErr: "inventory: no nodes"},
		{name: "empty name", master: "n1", list: []nodes.Node{{Name: "n1"}, {}}, wantErr: `node "": name: empty`},
		{name: "underscore", master: "n1", list: []nodes.Node{{Name: "n1"}, {Name: "n_2"}}, wantErr: `node "n_2": name: not a host name`},
		{name: "leading dash", master: "n1", list: []nodes.Node{{Name: "n1"}, {Name: "-oProxyCommand=x"}}, wantErr: `node "-oProxyCommand=x": name`},
		{name: "label with leading dash", master: "n1", list: []nodes.Node{{Name: "n1"}, {Name: "a.-b"}}, wantErr: `node "a.-b": name`},
		{name: "empty label", master: "n1", list: []nodes.Node{{Name: "n1"}, {Name: "a..b"}}, wantErr: `node "a..b": name`},
		{name: "space in name", master: "n1", list: []nodes.Node{{Name: "n1"}, {Name: "a b"}}, wantErr: `node "a b": name`},
		{name: "unicode name", master: "n1", list: []nodes.Node{{Name: "n1"}, {Name: "nödé"}}, wantErr: `node "nödé": name`},
		{name: "long label", master: "n1", list: []nodes.Node{{Name: "n1"}, {Name: strings.Repeat("a", 64)}}, wantErr: "label longer than 63"},
		{name: "shell in address", master: "n1", list: []nodes.Node{{Name: "n1"}, {Name: "n2", Address: "$(reboot)"}},
			wantErr: `node "n2": address "$(reboot)": not an IP address or host name`},
		{name: "space in address", master: "n1", list: []nodes.Node{{Name: "n1"}, {Name: "n2", Address: "10.0.0.1 x"}}, wantErr: `node "n2": address`},
		{name: "address with port", master: "n1", list: []nodes.Node{{Name: "n1"}, {Name: "n2", Address: "10.0.0.1:22"}}, wantErr: `node "n2": address`},
		{name: "port too big", master: "n1", list: []nodes.Node{{Name: "n1", Port: 65536}}, wantErr: `node "n1": port 65536 is not in 1..65535`},
		{name: "negative port", master: "n1", list: []nodes.Node{{Name: "n1", Port: -1}}, wantErr: `node "n1": port -1`},
		{name: "duplicate", master: "n1", list: []nodes.Node{{Name: "n1"}, {Name: "n2"}, {Name: "n2", Address: "x"}}, wantErr: `node "n2" is listed twice`},
		{name: "master missing", master: "n9", list: []nodes.Node{{Name: "n1"}}, wantErr: `master "n9" is not in the node list`},
		{name: "master empty", master: "", list: []nodes.Node{{Name: "n1"}}, wantErr: "no master named"},
		{name: "master offline", master: "n1", list: []nodes.Node{{Name: "n1", Offline: true}}, wantErr: `master "n1" is marked offline`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inv, err := nodes.NewInventory(tt.master, tt.list)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("NewInventory: err = %v, want %q", err, tt.wantErr)
				}
				if inv != nil {
					t.Errorf("NewInventory returned an inventory with an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(inv.Nodes, tt.want) {
				t.Errorf("Nodes = %+v, want %+v", inv.Nodes, tt.want)
			}
		})
	}
}

func TestInventoryQueries(t *testing.T) {
	t.Parallel()
	list := []nodes.Node{{Name: "a"}, {Name: "b", Offline: true}, {Name: "c"}, {Name: "d", Offline: true}}
	inv, err := nodes.NewInventory("a", list)
	if err != nil {
		t.Fatal(err)
	}
	list[0].Name = "changed" // the inventory holds its own copy
	names := func(ns []nodes.Node) string {
		var s []string
		for _, n := range ns {
			s = append(s, n.Name)
		}
		return strings.Join(s, ",")
	}
	if got := names(inv.Online()); got != "a,c" {
		t.Errorf("Online = %s, want a,c", got)
	}
	if got := names(inv.Offline()); got != "b,d" {
		t.Errorf("Offline = %s, want b,d", got)
	}
	if n, ok := inv.Lookup("c"); !ok || n.Address != "c" || n.Port != 22 {
		t.Errorf("Lookup(c) = %+v, %v; want node c with defaults", n, ok)
	}
	if _, ok := inv.Lookup("changed"); ok {
		t.Error("Lookup(changed) found a node: the inventory shares the caller's slice")
	}
	if _, ok := inv.Lookup("zz"); ok {
		t.Error("Lookup(zz) = true, want false")
	}
}

func TestLoadInventory(t *testing.T) {
	t.Parallel()
	static := []nodes.Node{{Name: "s1"}, {Name: "s2"}}
	tests := []struct {
		name    string
		master  string
		command string
		want    string // formatInventory output, or the error's substring
	}{
		{name: "static list", master: "s1", want: "master s1\ns1 address=s1 port=22 offline=false\ns2 address=s2 port=22 offline=false\n"},
		{name: "command", master: "n1", command: `printf 'n1\nn2 10.0.0.2:2200 offline\n'`,
			want: "master n1\nn1 address=n1 port=22 offline=false\nn2 address=10.0.0.2 port=2200 offline=true\n"},
		{name: "command fails", master: "n1", command: "echo 'cannot reach the cluster' >&2; exit 3",
			want: `error: nodes_command: run "echo 'cannot reach the cluster' >&2; exit 3": exit 3: cannot reach the cluster`},
		{name: "command prints a bad line", master: "n1", command: "echo n1; echo 'n2 a b'",
			want: `error: nodes_command "echo n1; echo 'n2 a b'": node list: line 2: node "n2": unexpected "b"`},
		{name: "command prints nothing", master: "n1", command: "true", want: "node list: no nodes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inv, err := nodes.LoadInventory(context.Background(), tt.master, static, tt.command)
			got := formatInventory(inv, err)
			if !strings.Contains(got, tt.want) {
				t.Errorf("LoadInventory:\n%s\nwant it to contain:\n%s", got, tt.want)
			}
		})
	}

	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := nodes.LoadInventory(ctx, "n1", nil, "sleep 10")
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	})
}
