package nodes

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestHeadBuffer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		max       int
		writes    []string
		want      string
		truncated bool
	}{
		{name: "fits", max: 10, writes: []string{"abc", "def"}, want: "abcdef"},
		{name: "exactly full", max: 6, writes: []string{"abc", "def"}, want: "abcdef"},
		{name: "cut in a write", max: 4, writes: []string{"abc", "def"}, want: "abcd", truncated: true},
		{name: "later writes dropped", max: 3, writes: []string{"abc", "def", "g"}, want: "abc", truncated: true},
	}
	for _, tt := range tests {
		h := newHeadBuffer(tt.max)
		for _, w := range tt.writes {
			if n, err := h.Write([]byte(w)); n != len(w) || err != nil {
				t.Errorf("%s: Write(%q) = %d, %v; want all taken", tt.name, w, n, err)
			}
		}
		if got := string(h.Bytes()); got != tt.want || h.Truncated() != tt.truncated {
			t.Errorf("%s: Bytes = %q, Truncated = %v; want %q, %v", tt.name, got, h.Truncated(), tt.want, tt.truncated)
		}
	}
}

func TestTailBuffer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		max    int
		writes []string
		want   string
	}{
		{name: "fits", max: 10, writes: []string{"abc", "def"}, want: "abcdef"},
		{name: "keeps the end", max: 4, writes: []string{"abc", "def"}, want: "cdef"},
		{name: "one big write", max: 3, writes: []string{"abcdefgh"}, want: "fgh"},
		{name: "many small writes", max: 5, writes: strings.Split("abcdefghij", ""), want: "fghij"},
	}
	for _, tt := range tests {
		b := newTailBuffer(tt.max)
		for _, w := range tt.writes {
			if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
				t.Errorf("%s: Write(%q) = %d, %v; want all taken", tt.name, w, n, err)
			}
		}
		if got := string(b.Bytes()); got != tt.want {
			t.Errorf("%s: Bytes = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestStderrTail(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 400) // two bytes a rune: the cut must not split one
	tests := []struct {
		in, want string
	}{
		{"", ""},
		{"\n\n  \n", ""},
		{"error: disk full\n", "error: disk full"},
		{"first\n\n  second  \nthird\n", "first; second; third"},
		{long, "..." + strings.Repeat("é", maxTailInError/2)},
	}
	for _, tt := range tests {
		if got := stderrTail([]byte(tt.in)); got != tt.want {
			t.Errorf("stderrTail(%.20q) = %.40q, want %.40q", tt.in, got, tt.want)
		}
	}
}

func TestRunErrorMessages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		err      error
		want     string
		code     int
		exited   bool
		timedOut bool
	}{
		{name: "exit", err: ended{node: "node2", command: "demoapp daemons stop", code: 1, stderr: []byte("daemon busy\n")}.error(),
			want: `node2: run "demoapp daemons stop": exit 1: daemon busy`, code: 1, exited: true},
		{name: "exit without stderr", err: ended{node: "node2", command: "false", code: 1}.error(),
			want: `node2: run "false": exit 1`, code: 1, exited: true},
		{name: "timeout", err: ended{node: "node3", command: "sleep 900", code: -1, timeout: 10 * time.Minute, err: errors.New("context deadline exceeded")}.error(),
			want: `node3: run "sleep 900": timed out after 10m0s`, code: -1, timedOut: true},
		{name: "transport", err: ended{node: "node4", command: "true", code: -1, err: errors.New("connection to 10.0.0.14:22 lost: EOF")}.error(),
			want: `node4: run "true": connection to 10.0.0.14:22 lost: EOF`, code: -1},
		{name: "output cut", err: ended{node: "node2", command: "find /", code: 0, cut: maxStdout}.error(),
			want: `node2: run "find /": its standard output passed cutover's read limit of 4194304 bytes: the output is not used`, code: 0, exited: true},
		{name: "exit and output cut", err: ended{node: "node2", command: "find /", code: 1, stderr: []byte("find: denied\n"), cut: maxStdout}.error(),
			want: `node2: run "find /": exit 1; its standard output passed cutover's read limit of 4194304 bytes: the output is not used: find: denied`, code: 1, exited: true},
		{name: "not a run error", err: errors.New("other"), want: "other", code: -1},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("%s: Error() = %q, want %q", tt.name, got, tt.want)
		}
		if code, ok := ExitCode(tt.err); code != tt.code || ok != tt.exited {
			t.Errorf("%s: ExitCode = %d, %v; want %d, %v", tt.name, code, ok, tt.code, tt.exited)
		}
		if got := IsTimeout(tt.err); got != tt.timedOut {
			t.Errorf("%s: IsTimeout = %v, want %v", tt.name, got, tt.timedOut)
		}
	}
	if err := (ended{node: "n", command: "true", code: 0, stderr: []byte("noise")}).error(); err != nil {
		t.Errorf("ended.error for exit 0 = %v, want nil", err)
	}
}

func TestHostKeyAlgorithms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		keyType string
		want    []string
	}{
		{"ssh-ed25519", []string{"ssh-ed25519"}},
		{"ecdsa-sha2-nistp256", []string{"ecdsa-sha2-nistp256"}},
		{"ssh-rsa", []string{"rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"}},
	}
	for _, tt := range tests {
		if got := algorithmsFor(tt.keyType); !slices.Equal(got, tt.want) {
			t.Errorf("algorithmsFor(%s) = %v, want %v", tt.keyType, got, tt.want)
		}
	}
}
