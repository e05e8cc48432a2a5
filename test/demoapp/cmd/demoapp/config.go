package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The files every node holds.
const (
	configFile = "/var/lib/demoapp/config.json" // the cluster config, same on every node
	masterFile = "/var/lib/demoapp/master"      // the master's name
)

// appConfig is the config as the running version understands it.
type appConfig struct {
	version       string
	clusterName   string
	master        string
	masterAddress string
	nodes         []nodeConfig // in natural name order
	maxJobs       int          // the most jobs waiting or running; 0 = no limit (1.2)
	workers       int
	verifyTimeout time.Duration // how long verify waits for each node
}

// nodeConfig is one node of the cluster.
type nodeConfig struct {
	name    string
	address string
	offline bool
	role    string
}

// schema describes the config of one minor version: the keys it has and requires.
type schema struct {
	masterAddress string // the key of the master's address under /cluster
	nodeAddress   string // the key of each node's address under /nodes/NAME
	role          bool   // /nodes/NAME/role is required
	maxJobs       bool   // /queue/max_jobs is required
	workers       bool   // /queue/workers is required
	verifyTimeout bool   // /cluster/verify_timeout is required
}

// schemas maps MAJOR.MINOR to its config schema. The migrations that turn one into the
// next ship in the newer version's share tree (cutover/migrations/*.json).
var schemas = map[string]schema{
	"1.0": {masterAddress: "master_ip", nodeAddress: "ip", maxJobs: true},
	"1.1": {masterAddress: "master_address", nodeAddress: "address", maxJobs: true, workers: true},
	"1.2": {masterAddress: "master_address", nodeAddress: "address", role: true, workers: true, verifyTimeout: true},
}

// defaultVerifyTimeout is how long verify waits for a node when the config does not say.
const defaultVerifyTimeout = 2 * time.Second

var semverRE = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)

// minorOf returns the MAJOR.MINOR of the semantic version v.
func minorOf(v string) (string, error) {
	m := semverRE.FindStringSubmatch(v)
	if m == nil {
		return "", fmt.Errorf("version %q is not MAJOR.MINOR.PATCH", v)
	}
	return m[1] + "." + m[2], nil
}

// loadConfig reads the config file and parses it with the schema of e.version. A config of
// another MAJOR.MINOR, or one that does not follow the schema, is refused.
func loadConfig(e *env) (*appConfig, error) {
	data, err := os.ReadFile(e.path(configFile))
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return parseConfig(data, e.version)
}

// parseConfig parses data with the schema of the program version own.
func parseConfig(data []byte, own string) (*appConfig, error) {
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("parse config: %w", err)
	}
	ownMinor, err := minorOf(own)
	if err != nil {
		return nil, fmt.Errorf("own %w", err)
	}
	if _, ok := schemas[ownMinor]; !ok {
		return nil, fmt.Errorf("no config schema for version %s", own)
	}
	p := parser{}
	c := &appConfig{version: p.str(raw, "", "version")}
	if p.err != nil {
		return nil, p.err
	}
	minor, err := minorOf(c.version)
	if err != nil || (minor != ownMinor && rollingFrom[ownMinor] != minor) {
		return nil, fmt.Errorf("config version %s does not match daemon version %s", c.version, own)
	}
	// A version that runs beside an older one reads the older one's config with its schema.
	ownMinor = minor
	s := schemas[ownMinor]
	p.keys(raw, "", "version", "cluster", "nodes", "queue")

	cluster := p.obj(raw, "", "cluster")
	clusterKeys := []string{"name", "master", s.masterAddress}
	c.clusterName = p.str(cluster, "/cluster", "name")
	c.master = p.str(cluster, "/cluster", "master")
	c.masterAddress = p.str(cluster, "/cluster", s.masterAddress)
	c.verifyTimeout = defaultVerifyTimeout
	if s.verifyTimeout {
		clusterKeys = append(clusterKeys, "verify_timeout")
		c.verifyTimeout = p.duration(cluster, "/cluster", "verify_timeout")
	}
	p.keys(cluster, "/cluster", clusterKeys...)

	nodes := p.obj(raw, "", "nodes")
	for name := range nodes {
		where := "/nodes/" + name
		n := p.obj(nodes, "/nodes", name)
		nc := nodeConfig{name: name, address: p.str(n, where, s.nodeAddress)}
		keys := []string{s.nodeAddress, "offline"}
		if s.role {
			keys = append(keys, "role")
			nc.role = p.str(n, where, "role")
		}
		if v, ok := n["offline"]; ok {
			b, isBool := v.(bool)
			if !isBool {
				p.fail("%s/offline is not true or false", where)
			}
			nc.offline = b
		}
		p.keys(n, where, keys...)
		c.nodes = append(c.nodes, nc)
	}
	if p.err == nil && len(c.nodes) == 0 {
		p.fail("/nodes lists no node")
	}
	sort.Slice(c.nodes, func(i, j int) bool { return naturalLess(c.nodes[i].name, c.nodes[j].name) })

	queue := p.obj(raw, "", "queue")
	var queueKeys []string
	if s.maxJobs {
		queueKeys = append(queueKeys, "max_jobs")
		c.maxJobs = p.count(queue, "/queue", "max_jobs")
	}
	if s.workers {
		queueKeys = append(queueKeys, "workers")
		c.workers = p.count(queue, "/queue", "workers")
	}
	p.keys(queue, "/queue", queueKeys...)
	if p.err != nil {
		return nil, fmt.Errorf("config does not follow the %s schema: %w", ownMinor, p.err)
	}
	return c, nil
}

