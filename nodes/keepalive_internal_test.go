package nodes

import "testing"

// TestMisses feeds the keepalive watch's counter the intervals of a node
// that answers at once, one that answers late, one that is busy sending
// output, and one that vanished: only the last reaches the misses that close
// a connection (3 by default).
func TestMisses(t *testing.T) {
	type interval struct {
		reads  uint64 // the connection's count of reads at the tick
		asking bool   // a keepalive request unanswered at the tick
	}
	tests := []struct {
		name      string
		intervals []interval
		want      []int
	}{
		{
			name:      "answers within each interval",
			intervals: []interval{{0, false}, {1, false}, {2, false}, {3, false}},
			want:      []int{0, 0, 0, 0},
		},
		{
			// Each answer comes two intervals after its request, which a watch
			// that waits one interval for each answer counted as misses.
			name:      "answers late",
			intervals: []interval{{0, false}, {0, true}, {1, false}, {1, true}, {2, false}, {2, true}, {3, false}},
			want:      []int{0, 1, 0, 1, 0, 1, 0},
		},
		{
			name:      "busy with a command's output, keepalive unanswered",
			intervals: []interval{{0, false}, {5, true}, {9, true}, {14, true}, {20, true}},
			want:      []int{0, 0, 0, 0, 0},
		},
		{
			name:      "vanished",
			intervals: []interval{{4, false}, {4, true}, {4, true}, {4, true}},
			want:      []int{0, 1, 2, 3},
		},
		{
			name:      "vanished, then heard from again",
			intervals: []interval{{4, false}, {4, true}, {4, true}, {5, true}, {5, true}},
			want:      []int{0, 1, 2, 0, 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m misses
			for i, iv := range tt.intervals {
				if got := m.tick(iv.reads, iv.asking); got != tt.want[i] {
					t.Errorf("interval %d (reads %d, asking %v): %d misses, want %d", i+1, iv.reads, iv.asking, got, tt.want[i])
				}
			}
		})
	}
}
