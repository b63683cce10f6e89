package replicas

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/dataplane/partition"
)

// DefaultSeedRate is tenantd's default -seed-rate: 64 MiB/s, a fraction of
// a broker's disk and network, so seeding a replica does not starve the
// produce and fetch traffic of the partitions it shares them with.
const DefaultSeedRate = 64 << 20

// Seeding counts the replicas being seeded from a peer's segments (behind
// their leader's log start, or new), the offsets partitions included. They
// are counted by BehindLogStart too: they serve nothing until seeded.
func (m *Manager) Seeding() int {
	return m.count((*partition.Replica).Seeding)
}

// SeedBytesRemaining is how many segment bytes this broker's seeding
// replicas have left to copy, as far as their copies' plans know.
func (m *Manager) SeedBytesRemaining() int64 { return m.seeder.Remaining() }

// SeedBytesCopied is how many segment bytes this broker's replicas copied
// from peers since it started.
func (m *Manager) SeedBytesCopied() int64 { return m.seeder.Copied() }

// NewSeedMetrics returns the broker's seeding metrics, read from the
// Manager current returns (zero while it returns nil):
// sluice_replicas_seeding (gauge), sluice_seed_bytes_remaining (gauge)
// and sluice_seed_bytes_total (counter of bytes copied).
func NewSeedMetrics(current func() *Manager) []prometheus.Collector {
	read := func(f func(*Manager) float64) func() float64 {
		return func() float64 {
			if m := current(); m != nil {
				return f(m)
			}
			return 0
		}
	}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_replicas_seeding",
			Help: "Replicas on this broker being seeded from a peer's segment files (behind their leader's log start, or new).",
		}, read(func(m *Manager) float64 { return float64(m.Seeding()) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_seed_bytes_remaining",
			Help: "Segment bytes this broker's seeding replicas have left to copy.",
		}, read(func(m *Manager) float64 { return float64(m.SeedBytesRemaining()) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sluice_seed_bytes_total",
			Help: "Segment bytes this broker's replicas copied from peers while being seeded, since the broker started.",
		}, read(func(m *Manager) float64 { return float64(m.SeedBytesCopied()) })),
	}
}
