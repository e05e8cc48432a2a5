package upgrade

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"os/user"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cutover/cutover/upgrade/config"
)

// LoadConfig reads and validates cutover.toml at file, then asks this host for what the
// config leaves to commands: the master (cluster.master_command, when cluster.master is
// empty), the host-key alias (ssh.host_key_alias_command) and the uids of
// ssh.known_hosts_owners. Any error is bad input
// (IsBadInput).
func LoadConfig(file string) (*config.Config, error) {
	cfg, err := config.Load(file)
	if err != nil {
		return nil, badInput(err)
	}
	if cfg.Cluster.Master == "" {
		if cfg.Cluster.Master, err = localName(cfg.Cluster.MasterCommand); err != nil {
			return nil, badInput(fmt.Errorf("config %s: cluster.master_command: %w", file, err))
		}
	}
	if cmd := cfg.SSH.HostKeyAliasCommand; cmd != "" {
		if cfg.SSH.HostKeyAlias, err = localName(cmd); err != nil {
			return nil, badInput(fmt.Errorf("config %s: ssh.host_key_alias_command: %w", file, err))
		}
	}
	for _, name := range cfg.SSH.KnownHostsOwners {
		u, err := user.Lookup(name)
		if err != nil {
			return nil, badInput(fmt.Errorf("config %s: ssh.known_hosts_owners: %w", file, err))
		}
		id, err := strconv.ParseUint(u.Uid, 10, 32)
		if err != nil {
			return nil, badInput(fmt.Errorf("config %s: ssh.known_hosts_owners: user %s has uid %q", file, name, u.Uid))
		}
		cfg.SSH.KnownHostsOwnerIDs = append(cfg.SSH.KnownHostsOwnerIDs, uint32(id))
	}
	return cfg, nil
}

// localCommandTimeout bounds a command LoadConfig runs on this host.
const localCommandTimeout = 30 * time.Second

var hostName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)

// localName runs command with sh -c on this host and returns the host name it prints.
func localName(command string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), localCommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return "", fmt.Errorf("%s: %w: %s", command, err, strings.TrimSpace(stderr.String()))
		}
		return "", fmt.Errorf("%s: %w", command, err)
	}
	name := strings.TrimSpace(string(out))
	if !hostName.MatchString(name) {
		return "", fmt.Errorf("%s printed %q, not a host name", command, name)
	}
	return name, nil
}
