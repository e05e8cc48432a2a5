package nodes

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// hostKeys is the strict host-key database built from known_hosts files.
type hostKeys struct {
	files    []string          // the files that exist and were read
	names    map[string]string // the files' names by the descriptor path they were read from
	callback ssh.HostKeyCallback
}

// loadHostKeys reads the known_hosts files that exist; at least one must.
// Each must be protected as openTrusted requires (or owned by one of owners):
// whoever can edit it chooses which hosts cutover runs commands on as root.
func loadHostKeys(files []string, owners []uint32) (*hostKeys, error) {
	var existing, opened []string
	names := map[string]string{}
	for _, name := range files {
		f, err := openTrustedBy("known_hosts", name, false, maxKnownHostsSize, owners)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		defer f.Close()
		// The database reads the checked descriptor, not the name again.
		existing = append(existing, name)
		opened = append(opened, fdPath(f))
		names[fdPath(f)] = name
	}
	if len(existing) == 0 {
		if len(files) == 0 {
			return nil, errors.New("no known_hosts files configured")
		}
		return nil, fmt.Errorf("none of the known_hosts files exists (%s)", strings.Join(files, ", "))
	}
	cb, err := knownhosts.New(opened...)
	if err != nil {
		for fd, name := range names {
			err = errors.New(strings.ReplaceAll(err.Error(), fd+":", name+":"))
		}
		return nil, fmt.Errorf("read known_hosts: %w", err)
	}
	return &hostKeys{files: existing, names: names, callback: cb}, nil
}

// known returns the keys known_hosts holds for hostport (host:port).
func (h *hostKeys) known(hostport string) []knownhosts.KnownKey {
	// A probe key matches nothing, so the database answers with every key it
	// holds for the host.
	err := h.callback(hostport, probeAddr(hostport), probeKey{})
	var ke *knownhosts.KeyError
	if errors.As(err, &ke) {
		return h.named(ke.Want)
	}
	return nil
}

// named gives keys the names of the files they come from.
func (h *hostKeys) named(keys []knownhosts.KnownKey) []knownhosts.KnownKey {
	out := make([]knownhosts.KnownKey, len(keys))
	for i, k := range keys {
		if n, ok := h.names[k.Filename]; ok {
			k.Filename = n
		}
		out[i] = k
	}
	return out
}

// pick returns the first of the candidate host:port names that known_hosts
// holds keys for, and the host key algorithms those keys allow. It returns
// "" when the host is unknown under every name.
func (h *hostKeys) pick(candidates ...string) (string, []string) {
	for _, hp := range candidates {
		keys := h.known(hp)
		if len(keys) == 0 {
			continue
		}
		var algos []string
		seen := map[string]bool{}
		for _, k := range keys {
			for _, a := range algorithmsFor(k.Key.Type()) {
				if !seen[a] {
					seen[a] = true
					algos = append(algos, a)
				}
			}
		}
		return hp, algos
	}
	return "", nil
}

// algorithmsFor lists the signature algorithms a host key of the given type
// can be used with.
func algorithmsFor(keyType string) []string {
	if keyType == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{keyType}
}

// check returns the host-key callback for a host known under hostport.
func (h *hostKeys) check(hostport string) ssh.HostKeyCallback {
	return func(_ string, remote net.Addr, key ssh.PublicKey) error {
		err := h.callback(hostport, remote, key)
		if err == nil {
			return nil
		}
		he := &hostKeyError{host: hostport, files: h.files, got: key}
		var ke *knownhosts.KeyError
		var re *knownhosts.RevokedError
		switch {
		case errors.As(err, &ke) && len(ke.Want) == 0:
			he.kind = hostUnknown
		case errors.As(err, &ke):
			he.kind = hostMismatch
			he.want = h.named(ke.Want)
		case errors.As(err, &re):
			he.kind = hostRevoked
			he.want = h.named([]knownhosts.KnownKey{re.Revoked})
		default:
			return err
		}
		return he
	}
}

// unknownHost is the error for a host known_hosts holds no key for.
func (h *hostKeys) unknownHost(hostport string) error {
	return &hostKeyError{host: hostport, files: h.files, kind: hostUnknown}
}

type hostKeyProblem int

const (
	hostUnknown hostKeyProblem = iota
	hostMismatch
	hostRevoked
)

// hostKeyError is a host key refused by the strict check.
type hostKeyError struct {
	host  string
	files []string
	kind  hostKeyProblem
	got   ssh.PublicKey
	want  []knownhosts.KnownKey
}

func (e *hostKeyError) Error() string {
	switch e.kind {
	case hostUnknown:
		return fmt.Sprintf("host %s is not in known_hosts (%s); add its key after checking the fingerprint",
			knownhosts.Normalize(e.host), strings.Join(e.files, ", "))
	case hostRevoked:
		return fmt.Sprintf("host key %s of %s is revoked in %s", keyName(e.got), knownhosts.Normalize(e.host), where(e.want))
	default:
		return fmt.Sprintf("host key %s of %s does not match known_hosts (%s): the host's key changed or this is not the host you expect",
			keyName(e.got), knownhosts.Normalize(e.host), where(e.want))
	}
}

// IsUnknownHost reports whether err says a host is not in known_hosts.
func IsUnknownHost(err error) bool {
	var he *hostKeyError
	return errors.As(err, &he) && he.kind == hostUnknown
}

// IsHostKeyMismatch reports whether err says a host presented a key that
// known_hosts does not hold for it (or holds as revoked).
func IsHostKeyMismatch(err error) bool {
	var he *hostKeyError
	return errors.As(err, &he) && he.kind != hostUnknown
}

func keyName(k ssh.PublicKey) string {
	if k == nil {
		return ""
	}
	return k.Type() + " " + ssh.FingerprintSHA256(k)
}

func where(keys []knownhosts.KnownKey) string {
	var locs []string
	for _, k := range keys {
		locs = append(locs, fmt.Sprintf("%s:%d", k.Filename, k.Line))
	}
	return strings.Join(locs, ", ")
}

// probeKey is a public key of a type no known_hosts line holds.
type probeKey struct{}

func (probeKey) Type() string { return "cutover-probe@invalid" }
func (probeKey) Marshal() []byte {
	return ssh.Marshal(struct{ Type string }{"cutover-probe@invalid"})
}
func (probeKey) Verify([]byte, *ssh.Signature) error { return errors.New("probe key") }

// probeAddr is the remote address handed to the database when probing.
type probeAddr string

func (a probeAddr) Network() string { return "tcp" }
func (a probeAddr) String() string  { return string(a) }
