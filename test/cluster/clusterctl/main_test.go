package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestRunRefusesBadInput: a command with missing or malformed arguments, or a bare cluster
// with demo versions, is refused before any container is touched.
func TestRunRefusesBadInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		code    int
		wantErr string
	}{
		{"cp without a node", []string{"cp", "file", "/tmp/x"}, 2, "cp SRC NODE:PATH"},
		{"cp without a path", []string{"cp", "file", "node1:"}, 2, "cp SRC NODE:PATH"},
		{"cp with one argument", []string{"cp", "node1:/tmp/x"}, 2, "cp SRC NODE:PATH"},
		{"cp with an empty source", []string{"cp", "", "node1:/tmp/x"}, 2, "cp SRC NODE:PATH"},
		{"bare with a live version", []string{"-name", "ct-never", "up", "-bare", "-live", "1.1.0"}, 1, "a bare cluster has no demo application"},
		{"bare with missing versions", []string{"-name", "ct-never", "up", "-bare", "-missing", "1.2.0"}, 1, "a bare cluster has no demo application"},
		{"unknown command", []string{"push", "x"}, 2, "usage:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), tt.args, &stdout, &stderr)
			if code != tt.code || !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("clusterctl %q = exit %d, stderr %q; want exit %d and %q", tt.args, code, stderr.String(), tt.code, tt.wantErr)
			}
		})
	}
}
