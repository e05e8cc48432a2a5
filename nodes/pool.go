package nodes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// SSHConfig defaults.
const (
	DefaultConnectTimeout    = 10 * time.Second
	DefaultCommandTimeout    = 10 * time.Minute
	DefaultKeepaliveInterval = 5 * time.Second
	DefaultKeepaliveMax      = 3
	DefaultFileTimeout       = time.Minute
)

// SSHConfig says how to reach nodes over SSH. Zero durations and counts take
// the defaults above.
type SSHConfig struct {
	User              string
	IdentityFiles     []string      // unencrypted private keys; a missing file is an error naming it
	AgentSocket       string        // ssh-agent socket; "" means none (callers pass os.Getenv("SSH_AUTH_SOCK"))
	KnownHosts        []string      // known_hosts files; files that do not exist are skipped, but one must exist
	HostKeyAlias      string        // a name every node's host key may be known under, tried after its own (Ganeti's cluster name)
	KnownHostsOwners  []uint32      // besides root, the users a known_hosts file may belong to (Ganeti's gnt-masterd)
	ConnectTimeout    time.Duration // TCP connect plus SSH handshake; default 10s
	CommandTimeout    time.Duration // per command; default 10m
	KeepaliveInterval time.Duration // default 5s
	KeepaliveMax      int           // missed keepalives before the connection is declared dead; default 3
	FileTimeout       time.Duration // per SFTP operation (a stat, a whole file read or write); default 1m, never more than CommandTimeout
}

// withDefaults returns cfg with zero values replaced by the defaults.
func (cfg SSHConfig) withDefaults() SSHConfig {
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.CommandTimeout <= 0 {
		cfg.CommandTimeout = DefaultCommandTimeout
	}
	if cfg.KeepaliveInterval <= 0 {
		cfg.KeepaliveInterval = DefaultKeepaliveInterval
	}
	if cfg.KeepaliveMax <= 0 {
		cfg.KeepaliveMax = DefaultKeepaliveMax
	}
	if cfg.FileTimeout <= 0 {
		cfg.FileTimeout = DefaultFileTimeout
	}
	// A file operation has at most a command's deadline: a node whose SFTP server stops
	// answering fails within ConnectTimeout + CommandTimeout, like one whose commands hang.
	cfg.FileTimeout = min(cfg.FileTimeout, cfg.CommandTimeout)
	return cfg
}

// Pool holds at most one connection per node of an inventory, dialed on
// first use and reused for every command and SFTP operation. The master
// (the inventory's Master) is reached locally, never over SSH. A connection
// found dead is dropped, and the next Conn call for its node dials again.
// A Pool is safe for concurrent use.
type Pool struct {
	inv      *Inventory
	cfg      SSHConfig
	auth     ssh.AuthMethod // nil when no node needs SSH
	hostKeys *hostKeys
	agent    net.Conn

	mu     sync.Mutex
	closed bool
	slots  map[string]*slot
	tag    string // the command tag; see SetCommandTag
	owner  string // the connections' owner; see SetConnectionOwner

	noShell   bool   // every command has an SSH session of its own (tests and benchmarks)
	shellBash string // the command shell's program when not bash (tests)
}

// slot is one node's place in the pool.
type slot struct {
	dialing chan struct{} // held (one element) while the node is dialed
	conn    *Conn         // guarded by Pool.mu
}

// NewPool returns a pool for the inventory's nodes. It loads the identity
// files, connects to the agent and reads known_hosts up front, so that a
// configuration mistake shows before any node is contacted. A cluster of the
// master alone needs no SSH settings.
func NewPool(inv *Inventory, cfg SSHConfig) (*Pool, error) {
	if inv == nil {
		return nil, errors.New("new pool: no inventory")
	}
	// Validate again: an Inventory may have been built by hand.
	inv, err := NewInventory(inv.Master, inv.Nodes)
	if err != nil {
		return nil, fmt.Errorf("new pool: %w", err)
	}
	p := &Pool{inv: inv, cfg: cfg.withDefaults(), slots: make(map[string]*slot, len(inv.Nodes))}
	needSSH := false
	for _, n := range inv.Nodes {
		s := &slot{dialing: make(chan struct{}, 1)}
		if n.Name == inv.Master {
			s.conn = &Conn{name: n.Name, timeout: p.cfg.CommandTimeout, tr: localTransport{node: n.Name}, pool: p}
		} else {
			needSSH = true
		}
		p.slots[n.Name] = s
	}
	if !needSSH {
		return p, nil
	}
	if err := p.loadSSH(); err != nil {
		if p.agent != nil {
			p.agent.Close()
		}
		return nil, err
	}
	return p, nil
}

