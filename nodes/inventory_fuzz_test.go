package nodes

import (
	"regexp"
	"strings"
	"testing"
)

// FuzzParseNodeList: whatever a nodes_command prints, the parser does not panic, and every
// node it accepts has a name and an address that can go into a connection and a command line
// unquoted: no spaces, no shell or option syntax.
func FuzzParseNodeList(f *testing.F) {
	f.Add("node1", []byte("node1 10.0.0.11\nnode2 10.0.0.12:2222\nnode3 offline\n"))
	f.Add("node1", []byte("node1\n# comment\nnode2 [::1]:22 offline\n"))
	f.Add("a", []byte("a -oProxyCommand=x\nb $(reboot)\n"))
	safe := regexp.MustCompile(`^[A-Za-z0-9.:\[\]-]+$`)
	f.Fuzz(func(t *testing.T, master string, out []byte) {
		inv, err := ParseNodeList(master, out)
		if err != nil {
			return
		}
		for _, n := range inv.Nodes {
			if !safe.MatchString(n.Name) || !safe.MatchString(n.Address) || strings.HasPrefix(n.Name, "-") || strings.HasPrefix(n.Address, "-") {
				t.Fatalf("accepted node %+v from %q", n, out)
			}
			if n.Port < 1 || n.Port > 65535 {
				t.Fatalf("accepted port %d from %q", n.Port, out)
			}
		}
	})
}
