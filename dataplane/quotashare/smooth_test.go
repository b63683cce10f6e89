package quotashare

import (
	"math"
	"testing"

	"github.com/sluicehq/sluice/quotas"
)

// TestSmoothedAndBoostedDemand: with demand averaged over two rounds, a
// broker whose clients send one lump every other round still gets about
// its average rate; and a broker throttling the tenant publishes its
// admitted rate boosted.
func TestSmoothedAndBoostedDemand(t *testing.T) {
	const quota = 15e6
	brokers, clk := newCell(t, quota, 2)
	// Broker 0 records 12 MB/s steadily; broker 1 records 3 MB in every
	// other one-second window (1.5 MB/s on average); broker 2 nothing.
	for round := range 4 {
		lump := 0.0
		if round%2 == 0 {
			lump = 3e6
		}
		for i, err := range window(t, clk, brokers, []float64{12e6, lump, 0}) {
			if err != nil {
				t.Fatalf("%s: %v", brokers[i].id, err)
			}
		}
	}
	want := quotas.Split(quota, []float64{12e6, 1.5e6, 0}, quotas.DefaultFloor, nil)
	for i, b := range brokers {
		if got := b.rate(t, "acme", quotas.ProduceBytes); math.Abs(got-want[i]) > 0.01*quota {
			t.Errorf("%s share %v, want about %v", b.id, got, want[i])
		}
	}

	// Boost: broker 0's bucket is now in debt (12 MB/s against its share).
	b0 := brokers[0]
	b0.sharer.cfg.ThrottledBoost = 2
	if b0.buckets.Debt("acme", quotas.ProduceBytes, clk.Now()) <= 0 {
		b0.buckets.Record("acme", quotas.ProduceBytes, 50e6, clk.Now())
	}
	share := b0.rate(t, "acme", quotas.ProduceBytes)
	for _, admitted := range []float64{0, 1e6, 2 * share} {
		local := map[string]quotas.Demand{"acme": {admitted, 0, 0}}
		got := b0.sharer.boost(local, clk.Now())
		if want := 2 * max(admitted, share); got["acme"][quotas.ProduceBytes] != want || got["acme"][quotas.FetchBytes] != 0 {
			t.Fatalf("admitted %v, share %v: boosted demand %v, want %v", admitted, share, got["acme"], want)
		}
	}
}

// TestTenantStartingWithinQuota: a tenant idle for the whole smoothing
// window starts sending at half its quota, unevenly over the brokers. The
// averaged demand of the first round is a fraction of the new rate, near
// the floors; dividing the quota by demand above the floors would give the
// broker with the least of it only its floor (a quarter of what its
// clients send here) and throttle a tenant far within its quota. After the
// first round every broker's share covers what its clients sent.
func TestTenantStartingWithinQuota(t *testing.T) {
	const quota = 4e6
	brokers, clk := newCell(t, quota, 4)
	sent := []float64{0.75e6, 0.5e6, 0.75e6} // 2 MB/s, half the quota
	for round := range 5 {
		bps := []float64{0, 0, 0}
		if round == 4 {
			bps = sent
		}
		for i, err := range window(t, clk, brokers, bps) {
			if err != nil {
				t.Fatalf("%s: %v", brokers[i].id, err)
			}
		}
	}
	for i, b := range brokers {
		if got := b.rate(t, "acme", quotas.ProduceBytes); got < sent[i] {
			t.Errorf("%s: share %.0f B/s below the %.0f B/s its clients sent, with the tenant at half its quota", b.id, got, sent[i])
		}
	}
}
