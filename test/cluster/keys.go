package cluster

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// masterKey is root's SSH key on the master, in OpenSSH's file formats.
type masterKey struct {
	private []byte // id_ed25519
	public  []byte // id_ed25519.pub, also the line of every node's authorized_keys
}

// newMasterKey generates an ed25519 key pair.
func newMasterKey(comment string) (masterKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return masterKey{}, fmt.Errorf("generate master key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return masterKey{}, fmt.Errorf("encode master key: %w", err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return masterKey{}, fmt.Errorf("encode master public key: %w", err)
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub))) + " " + comment + "\n"
	return masterKey{private: pem.EncodeToMemory(block), public: []byte(line)}, nil
}

// knownHostsLine returns node n's known_hosts line, naming it by name and address, for the
// contents of its host public key file.
func knownHostsLine(n Node, pubFile string) (string, error) {
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(pubFile))
	if err != nil {
		return "", fmt.Errorf("%s: parse host key: %w", n.Name, err)
	}
	return n.Name + "," + n.Address + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))) + "\n", nil
}

// writeKnownHosts waits until every node has generated its host key (at first boot), then
// writes the master's /root/.ssh/known_hosts with every node's key.
func (c *Cluster) writeKnownHosts(ctx context.Context) error {
	lines := make([]string, len(c.Nodes))
	err := forEach(c.Nodes, func(i int, n Node) error {
		ctx, cancel := withDefaultTimeout(ctx, 60*time.Second)
		defer cancel()
		var last error
		var poll Poll
		for {
			// The file may exist before ssh-keygen has written the key into it.
			res, err := c.Exec(ctx, n.Name, "cat", hostKeyPub)
			if err == nil && res.ExitCode == 0 {
				if lines[i], last = knownHostsLine(n, res.Stdout); last == nil {
					return nil
				}
			}
			if err := poll.WaitContext(ctx); err != nil {
				if last != nil {
					return last
				}
				return fmt.Errorf("%s: wait for the host key: %w", n.Name, err)
			}
		}
	})
	if err != nil {
		return err
	}
	content := []byte(strings.Join(lines, ""))
	res, err := c.execInput(ctx, c.Master, content, "sh", "-c",
		"cat >"+knownHosts+".tmp && chmod 0644 "+knownHosts+".tmp && mv "+knownHosts+".tmp "+knownHosts)
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		return fmt.Errorf("%s: write %s: %w", c.Master, knownHosts, err)
	}
	return nil
}
