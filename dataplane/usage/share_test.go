package usage

import "testing"

// TestBatchShareTelescopes: however a batch is cut into pieces, the
// pieces' shares sum to its size exactly; a whole batch bills its size;
// nothing bills nothing.
func TestBatchShareTelescopes(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int64
		n    int
	}{
		{"one record", 61 + 20, 1},
		{"size not a multiple of n", 1009, 7},
		{"more records than bytes", 5, 13},
		{"large batch", 16 << 20, 100_003},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := BatchShare(tc.size, 0, tc.n, tc.n); got != tc.size {
				t.Fatalf("whole batch: %d, want %d", got, tc.size)
			}
			if got := BatchShare(tc.size, 3, 3, tc.n); got != 0 {
				t.Fatalf("empty piece: %d", got)
			}
			// Cuts every step records, for several steps, and a two-way
			// cut at every point of small batches.
			for _, step := range []int{1, 2, 3, 5, tc.n/2 + 1} {
				var sum int64
				for from := 0; from < tc.n; from += step {
					sum += BatchShare(tc.size, from, min(from+step, tc.n), tc.n)
				}
				if sum != tc.size {
					t.Fatalf("pieces of %d records sum to %d, want %d", step, sum, tc.size)
				}
			}
			for cut := 0; cut <= tc.n && tc.n < 1000; cut++ {
				if a, b := BatchShare(tc.size, 0, cut, tc.n), BatchShare(tc.size, cut, tc.n, tc.n); a+b != tc.size || a < 0 || b < 0 {
					t.Fatalf("cut at %d: %d + %d, want %d", cut, a, b, tc.size)
				}
			}
		})
	}
}
