package quotas

import (
	"math"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func sum(s []float64) float64 {
	var t float64
	for _, v := range s {
		t += v
	}
	return t
}

func TestSplit(t *testing.T) {
	const q = 6e6
	for _, tc := range []struct {
		name   string
		demand []float64
		floor  float64
		want   []float64 // nil: only check the invariants
	}{
		// Demand that sums to the quota is matched exactly.
		{"skewed 80/10/10", []float64{4.8e6, 0.6e6, 0.6e6}, DefaultFloor, []float64{4.8e6, 0.6e6, 0.6e6}},
		// Above the quota the brokers that want less than the level get
		// what they want; the rest get the level.
		{"skewed 80/10/10 above quota", []float64{9.6e6, 1.2e6, 1.2e6}, DefaultFloor, []float64{3.6e6, 1.2e6, 1.2e6}},
		// Every broker throttled, each publishing a multiple of an uneven
		// share: the split returns to even instead of keeping the skew.
		{"all throttled, uneven shares", []float64{3.75e6, 3e6, 2.25e6}, DefaultFloor, []float64{2e6, 2e6, 2e6}},
		{"one below the level", []float64{9e6, 1.5e6, 7e6}, DefaultFloor, []float64{2.25e6, 1.5e6, 2.25e6}},
		{"all idle", []float64{0, 0, 0}, DefaultFloor, []float64{2e6, 2e6, 2e6}},
		{"only under the floor", []float64{1e5, 0, 1.5e5}, DefaultFloor, []float64{2e6, 2e6, 2e6}},
		// Within the quota every broker gets its demand and a third of
		// the spare.
		{"one busy broker", []float64{0, 3e6, 0}, 0.2, []float64{0.4e6 + 2.2e6/3, 3e6 + 2.2e6/3, 0.4e6 + 2.2e6/3}},
		{"no floor", []float64{3e6, 1e6, 0}, 0, []float64{3e6 + 2e6/3, 1e6 + 2e6/3, 2e6 / 3}},
		// Just after a tenant starts, the last window saw a little of
		// its traffic, unevenly: no broker is left with its floor.
		{"start within quota", []float64{0.3e6, 0.1e6, 0.25e6}, DefaultFloor, []float64{2.05e6, 1.95e6, 2e6}},
		{"one busy broker above quota", []float64{0, 9e6, 0}, 0.2, []float64{0.4e6, 5.2e6, 0.4e6}},
		{"no floor above quota", []float64{6e6, 2e6, 0}, 0, []float64{4e6, 2e6, 0}},
		{"full floor is even", []float64{5e6, 1e6, 0}, 1, []float64{2e6, 2e6, 2e6}},
		{"demand above quota", []float64{60e6, 20e6, 20e6}, DefaultFloor, nil},
		{"bad demand counts as none", []float64{math.NaN(), -5, math.Inf(1), 3e6}, DefaultFloor, nil},
		{"single broker", []float64{9e6}, DefaultFloor, []float64{6e6}},
		{"seven brokers, uneven", []float64{1, 2e6, 3e6, 5e5, 0, 7e6, 1e6}, 0.1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Split(q, tc.demand, tc.floor, nil)
			if len(got) != len(tc.demand) {
				t.Fatalf("len = %d, want %d", len(got), len(tc.demand))
			}
			if s := sum(got); math.Abs(s-q) > 1e-6 {
				t.Errorf("shares %v sum to %v, want %v", got, s, q)
			}
			floor := tc.floor * q / float64(len(got))
			for i, v := range got {
				if v < floor-1e-6 {
					t.Errorf("share %d = %v below the floor %v", i, v, floor)
				}
				for j, w := range got {
					d, e := tc.demand[i], tc.demand[j]
					if d > e && d > floor && !math.IsInf(d, 1) && v < w {
						t.Errorf("broker %d has more demand than %d (%v > %v) but a smaller share (%v < %v)", i, j, d, e, v, w)
					}
				}
			}
			for i := range tc.want {
				if math.Abs(got[i]-tc.want[i]) > 1e-3 {
					t.Errorf("shares = %v, want %v", got, tc.want)
					break
				}
			}
		})
	}
}

func TestSplitEdges(t *testing.T) {
	if got := Split(5, nil, 0.2, nil); len(got) != 0 {
		t.Errorf("no brokers: %v", got)
	}
	if got := Split(0, []float64{1, 2}, 0.2, nil); got[0] != 0 || got[1] != 0 {
		t.Errorf("unlimited quota split as %v, want zeros (no limit)", got)
	}
	buf := make([]float64, 8)
	if got := Split(9, []float64{1, 2, 3}, 0, buf); &got[0] != &buf[0] || len(got) != 3 {
		t.Errorf("did not reuse out")
	}
	if got := EvenSplit(9e6, 3, nil); got[0] != 3e6 || got[1] != 3e6 || got[2] != 3e6 {
		t.Errorf("EvenSplit = %v", got)
	}
}

