package staging

import "testing"

// TestRoomFor: an encoded stream is written only where it leaves a twentieth of the file
// system available.
func TestRoomFor(t *testing.T) {
	const gb = 1 << 30
	for _, tt := range []struct {
		free, total, need int64
		want              bool
	}{
		{free: 50 * gb, total: 100 * gb, need: 1 * gb, want: true},
		{free: 50 * gb, total: 100 * gb, need: 45 * gb, want: true},
		{free: 50 * gb, total: 100 * gb, need: 45*gb + 1, want: false},
		{free: 5*gb - 1, total: 100 * gb, need: 0, want: false},
		{free: 0, total: 100 * gb, need: 0, want: false},
	} {
		if got := roomFor(tt.free, tt.total, tt.need); got != tt.want {
			t.Errorf("roomFor(free %d, total %d, need %d) = %v, want %v", tt.free, tt.total, tt.need, got, tt.want)
		}
	}
}