// parser reads typed values out of decoded JSON and keeps the first error.
type parser struct{ err error }

func (p *parser) fail(format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf(format, args...)
	}
}

// get returns m[key], recording an error naming where+"/"+key if it is missing.
func (p *parser) get(m map[string]any, where, key string) (any, bool) {
	if m == nil {
		return nil, false
	}
	v, ok := m[key]
	if !ok {
		p.fail("%s/%s is missing", where, key)
	}
	return v, ok
}

func (p *parser) obj(m map[string]any, where, key string) map[string]any {
	v, ok := p.get(m, where, key)
	if !ok {
		return nil
	}
	o, isObj := v.(map[string]any)
	if !isObj {
		p.fail("%s/%s is not an object", where, key)
	}
	return o
}

func (p *parser) str(m map[string]any, where, key string) string {
	v, ok := p.get(m, where, key)
	if !ok {
		return ""
	}
	s, isStr := v.(string)
	if !isStr || s == "" {
		p.fail("%s/%s is not a non-empty string", where, key)
	}
	return s
}

// count reads a whole number of at least 1.
func (p *parser) count(m map[string]any, where, key string) int {
	v, ok := p.get(m, where, key)
	if !ok {
		return 0
	}
	f, isNum := v.(float64)
	if !isNum || f < 1 || f != float64(int(f)) {
		p.fail("%s/%s is not a whole number of at least 1", where, key)
		return 0
	}
	return int(f)
}

func (p *parser) duration(m map[string]any, where, key string) time.Duration {
	s := p.str(m, where, key)
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		p.fail("%s/%s is not a positive duration", where, key)
	}
	return d
}

// keys refuses any key of m that is not in allowed: a key of another schema makes the
// config unusable, not silently ignored.
func (p *parser) keys(m map[string]any, where string, allowed ...string) {
	var unknown []string
	for k := range m {
		if !contains(allowed, k) {
			unknown = append(unknown, where+"/"+k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		p.fail("unknown key %s", strings.Join(unknown, ", "))
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// naturalLess orders names so that "node2" comes before "node10".
func naturalLess(a, b string) bool {
	pa, na := splitNumber(a)
	pb, nb := splitNumber(b)
	if pa != pb || na < 0 || nb < 0 || na == nb {
		return a < b
	}
	return na < nb
}

// splitNumber splits s into a prefix and its trailing number (-1 if none).
func splitNumber(s string) (string, int) {
	i := len(s)
	for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
		i--
	}
	n, err := strconv.Atoi(s[i:])
	if err != nil {
		return s, -1
	}
	return s[:i], n
}

// readMaster returns the master's name from the master file.
func readMaster(e *env) (string, error) {
	data, err := os.ReadFile(e.path(masterFile))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("no master file %s: is demoapp installed on %s?", masterFile, e.node)
		}
		return "", fmt.Errorf("read master file: %w", err)
	}
	name := strings.TrimSpace(string(data))
	if name == "" {
		return "", fmt.Errorf("master file %s is empty", masterFile)
	}
	return name, nil
}

// requireMaster refuses to go on unless this node is the master.
func requireMaster(e *env, what string) error {
	master, err := readMaster(e)
	if err != nil {
		return err
	}
	if master != e.node {
		return fmt.Errorf("%s runs on the master %s, not on %s", what, master, e.node)
	}
	return nil
}