// TestCellReachesQuota runs three brokers, each with its own Buckets, whose
// clients offer a tenant's traffic in a skewed way. Every second each broker
// publishes what it recorded and every broker applies the share Split gives
// it, as the data plane does through Redis. The cell as a whole must admit
// the tenant's cell-wide quota within ±5%, or the offered load when that is
// lower, and must never run far above the quota.
func TestCellReachesQuota(t *testing.T) {
	const (
		quota = 15e6 // bytes/s cell-wide
		secs  = 40
		skip  = 10 // seconds allowed for the shares to settle
	)
	for _, tc := range []struct {
		name    string
		offered [3]float64 // bytes/s each broker's clients would send
		shift   [3]float64 // offered from secs/2 on; zero: unchanged
		want    float64    // expected admitted rate, cell-wide
	}{
		{"2x quota skewed 80/10/10", [3]float64{24e6, 3e6, 3e6}, [3]float64{}, quota},
		{"4x quota skewed 80/10/10", [3]float64{48e6, 6e6, 6e6}, [3]float64{}, quota},
		// The idle brokers keep their floors: the price of letting them
		// admit a burst at once.
		{"one broker alone at 3x", [3]float64{45e6, 0, 0}, [3]float64{}, quota * (1 - DefaultFloor*2/3)},
		{"0.9x quota skewed 80/10/10", [3]float64{10.8e6, 1.35e6, 1.35e6}, [3]float64{}, 13.5e6},
		{"demand moves to another broker", [3]float64{24e6, 3e6, 3e6}, [3]float64{3e6, 3e6, 24e6}, quota},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var brokers [3]*Buckets
			var clients [3]*client
			for i := range brokers {
				brokers[i] = newBuckets(t, Config{})
				var l Limits
				l[ProduceBytes].Rate = quota / 3 // even split until demand is known
				brokers[i].Set("acme", l, t0)
				clients[i] = &client{id: "acme", kind: ProduceBytes, batch: 64 << 10, offered: tc.offered[i], next: t0}
			}
			var admitted, settled float64
			demand := make([]float64, 3)
			shares := make([]float64, 3)
			for s := range secs {
				from, end := t0.Add(time.Duration(s)*time.Second), t0.Add(time.Duration(s+1)*time.Second)
				if s == secs/2 && tc.shift != ([3]float64{}) {
					for i, c := range clients {
						c.offered = tc.shift[i]
					}
				}
				for i, c := range clients {
					if c.offered == 0 {
						continue
					}
					if c.next.Before(from) {
						c.next = from
					}
					got := c.run(brokers[i], from, end)
					admitted += got
					if s >= skip && (tc.shift == ([3]float64{}) || s < secs/2 || s >= secs/2+skip) {
						settled += got
					}
				}
				for i, b := range brokers {
					demand[i] = b.TakeDemand(end)["acme"][ProduceBytes]
				}
				shares = Split(quota, demand, DefaultFloor, shares)
				for i, b := range brokers {
					var l Limits
					l[ProduceBytes].Rate = shares[i]
					b.Set("acme", l, end)
				}
			}
			settledSecs := float64(secs - skip)
			if tc.shift != ([3]float64{}) {
				settledSecs -= skip
			}
			rate := settled / settledSecs
			t.Logf("settled rate %.0f B/s (%.2f%% of expected), whole run %.0f B/s, final shares %.0f", rate, 100*rate/tc.want, admitted/secs, shares)
			if !within(rate, tc.want, 0.05) {
				t.Errorf("settled cell rate = %.0f B/s, want %.0f ±5%%", rate, tc.want)
			}
			if whole := admitted / secs; whole > 1.05*quota {
				t.Errorf("whole-run cell rate = %.0f B/s, above quota %.0f by more than 5%%", whole, quota)
			}
		})
	}
}

// TestSplitProperties checks Split's invariants on arbitrary inputs: shares
// sum to the quota, none is below the floor, a broker with more demand
// above the floor never gets a smaller share, and when the demands (each
// at least the floor) fit in the quota every broker gets its demand and an
// equal part of the spare, and when they do not every broker gets either
// its demand or the one level the others get, never more than its demand.
func TestSplitProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		quota := rapid.Float64Range(1, 1e10).Draw(t, "quota")
		floor := rapid.Float64Range(0, 1).Draw(t, "floor")
		demand := rapid.SliceOfN(rapid.Float64Range(0, 1e11), 1, 16).Draw(t, "demand")
		got := Split(quota, demand, floor, nil)
		if s := sum(got); math.Abs(s-quota) > 1e-9*quota {
			t.Fatalf("shares %v sum to %v, want %v", got, s, quota)
		}
		each := floor * quota / float64(len(demand))
		var need float64
		for _, d := range demand {
			need += max(d, each)
		}
		for i, v := range got {
			if want := max(demand[i], each) + (quota-need)/float64(len(demand)); need <= quota && v < want-1e-9*quota {
				t.Fatalf("demand %v fits in quota %v: share %d = %v, want at least %v", demand, quota, i, v, want)
			}
			if w := max(demand[i], each); need > quota && (v > w+1e-9*quota || v < w-1e-9*quota && v < slices.Max(got)-1e-9*quota) {
				t.Fatalf("demand %v above quota %v: share %d = %v, want its demand %v or the level %v", demand, quota, i, v, w, slices.Max(got))
			}
			if v < each-1e-9*quota {
				t.Fatalf("share %d = %v below the floor %v", i, v, each)
			}
			for j, w := range got {
				if demand[i] > demand[j] && v < w-1e-9*quota {
					t.Fatalf("broker %d demands more than %d (%v > %v) but gets less (%v < %v)", i, j, demand[i], demand[j], v, w)
				}
			}
		}
	})
}
