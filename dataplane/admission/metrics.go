package admission

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// metrics are the broker's tenant-isolation metrics. Tenant labels are
// bounded by the tenants homed on the cell.
type metrics struct {
	throttled  *prometheus.CounterVec // seconds, by tenant and kind
	throttles  *prometheus.CounterVec // throttled responses, by tenant and kind
	rejections *prometheus.CounterVec // by tenant and cause
	moved      *prometheus.CounterVec // bytes recorded, by tenant and direction
	diskUsed   prometheus.Gauge
	diskState  prometheus.Gauge
}

func newMetrics(a *Admission, reg prometheus.Registerer) *metrics {
	m := &metrics{
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_quota_throttle_seconds_total", Help: "Throttle time given to a tenant's clients, by kind (produce_bytes, produce_messages, fetch_bytes, requests, disk_soft).",
		}, []string{"tenant", "kind"}),
		throttles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_quota_throttled_total", Help: "Responses that carried a throttle, by tenant and kind.",
		}, []string{"tenant", "kind"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_quota_rejections_total", Help: "Requests refused by admission, by tenant and cause (disk_full, storage, message_size, connections, request_rate, produce_throughput, fetch_throughput).",
		}, []string{"tenant", "cause"}),
		moved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_quota_recorded_bytes_total", Help: "Bytes recorded against tenants' quotas on this broker, by direction (produce, fetch).",
		}, []string{"tenant", "direction"}),
		diskUsed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_disk_used_ratio", Help: "Used fraction of the broker's data disk, as last polled.",
		}),
		diskState: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_disk_watermark_state", Help: "The data disk against its watermarks: 0 ok, 1 above soft, 2 above hard.",
		}),
	}
	if reg == nil {
		return m
	}
	reg.MustRegister(m.throttled, m.throttles, m.rejections, m.moved, m.diskUsed, m.diskState)
	if a.cfg.ShareMode != nil {
		for _, mode := range []string{"shared", "fallback"} {
			want := mode == "shared"
			reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "sluice_quota_share_mode", Help: "Where throughput shares come from: 1 on the current mode (shared: by demand through Redis; fallback: even split).",
				ConstLabels: prometheus.Labels{"mode": mode},
			}, func() float64 {
				if a.cfg.ShareMode() == want {
					return 1
				}
				return 0
			}))
		}
	}
	return m
}

func (m *metrics) throttle(tenant, kind string, d time.Duration) {
	if d <= 0 {
		return
	}
	m.throttled.WithLabelValues(tenant, kind).Add(d.Seconds())
	m.throttles.WithLabelValues(tenant, kind).Inc()
}

func (m *metrics) reject(tenant string, c Cause) {
	m.rejections.WithLabelValues(tenant, string(c)).Inc()
}

func (m *metrics) bytes(tenant, dir string, n int64) {
	if n > 0 {
		m.moved.WithLabelValues(tenant, dir).Add(float64(n))
	}
}

func (m *metrics) disk(d *diskStatus) {
	if d.total > 0 {
		m.diskUsed.Set(float64(d.used) / float64(d.total))
	}
	m.diskState.Set(float64(d.state))
}

// Rejections returns the count of refusals of a tenant for a cause, for
// tests and the admin CLI.
func (a *Admission) Rejections(tenant string, c Cause) float64 {
	return counterValue(a.metrics.rejections.WithLabelValues(tenant, string(c)))
}

// RecordedBytes returns the bytes recorded against a tenant's quota on
// this broker in a direction ("produce" or "fetch"), for tests.
func (a *Admission) RecordedBytes(tenant, direction string) float64 {
	return counterValue(a.metrics.moved.WithLabelValues(tenant, direction))
}

// RequestRate is the request rate this broker allows a tenant (its even
// share of max_requests_per_sec) and whether it has one, for tests and
// the admin CLI.
func (a *Admission) RequestRate(tenant string) (perSec float64, limited bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t := a.tenants[tenant]; t != nil && t.requests != nil {
		return float64(t.requests.Limit()), true
	}
	return 0, false
}

func counterValue(c prometheus.Counter) float64 {
	var out dto.Metric
	if err := c.Write(&out); err != nil {
		return 0
	}
	return out.GetCounter().GetValue()
}