// loadSSH prepares authentication and host-key checking.
func (p *Pool) loadSSH() error {
	if p.cfg.User == "" {
		return errors.New("no ssh user configured")
	}
	var signers []ssh.Signer
	for _, f := range p.cfg.IdentityFiles {
		s, err := loadIdentity(f)
		if err != nil {
			return err
		}
		signers = append(signers, s)
	}
	var agentClient agent.ExtendedAgent
	if p.cfg.AgentSocket != "" {
		conn, err := net.Dial("unix", p.cfg.AgentSocket)
		if err != nil {
			return fmt.Errorf("ssh-agent %s: %w (unset SSH_AUTH_SOCK to log in with the identity files only)", p.cfg.AgentSocket, err)
		}
		p.agent = conn
		agentClient = agent.NewClient(conn)
	}
	if len(signers) == 0 && agentClient == nil {
		return errors.New("no identity files and no ssh-agent: nothing to log in with")
	}
	// One public-key method offering every key: the client tries each kind
	// of method once, so keys split across methods would go untried.
	p.auth = ssh.PublicKeysCallback(func() ([]ssh.Signer, error) {
		if agentClient == nil {
			return signers, nil
		}
		fromAgent, err := agentClient.Signers()
		if err != nil && len(signers) == 0 {
			return nil, fmt.Errorf("ssh-agent %s: %w", p.cfg.AgentSocket, err)
		}
		return append(append([]ssh.Signer(nil), signers...), fromAgent...), nil
	})
	hk, err := loadHostKeys(p.cfg.KnownHosts, p.cfg.KnownHostsOwners)
	if err != nil {
		return err
	}
	p.hostKeys = hk
	return nil
}

// loadIdentity reads an unencrypted private key file, which must be
// protected as OpenSSH requires (see openTrusted).
func loadIdentity(file string) (ssh.Signer, error) {
	f, err := openTrusted("identity file", file, true, maxIdentitySize)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := readTrusted(f, "identity file", maxIdentitySize)
	if err != nil {
		return nil, err
	}
	s, err := ssh.ParsePrivateKey(data)
	var missing *ssh.PassphraseMissingError
	if errors.As(err, &missing) {
		return nil, fmt.Errorf("identity file %s: the key is encrypted; load it into ssh-agent instead", file)
	}
	if err != nil {
		return nil, fmt.Errorf("identity file %s: %w", file, err)
	}
	return s, nil
}

// SetCommandTag names the execution that the pool's commands belong to,
// such as "run-7": lower-case letters, digits and '-', at most 64
// characters; "" (the default) records nothing. Each command started after
// the call is recorded on its node under the tag while it runs (see the
// package documentation). Before a connection first runs a command or
// changes a file with a tag set, every command that an earlier execution
// recorded on its node under the same tag (and node name) and that still
// runs is killed with its process group, so a resumed run never races a
// command of a dead one. Over SSH that reap runs in the same session as
// the connection's first command, ahead of it: it costs no session of its
// own unless a file is changed before any command runs. Records of other
// tags are left alone. At most one Pool per tag may be in use at a time.
func (p *Pool) SetCommandTag(tag string) error {
	if err := checkCommandTag(tag); err != nil {
		return err
	}
	p.mu.Lock()
	p.tag = tag
	p.mu.Unlock()
	return nil
}

// SetConnectionOwner names the master's state that the pool's connections work for, with the
// same characters as a command tag; "" (the default) names none. With an owner and a command
// tag set, a connection's reap (before its first command or file change) ends the node's
// older SSH connections of the same owner on the node's side, the SFTP requests they still
// carry with them, and records its own there, so that a request of a connection cutover gave
// up never acts once a newer one has started (see connScript). Connections of other owners
// are left alone.
func (p *Pool) SetConnectionOwner(owner string) error {
	if err := checkCommandTag(owner); err != nil {
		return fmt.Errorf("connection owner: %w", err)
	}
	p.mu.Lock()
	p.owner = owner
	p.mu.Unlock()
	return nil
}

