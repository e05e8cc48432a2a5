package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestGlobalFlagsAfterTheCommand: the global flags work after the command as before it, the
// one given after the command wins, and a bad value is a usage error either way.
func TestGlobalFlagsAfterTheCommand(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	tests := []struct {
		name string
		args []string
		code int
		json bool
	}{
		{"output after", []string{"cutover", "status", "--config", lc.cfg, "--output", "json", "--no-verify"}, exitOK, true},
		{"output before", []string{"cutover", "--output", "json", "--config", lc.cfg, "status", "--no-verify"}, exitOK, true},
		{"after wins", []string{"cutover", "--output", "text", "status", "--output=json", "--config", lc.cfg, "--no-verify"}, exitOK, true},
		{"text", []string{"cutover", "status", "--config", lc.cfg, "--no-verify"}, exitOK, false},
		{"subcommand", []string{"cutover", "backup", "list", "--config", lc.cfg, "--output", "json"}, exitOK, true},
		{"bad after", []string{"cutover", "status", "--config", lc.cfg, "--output", "xml"}, exitUsage, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tt.args, strings.NewReader(""), &stdout, &stderr)
			if code != tt.code {
				t.Fatalf("%v: exit %d, want %d\n%s%s", tt.args, code, tt.code, stdout.String(), stderr.String())
			}
			if tt.code != exitOK {
				return
			}
			isJSON := json.Valid(stdout.Bytes())
			if isJSON != tt.json {
				t.Errorf("%v: JSON output %v, want %v:\n%s", tt.args, isJSON, tt.json, stdout.String())
			}
		})
	}
}
