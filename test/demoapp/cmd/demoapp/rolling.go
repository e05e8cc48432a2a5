package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// drainedDir holds, on the master, one file per node taken out of service by "node drain":
// the load client sends it nothing until "node undrain".
const drainedDir = "/var/lib/demoapp/drained"

// loadStopFile ends a running "load" early.
const loadStopFile = "/run/demoapp/load.stop"

// drainGrace is how long "node drain" waits after taking a node out of service, so that
// requests already sent to it finish before its daemon stops.
const drainGrace = 300 * time.Millisecond

// rollingFrom names, per minor, the older minor whose config its daemon also reads: 1.2 runs
// beside 1.1 during a rolling upgrade or downgrade, each on the config the cluster has.
var rollingFrom = map[string]string{"1.2": "1.1"}

// nodeArg checks that args is one node name of the config and returns it.
func nodeArg(e *env, what string, args []string) (*appConfig, nodeConfig, error) {
	if len(args) != 1 {
		return nil, nodeConfig{}, usageError("usage: demoapp %s NODE", what)
	}
	cfg, err := loadConfig(e)
	if err != nil {
		return nil, nodeConfig{}, err
	}
	for _, n := range cfg.nodes {
		if n.name == args[0] {
			return cfg, n, nil
		}
	}
	return nil, nodeConfig{}, fmt.Errorf("%s is not a node of the cluster", args[0])
}

// nodeDrain takes a node out of service: the load client stops sending to it.
func nodeDrain(e *env, args []string) error {
	_, n, err := nodeArg(e, "node drain", args)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(e.path(drainedDir), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(e.path(drainedDir), n.name), nil, 0o644); err != nil {
		return err
	}
	time.Sleep(drainGrace)
	return nil
}

// nodeUndrain puts a node back in service.
func nodeUndrain(e *env, args []string) error {
	_, n, err := nodeArg(e, "node undrain", args)
	if err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(e.path(drainedDir), n.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// nodeVerify checks that one node's daemon answers as that node, whichever version it runs.
// It fails on demand for one node when /run/demoapp/fail/node-verify-NODE exists.
func nodeVerify(e *env, args []string) error {
	cfg, n, err := nodeArg(e, "node verify", args)
	if err != nil {
		return err
	}
	if err := fault(e, "node-verify-"+n.name); err != nil {
		return err
	}
	addr := net.JoinHostPort(n.address, strconv.Itoa(e.port))
	st, err := fetchStatus(context.Background(), addr, cfg.verifyTimeout)
	switch {
	case err != nil:
		return fmt.Errorf("%s unreachable at %s: %w", n.name, addr, err)
	case st.Node != n.name:
		return fmt.Errorf("%s: %s answers as node %q", n.name, addr, st.Node)
	}
	fmt.Fprintf(e.stdout, "%s ok %s (config %s)\n", n.name, st.Version, st.ConfigVersion)
	return nil
}

// load is a client that keeps sending GET /status to every online node in turn, as a load
// balancer would, skipping drained nodes, until --seconds pass or load.stop appears. It
// prints every failed request as it happens and, at the end, how many requests each node
// served and failed.
func load(e *env, args []string) error {
	flags := flag.NewFlagSet("load", flag.ContinueOnError)
	flags.SetOutput(e.stderr)
	seconds := flags.Int("seconds", 60, "how long to send requests")
	interval := flags.Duration("interval", 20*time.Millisecond, "pause between two requests")
	if err := flags.Parse(args); err != nil {
		return usageError("%v", err)
	}
	cfg, err := loadConfig(e)
	if err != nil {
		return err
	}
	_ = os.Remove(e.path(loadStopFile))
	var online []nodeConfig
	for _, n := range cfg.nodes {
		if !n.offline {
			online = append(online, n)
		}
	}
	served, failed := map[string]int{}, map[string]int{}
	start := time.Now()
	end := start.Add(time.Duration(*seconds) * time.Second)
	for i := 0; time.Now().Before(end) && !exists(e.path(loadStopFile)); i++ {
		n := online[i%len(online)]
		if exists(filepath.Join(e.path(drainedDir), n.name)) {
			continue
		}
		addr := net.JoinHostPort(n.address, strconv.Itoa(e.port))
		if _, err := fetchStatus(context.Background(), addr, time.Second); err != nil {
			failed[n.name]++
			fmt.Fprintf(e.stdout, "failed %s %s %v\n", time.Now().UTC().Format("15:04:05.000"), n.name, err)
		} else {
			served[n.name]++
		}
		time.Sleep(*interval)
	}
	total, totalFailed := 0, 0
	for _, n := range online {
		fmt.Fprintf(e.stdout, "node %s served %d failed %d\n", n.name, served[n.name], failed[n.name])
		total += served[n.name]
		totalFailed += failed[n.name]
	}
	fmt.Fprintf(e.stdout, "total served %d failed %d in %.1fs\n", total, totalFailed, time.Since(start).Seconds())
	return nil
}
