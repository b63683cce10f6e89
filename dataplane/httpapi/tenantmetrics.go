package httpapi

import (
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/dataplane/toptenants"
)

// tenantMetrics are the HTTP data API's requests by route and tenant: the
// busiest tenants by name, the rest as "other" (toptenants), so the
// series stay bounded on a cell of many tenants.
type tenantMetrics struct {
	labels   *toptenants.Labels
	requests *prometheus.CounterVec   // route, tenant, outcome
	latency  *prometheus.HistogramVec // route, tenant
}

// TopTenants is how many tenants get their own label value in the
// per-tenant request metrics.
const TopTenants = 10

func newTenantMetrics(reg prometheus.Registerer, labels *toptenants.Labels) (*tenantMetrics, error) {
	if labels == nil {
		labels = toptenants.New(TopTenants, 10*time.Second, nil)
	}
	m := &tenantMetrics{
		labels: labels,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_http_tenant_requests_total", Help: "HTTP data API requests of authenticated tenants by route, tenant (the busiest by name, the rest as other) and outcome (ok, error).",
		}, []string{"route", "tenant", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_http_tenant_request_seconds", Help: "HTTP data API request latency by route and tenant (long polls included).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"route", "tenant"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	labels.OnDemote(func(t string) {
		m.requests.DeletePartialMatch(prometheus.Labels{"tenant": t})
		m.latency.DeletePartialMatch(prometheus.Labels{"tenant": t})
	})
	return m, nil
}

// observe counts a request that authenticated (others have no tenant and
// are counted by the route metrics alone); forwarded ones are counted
// where they entered the cell.
func (m *tenantMetrics) observe(c echo.Context, start time.Time, err error) {
	cl, ok := c.Get(callerKey).(*caller)
	if !ok || cl == nil || cl.forwarded {
		return
	}
	route := routeName(c)
	t := m.labels.Observe(cl.p.TenantID, 1+float64(c.Request().ContentLength))
	outcome := "ok"
	if err != nil || c.Response().Status >= 400 {
		outcome = "error"
	}
	m.requests.WithLabelValues(route, t, outcome).Inc()
	m.latency.WithLabelValues(route, t).Observe(time.Since(start).Seconds())
}
