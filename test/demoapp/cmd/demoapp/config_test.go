package main

import (
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// configs are minimal valid configs of each schema.
var configs = map[string]string{
	"1.0": `{"version": "1.0.3",
		"cluster": {"name": "c", "master": "n1", "master_ip": "10.0.0.1"},
		"nodes": {"n1": {"ip": "10.0.0.1"}, "n10": {"ip": "10.0.0.10"}, "n2": {"ip": "10.0.0.2", "offline": true}},
		"queue": {"max_jobs": 7}}`,
	"1.1": `{"version": "1.1.0",
		"cluster": {"name": "c", "master": "n1", "master_address": "10.0.0.1"},
		"nodes": {"n1": {"address": "10.0.0.1"}},
		"queue": {"max_jobs": 7, "workers": 2}}`,
	"1.2": `{"version": "1.2.0",
		"cluster": {"name": "c", "master": "n1", "master_address": "10.0.0.1", "verify_timeout": "3s"},
		"nodes": {"n1": {"address": "10.0.0.1", "role": "regular"}},
		"queue": {"workers": 2}}`,
}

func TestParseConfig(t *testing.T) {
	t.Parallel()
	c, err := parseConfig([]byte(configs["1.0"]), "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range c.nodes {
		names = append(names, n.name)
	}
	if want := []string{"n1", "n2", "n10"}; !slices.Equal(names, want) {
		t.Errorf("nodes = %v, want %v", names, want)
	}
	if c.masterAddress != "10.0.0.1" || c.maxJobs != 7 || !c.nodes[1].offline || c.nodes[2].address != "10.0.0.10" {
		t.Errorf("parsed 1.0 config = %+v", c)
	}
	if c.verifyTimeout != defaultVerifyTimeout {
		t.Errorf("1.0 verify timeout = %s, want the default", c.verifyTimeout)
	}
	c, err = parseConfig([]byte(configs["1.2"]), "1.2.5")
	if err != nil {
		t.Fatal(err)
	}
	if c.maxJobs != 0 || c.workers != 2 || c.verifyTimeout != 3*time.Second || c.nodes[0].role != "regular" {
		t.Errorf("parsed 1.2 config = %+v", c)
	}
}

func TestParseConfigRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, schema, own string
		edit              func(string) string
		wantErr           string
	}{
		{"older minor", "1.0", "1.1.0", nil, "config version 1.0.3 does not match daemon version 1.1.0"},
		{"newer minor", "1.2", "1.1.0", nil, "config version 1.2.0 does not match daemon version 1.1.0"},
		{"unknown own schema", "1.2", "1.3.0", nil, "no config schema for version 1.3.0"},
		{"not JSON", "1.1", "1.1.0", func(s string) string { return s[1:] }, "parse config"},
		{"bad version", "1.1", "1.1.0", func(s string) string { return strings.Replace(s, `"1.1.0"`, `"1.1"`, 1) }, "config version 1.1 does not match"},
		{"old key left", "1.1", "1.1.0", func(s string) string {
			return strings.Replace(s, `"address": "10.0.0.1"}`, `"address": "10.0.0.1", "ip": "x"}`, 1)
		}, "unknown key /nodes/n1/ip"},
		{"address missing", "1.1", "1.1.0", func(s string) string { return strings.Replace(s, `"address": "10.0.0.1"}`, `"ip": "10.0.0.1"}`, 1) }, "/nodes/n1/address is missing"},
		{"workers missing", "1.1", "1.1.0", func(s string) string { return strings.Replace(s, `, "workers": 2`, ``, 1) }, "/queue/workers is missing"},
		{"workers zero", "1.1", "1.1.0", func(s string) string { return strings.Replace(s, `"workers": 2`, `"workers": 0`, 1) }, "/queue/workers is not a whole number"},
		{"max_jobs kept", "1.2", "1.2.0", func(s string) string { return strings.Replace(s, `{"workers": 2}`, `{"workers": 2, "max_jobs": 5}`, 1) }, "unknown key /queue/max_jobs"},
		{"bad timeout", "1.2", "1.2.0", func(s string) string { return strings.Replace(s, `"3s"`, `"soon"`, 1) }, "/cluster/verify_timeout is not a positive duration"},
		{"offline not bool", "1.0", "1.0.0", func(s string) string { return strings.Replace(s, `"offline": true`, `"offline": "yes"`, 1) }, "/nodes/n2/offline is not true or false"},
		{"no nodes", "1.1", "1.1.0", func(s string) string { return strings.Replace(s, `{"n1": {"address": "10.0.0.1"}}`, `{}`, 1) }, "/nodes lists no node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc := configs[tt.schema]
			if tt.edit != nil {
				doc = tt.edit(doc)
			}
			_, err := parseConfig([]byte(doc), tt.own)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseConfig = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestNaturalLess(t *testing.T) {
	t.Parallel()
	names := []string{"node10", "b", "node2", "node1", "a10", "a9", "node"}
	sort.Slice(names, func(i, j int) bool { return naturalLess(names[i], names[j]) })
	if want := []string{"a9", "a10", "b", "node", "node1", "node2", "node10"}; !slices.Equal(names, want) {
		t.Errorf("natural order = %v, want %v", names, want)
	}
}