// connectionOwner returns the owner set by SetConnectionOwner.
func (p *Pool) connectionOwner() string {
	if p == nil {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.owner
}

// commandTag returns the tag set by SetCommandTag.
func (p *Pool) commandTag() string {
	if p == nil {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tag
}

// Conn returns the connection to the node called name, dialing it when the
// pool holds none or the one it holds is dead. Concurrent callers for one
// node share a single dial. Offline nodes are reached like any other:
// leaving them out is up to the caller (see Inventory.Online). With a
// command tag set, the connection kills what earlier commands of the tag
// left running on the node before its first command or file change (see
// SetCommandTag).
func (p *Pool) Conn(ctx context.Context, name string) (*Conn, error) {
	n, ok := p.inv.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("%s: not in the inventory", name)
	}
	p.mu.Lock()
	s := p.slots[name]
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("%s: connect: pool is closed", name)
	}
	select {
	case s.dialing <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: connect: %w", name, ctx.Err())
	}
	defer func() { <-s.dialing }()

	p.mu.Lock()
	old := s.conn
	p.mu.Unlock()
	if old != nil && old.alive() {
		return old, nil
	}
	if old != nil {
		old.close()
	}
	sc, err := p.dialSSH(ctx, n)
	if err != nil {
		return nil, unreachable(ctx, n, err)
	}
	c := &Conn{name: name, timeout: p.cfg.CommandTimeout, tr: &sshTransport{c: sc, node: name, pool: p}, pool: p}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.close()
		return nil, fmt.Errorf("%s: connect: pool is closed", name)
	}
	s.conn = c
	return c, nil
}

// unreachableError is a node that could not be connected to at all (its name does not
// resolve, nothing answers on its port, the connect timed out), with the operator's way
// forward. A refused host key or login is not one: those keep their own message.
type unreachableError struct {
	dial *dialError
	node Node
}

func (e *unreachableError) Error() string {
	d := e.dial
	cause := fmt.Sprint(d.err)
	var dns *net.DNSError
	switch {
	case d.timeout > 0:
		cause = fmt.Sprintf("connection timed out after %s", d.timeout)
	case errors.As(d.err, &dns) && dns.Name != "":
		cause = fmt.Sprintf("lookup %s: %s", dns.Name, dns.Err) // without the resolver's address
	}
	next := fmt.Sprintf("if the node is down for long, mark it offline = true in the node list (or in what nodes_command prints) and bring it back later with 'cutover sync %s'", e.node.Name)
	if e.node.Offline {
		next = fmt.Sprintf("the node is marked offline; once it answers, bring it back with 'cutover sync %s'", e.node.Name)
	}
	return fmt.Sprintf("%s: %s %s: %s; %s", d.node, d.op, d.addr, cause, next)
}

func (e *unreachableError) Unwrap() error { return e.dial }

// IsUnreachable reports whether err says a node could not be connected to at all: its name
// does not resolve, nothing answers on its SSH port or the connect timed out. Its message
// ends with the operator's next step (marking the node offline); a refused host key or login
// is not unreachable.
func IsUnreachable(err error) bool {
	var ue *unreachableError
	return errors.As(err, &ue)
}

// unreachable gives a failed TCP connect to n its next step (see unreachableError); other
// failures, and a dial that ctx ended, are returned as they are.
func unreachable(ctx context.Context, n Node, err error) error {
	var de *dialError
	if !errors.As(err, &de) || de.op != "dial" || ctx.Err() != nil {
		return err
	}
	return &unreachableError{dial: de, node: n}
}

// Close closes every connection. Commands still running on them fail.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	var conns []*Conn
	for _, s := range p.slots {
		if s.conn != nil {
			conns = append(conns, s.conn)
			s.conn = nil
		}
	}
	p.mu.Unlock()
	var errs []error
	for _, c := range conns {
		if err := c.close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, fmt.Errorf("%s: close: %w", c.name, err))
		}
	}
	if p.agent != nil {
		p.agent.Close()
	}
	return errors.Join(errs...)
}
