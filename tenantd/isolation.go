package main

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/dataplane/admission"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/quotashare"
	"github.com/sluicehq/sluice/dataplane/replicas"
	"github.com/sluicehq/sluice/quotas"
)

// Defaults of a broker's tenant isolation.
const (
	defaultRedisAddr = "127.0.0.1:6379"
	// defaultEgressBytesPerSec is a broker's fetch egress budget: about a
	// 2 Gbit/s link's worth, beyond which fetch responses queue for fair
	// egress.
	defaultEgressBytesPerSec = 256 << 20
)

// isolationConfig is a broker's tenant isolation settings.
type isolationConfig struct {
	RedisAddr         string  // the cell's Redis, for sharing quotas by demand
	DiskSoft          float64 // soft disk watermark, a fraction (default 0.80)
	DiskHard          float64 // hard disk watermark (default 0.90)
	EgressBytesPerSec float64 // fetch egress budget (default defaultEgressBytesPerSec)
	// Registerer receives the broker's isolation metrics; nil: none.
	Registerer prometheus.Registerer
}

// isolation is a running broker's admission control and quota sharer.
type isolation struct {
	adm   *admission.Admission
	share *quotashare.Sharer
	rdb   *redis.Client
}

// newIsolation builds a broker's admission: per-tenant buckets whose rates
// the quota sharer keeps at this broker's share (through Redis, or the
// even split while Redis is away), disk watermarks on the data dir, and
// storage per tenant from the replicas' sizes.
func newIsolation(cfg brokerConfig, syncer *cellview.Syncer, manager *atomic.Pointer[replicas.Manager], log *slog.Logger) (*isolation, error) {
	ic := cfg.Isolation
	if ic.RedisAddr == "" {
		ic.RedisAddr = defaultRedisAddr
	}
	if ic.EgressBytesPerSec == 0 {
		ic.EgressBytesPerSec = defaultEgressBytesPerSec
	}
	buckets, err := quotas.New(quotas.Config{})
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: ic.RedisAddr, DialTimeout: 300 * time.Millisecond,
		ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond, MaxRetries: -1})
	share, err := quotashare.New(quotashare.Config{Redis: rdb, Prefix: "sluice:cell:" + cfg.Cell, BrokerID: cfg.BrokerID,
		Buckets: buckets, DemandRounds: 3, ThrottledBoost: 1.5, Logger: log})
	if err != nil {
		rdb.Close()
		return nil, err
	}
	adm, err := admission.New(admission.Config{
		BrokerID: cfg.BrokerID, Buckets: buckets,
		Disk:       func() (int64, int64, error) { return cellview.DiskUsage(cfg.DataDir) },
		Watermarks: quotas.WatermarkConfig{Soft: ic.DiskSoft, Hard: ic.DiskHard},
		Storage: func() map[string]int64 {
			m := manager.Load()
			if m == nil {
				return nil
			}
			return tenantStorage(syncer.View(), m)
		},
		EgressBytesPerSec: ic.EgressBytesPerSec,
		ShareMode:         func() bool { return share.Mode() == quotashare.ModeShared },
		Registerer:        ic.Registerer,
		Logger:            log,
	})
	if err != nil {
		rdb.Close()
		return nil, err
	}
	return &isolation{adm: adm, share: share, rdb: rdb}, nil
}

// run runs the sharer, the admission's pollers and its state following
// until ctx ends.
func (iso *isolation) run(ctx context.Context, syncer *cellview.Syncer) error {
	defer iso.rdb.Close()
	var wg sync.WaitGroup
	for _, f := range []func(){
		func() { iso.adm.Run(ctx) },
		func() { iso.share.Run(ctx) },
		func() { iso.adm.FollowState(ctx, syncer, iso.share.SetState) },
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}
	wg.Wait()
	return ctx.Err()
}

// tenantStorage is the bytes each tenant stores on this broker: the sizes
// of its partitions' replicas here. With every partition on all three
// brokers of a cell, that is the tenant's logical size on the cell.
func tenantStorage(v *cellview.View, m *replicas.Manager) map[string]int64 {
	out := map[string]int64{}
	for _, st := range m.Status() {
		if t, ok := v.TopicByID(st.TopicID); ok {
			out[t.TenantID] += st.SizeBytes
		}
	}
	return out
}
