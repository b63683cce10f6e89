package quotashare

import (
	"math"
	"testing"

	"github.com/sluicehq/sluice/quotas"
)

// FuzzDecode feeds arbitrary Redis hash values to the demand decoder: what
// another broker (or anyone with access to Redis) wrote there.
//
// Invariants:
//   - decode never panics;
//   - an accepted demand has one finite, non-negative rate per kind (a NaN
//     or infinite demand would poison every broker's share of the budget);
//   - an accepted demand encodes and decodes to itself.
func FuzzDecode(f *testing.F) {
	f.Add(encode(quotas.Demand{1024, 10, 4096}))
	f.Add(encode(quotas.Demand{}))
	f.Add("1 2")
	f.Add("1 2 3 4")
	f.Add("-1 2 3")
	f.Add("NaN 1 1")
	f.Add("+Inf 0 0")
	f.Add("1e400 0 0")
	f.Add("0x1p3 1_0 2")
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := decode(s)
		if !ok {
			return
		}
		for k, v := range d {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Fatalf("decode(%q) accepted rate %v for kind %d", s, v, k)
			}
		}
		again, ok := decode(encode(d))
		if !ok || again != d {
			t.Fatalf("decode(encode(%v)) = %v, %v", d, again, ok)
		}
	})
}
