package nodes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// DefaultPort is the SSH port used when a node names none.
const DefaultPort = 22

// nodesCommandTimeout bounds how long a nodes_command may run.
const nodesCommandTimeout = time.Minute

// Node is one cluster member as the inventory lists it.
type Node struct {
	Name    string // the node's name as the cluster knows it
	Address string // where to dial (host name or IP); defaults to Name
	Port    int    // SSH port; defaults to 22
	Offline bool   // marked offline: skipped by runs
}

// Inventory is the validated node list of a cluster. Nodes keep the
// configuration's order and include the master.
type Inventory struct {
	Master string
	Nodes  []Node
}

// NewInventory validates list and returns the inventory it describes, with
// Address and Port defaulted. It requires at least one node; node names that
// are host names and unique; addresses that are host names or IP literals;
// ports in 1..65535 (0 means 22); and a master that is in the list and not
// offline. Errors name the offending node. The list is copied.
func NewInventory(master string, list []Node) (*Inventory, error) {
	if len(list) == 0 {
		return nil, errors.New("inventory: no nodes")
	}
	inv := &Inventory{Master: master, Nodes: make([]Node, 0, len(list))}
	seen := make(map[string]bool, len(list))
	for _, n := range list {
		n, err := normalizeNode(n)
		if err != nil {
			return nil, fmt.Errorf("inventory: %w", err)
		}
		if seen[n.Name] {
			return nil, fmt.Errorf("inventory: node %q is listed twice", n.Name)
		}
		seen[n.Name] = true
		inv.Nodes = append(inv.Nodes, n)
	}
	if err := inv.checkMaster(); err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	return inv, nil
}

// checkMaster reports whether the master is a listed, online node.
func (inv *Inventory) checkMaster() error {
	if inv.Master == "" {
		return errors.New("no master named")
	}
	m, ok := inv.Lookup(inv.Master)
	if !ok {
		return fmt.Errorf("master %q is not in the node list", inv.Master)
	}
	if m.Offline {
		return fmt.Errorf("master %q is marked offline", inv.Master)
	}
	return nil
}

// normalizeNode validates one node and fills in its defaults.
func normalizeNode(n Node) (Node, error) {
	if err := checkHostName(n.Name); err != nil {
		return n, fmt.Errorf("node %q: name: %w", n.Name, err)
	}
	if n.Address == "" {
		n.Address = n.Name
	}
	if err := checkAddress(n.Address); err != nil {
		return n, fmt.Errorf("node %q: address %q: %w", n.Name, n.Address, err)
	}
	if n.Port == 0 {
		n.Port = DefaultPort
	}
	if n.Port < 1 || n.Port > 65535 {
		return n, fmt.Errorf("node %q: port %d is not in 1..65535", n.Name, n.Port)
	}
	return n, nil
}

// checkHostName accepts host names: dot-separated labels of letters, digits
// and '-', none empty, longer than 63 bytes or starting with '-'.
func checkHostName(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	if len(s) > 253 {
		return errors.New("longer than 253 characters")
	}
	for _, label := range strings.Split(s, ".") {
		switch {
		case label == "":
			return errors.New("not a host name: empty label")
		case len(label) > 63:
			return errors.New("not a host name: label longer than 63 characters")
		case label[0] == '-':
			return errors.New("not a host name: label starts with '-'")
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return fmt.Errorf("not a host name: %q is not allowed (letters, digits, '-' and '.' only)", r)
			}
		}
	}
	return nil
}

// checkAddress accepts IP literals (IPv6 without brackets) and host names. An
// IPv6 zone ("%eth0") is refused: netip takes any text after the '%', and an
// address must hold nothing but address characters.
func checkAddress(s string) error {
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" || strings.Contains(s, "%") {
			return errors.New("an IPv6 zone ('%...') is not supported")
		}
		return nil
	}
	if err := checkHostName(s); err != nil {
		return errors.New("not an IP address or host name")
	}
	return nil
}

// Online returns the nodes not marked offline, in inventory order.
func (inv *Inventory) Online() []Node {
	var out []Node
	for _, n := range inv.Nodes {
		if !n.Offline {
			out = append(out, n)
		}
	}
	return out
}

