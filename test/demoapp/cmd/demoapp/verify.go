package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
)

// verify asks every online node of the config for its status and succeeds only if each
// answers with this binary's version. It prints one line per node, offline ones included.
func verify(e *env, args []string) error {
	if err := noArgs("verify", args); err != nil {
		return err
	}
	cfg, err := loadConfig(e)
	if err != nil {
		return err
	}
	results := make([]string, len(cfg.nodes))
	failed := make([]bool, len(cfg.nodes))
	var wg sync.WaitGroup
	for i, n := range cfg.nodes {
		if n.offline {
			results[i] = n.name + " offline, skipped"
			continue
		}
		wg.Go(func() {
			results[i], failed[i] = probe(e, n, cfg)
		})
	}
	wg.Wait()
	nfailed, online := 0, 0
	for i, line := range results {
		fmt.Fprintln(e.stdout, line)
		if !cfg.nodes[i].offline {
			online++
		}
		if failed[i] {
			nfailed++
		}
	}
	if nfailed > 0 {
		return fmt.Errorf("verify failed on %d of %d online nodes", nfailed, online)
	}
	return nil
}

// probe checks one node and returns its line and whether it failed.
func probe(e *env, n nodeConfig, cfg *appConfig) (string, bool) {
	addr := net.JoinHostPort(n.address, strconv.Itoa(e.port))
	st, err := fetchStatus(context.Background(), addr, cfg.verifyTimeout)
	switch {
	case err != nil:
		return fmt.Sprintf("%s FAILED unreachable at %s: %v", n.name, addr, err), true
	case st.Node != n.name:
		return fmt.Sprintf("%s FAILED %s answers as node %q", n.name, addr, st.Node), true
	case st.Version != e.version:
		return fmt.Sprintf("%s FAILED version %s, want %s", n.name, st.Version, e.version), true
	}
	return fmt.Sprintf("%s ok %s (config %s)", n.name, st.Version, st.ConfigVersion), false
}
