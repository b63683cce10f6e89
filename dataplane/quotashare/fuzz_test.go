package quotashare

import (
	"math"
	"testing"

	"github.com/sluicehq/sluice/quotas"
)

// FuzzDecode feeds arbitrary Redis hash values to decode. Invariants: it
// never panics; an accepted value has one finite, non-negative rate per
// kind; and encoding an accepted demand decodes to the same demand.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{"1 2 3", "0 0 0", "1e6 2.5e3 0", "", "1 2", "1 2 3 4", "-1 0 0", "NaN 0 0", "+Inf 0 0", "1e309 0 0", "0x1p4 0 0", " 7\t8\n9 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := decode(s)
		if !ok {
			if d != (quotas.Demand{}) {
				t.Fatalf("rejected %q but returned %v", s, d)
			}
			return
		}
		for _, v := range d {
			if !(v >= 0) || math.IsInf(v, 0) {
				t.Fatalf("accepted %q with rate %v", s, v)
			}
		}
		if again, ok := decode(encode(d)); !ok || again != d {
			t.Fatalf("%q: round trip %v -> %q -> %v %v", s, d, encode(d), again, ok)
		}
	})
}
