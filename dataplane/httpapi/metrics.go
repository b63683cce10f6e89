package httpapi

import (
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicehq/sluice/contract/apimetrics"
	"github.com/sluicehq/sluice/dataplane/toptenants"
)

// metrics of the HTTP data API: its requests (apimetrics, as the control
// plane's), forwards to other brokers and what it published.
type metrics struct {
	*apimetrics.Requests
	forwards  *prometheus.CounterVec
	published *prometheus.CounterVec
	tenants   *tenantMetrics
}

func newMetrics(reg prometheus.Registerer, labels *toptenants.Labels) (*metrics, error) {
	r, err := apimetrics.New(reg, apimetrics.Opts{Prefix: "sluice_http", API: "HTTP data API", LatencyNote: " (long polls included)",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 12), Route: routeName, Catalogued: toCatalog})
	if err != nil {
		return nil, err
	}
	m := &metrics{
		Requests: r,
		forwards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_http_forwards_total", Help: "Requests (or parts of publishes) forwarded to the partition's leader or the group's coordinator, by route and outcome.",
		}, []string{"route", "outcome"}),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_http_published_total", Help: "Messages and bytes (record batch bytes) appended through the HTTP data API by this broker.",
		}, []string{"unit"}),
	}
	for _, c := range []prometheus.Collector{m.forwards, m.published} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	if m.tenants, err = newTenantMetrics(reg, labels); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	counted := m.Middleware(next)
	return func(c echo.Context) error {
		start := time.Now()
		err := counted(c)
		m.tenants.observe(c, start, err)
		return err
	}
}

// routeName is the route pattern a request matched, as documented (the
// escaping of ':' for echo removed).
func routeName(c echo.Context) string {
	return strings.ReplaceAll(c.Path(), `\:`, ":")
}
