package upgrade

import (
	"slices"
	"testing"
)

func TestPrunable(t *testing.T) {
	t.Parallel()
	installed := []string{"1.10.0", "0.8.0", "1.0.0", "0.9.0", "1.1.0", "1.2.0"}
	tests := []struct {
		name    string
		live    string
		pending []string
		keep    int
		want    []string
	}{
		{"keep none", "1.0.0", nil, 0, []string{"0.8.0", "1.1.0", "1.2.0", "1.10.0"}},
		{"keep the newest two", "1.0.0", nil, 2, []string{"0.8.0", "1.1.0"}},
		{"a pending run's versions", "1.0.0", []string{"1.0.0", "1.1.0"}, 1, []string{"0.8.0", "1.2.0"}},
		{"live is the oldest", "0.8.0", nil, 0, []string{"0.9.0", "1.0.0", "1.1.0", "1.2.0", "1.10.0"}},
		{"keep more than installed", "1.10.0", nil, 10, nil},
	}
	for _, tt := range tests {
		got := prunable(installed, tt.live, tt.pending, tt.keep)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: prunable = %v, want %v", tt.name, got, tt.want)
		}
	}
}
