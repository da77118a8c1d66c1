package units

import (
	"math"
	"testing"
)

func TestBytes(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {999, "999 B"}, {1000, "1.00 kB"}, {6717184, "6.72 MB"},
		{5_250_000_000, "5.25 GB"}, {-1500, "-1.50 kB"}, {math.MaxInt64, "9.22 EB"},
	}
	for _, tt := range tests {
		if got := Bytes(tt.n); got != tt.want {
			t.Errorf("Bytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}
