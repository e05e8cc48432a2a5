package demoapp

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The values a fresh config of each schema holds; the migrations set and restore the same.
const (
	clusterName          = "demo"
	defaultMaxJobs       = 100       // /queue/max_jobs (1.0, 1.1)
	defaultWorkers       = 2         // /queue/workers (1.1 on)
	defaultRole          = "regular" // /nodes/NAME/role (1.2 on)
	defaultVerifyTimeout = "2s"      // /cluster/verify_timeout (1.2 on)
)

// appConfig returns demoapp's config.json for a cluster, at the schema of version.
func appConfig(version, master string, nodes []NodeAddr) ([]byte, error) {
	var masterAddr string
	for _, n := range nodes {
		if n.Name == master {
			masterAddr = n.Address
		}
	}
	cluster := map[string]any{"name": clusterName, "master": master}
	queue := map[string]any{}
	nodeObjs := map[string]any{}
	addrKey := "address"
	switch minorOf(version) {
	case "1.0":
		addrKey = "ip"
		cluster["master_ip"] = masterAddr
		queue["max_jobs"] = defaultMaxJobs
	case "1.1":
		cluster["master_address"] = masterAddr
		queue["max_jobs"] = defaultMaxJobs
		queue["workers"] = defaultWorkers
	case "1.2":
		cluster["master_address"] = masterAddr
		cluster["verify_timeout"] = defaultVerifyTimeout
		queue["workers"] = defaultWorkers
	default:
		return nil, fmt.Errorf("no config schema for version %q", version)
	}
	for _, n := range nodes {
		obj := map[string]any{addrKey: n.Address}
		if minorOf(version) == "1.2" {
			obj["role"] = defaultRole
		}
		nodeObjs[n.Name] = obj
	}
	cfg := map[string]any{"version": version, "cluster": cluster, "nodes": nodeObjs, "queue": queue}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	return append(data, '\n'), nil
}

// minorOf returns MAJOR.MINOR of a MAJOR.MINOR.PATCH version.
func minorOf(v string) string {
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return ""
	}
	return parts[0] + "." + parts[1]
}