// Offline returns the nodes marked offline, in inventory order.
func (inv *Inventory) Offline() []Node {
	var out []Node
	for _, n := range inv.Nodes {
		if n.Offline {
			out = append(out, n)
		}
	}
	return out
}

// Lookup returns the node called name and whether it is in the inventory.
func (inv *Inventory) Lookup(name string) (Node, bool) {
	for _, n := range inv.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Node{}, false
}

// ParseNodeList parses the output of a nodes_command into an inventory with
// the given master. Each line lists one node as
//
//	NAME [ADDRESS[:PORT]] [offline]
//
// where an IPv6 address with a port is written [ADDR]:PORT. Text from '#' to
// the end of a line is a comment; blank lines are ignored. Errors name the
// line number.
func ParseNodeList(master string, out []byte) (*Inventory, error) {
	var list []Node
	firstLine := make(map[string]int)
	for i, line := range strings.Split(string(out), "\n") {
		lineNo := i + 1
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		n, err := parseNodeLine(fields)
		if err == nil {
			n, err = normalizeNode(n)
		}
		if err != nil {
			return nil, fmt.Errorf("node list: line %d: %w", lineNo, err)
		}
		if first, dup := firstLine[n.Name]; dup {
			return nil, fmt.Errorf("node list: line %d: node %q is already listed on line %d", lineNo, n.Name, first)
		}
		firstLine[n.Name] = lineNo
		list = append(list, n)
	}
	if len(list) == 0 {
		return nil, errors.New("node list: no nodes")
	}
	inv := &Inventory{Master: master, Nodes: list}
	if err := inv.checkMaster(); err != nil {
		return nil, fmt.Errorf("node list: %w", err)
	}
	return inv, nil
}

// parseNodeLine turns the fields of one node-list line into a Node.
func parseNodeLine(fields []string) (Node, error) {
	n := Node{Name: fields[0]}
	rest := fields[1:]
	if len(rest) > 0 && rest[len(rest)-1] == "offline" {
		n.Offline = true
		rest = rest[:len(rest)-1]
	}
	switch len(rest) {
	case 0:
		return n, nil
	case 1:
		addr, port, err := splitAddressPort(rest[0])
		if err != nil {
			return n, fmt.Errorf("node %q: %w", n.Name, err)
		}
		n.Address, n.Port = addr, port
		return n, nil
	default:
		return n, fmt.Errorf("node %q: unexpected %q (want NAME [ADDRESS[:PORT]] [offline])", n.Name, rest[1])
	}
}

// splitAddressPort splits ADDRESS, ADDRESS:PORT, [IPV6]:PORT or a bare IPv6
// address. A missing port is 0.
func splitAddressPort(s string) (string, int, error) {
	var host, port string
	switch {
	case strings.HasPrefix(s, "["):
		h, p, err := net.SplitHostPort(s)
		if err != nil {
			return "", 0, fmt.Errorf("address %q: want [IPV6]:PORT", s)
		}
		host, port = h, p
	case strings.Count(s, ":") == 1:
		host, port, _ = strings.Cut(s, ":")
	default:
		return s, 0, nil
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return "", 0, fmt.Errorf("address %q: port %q is not a number", s, port)
	}
	if p < 1 || p > 65535 {
		return "", 0, fmt.Errorf("address %q: port %d is not in 1..65535", s, p)
	}
	return host, p, nil
}

// LoadInventory returns the cluster's inventory. When nodesCommand is not
// empty it is run locally with `sh -c` (it is the operator's own
// configuration text), for at most a minute, and its standard output is
// parsed with ParseNodeList; otherwise the static list is validated with
// NewInventory.
func LoadInventory(ctx context.Context, master string, static []Node, nodesCommand string) (*Inventory, error) {
	if nodesCommand == "" {
		return NewInventory(master, static)
	}
	local := &Conn{name: "nodes_command", timeout: nodesCommandTimeout, tr: localTransport{}}
	res, err := local.exec(ctx, &command{line: nodesCommand, shown: nodesCommand, script: nodesCommand})
	if err != nil {
		return nil, err
	}
	inv, err := ParseNodeList(master, res.Stdout)
	if err != nil {
		return nil, fmt.Errorf("nodes_command %q: %w", nodesCommand, err)
	}
	return inv, nil
}
