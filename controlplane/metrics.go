package controlplane

import (
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/contract/apimetrics"
	"github.com/sluicehq/sluice/contract/authz"
)

// metrics of the API: requests by route (the registered pattern, so label
// values stay bounded), method and status, and their latency.
type metrics struct{ *apimetrics.Requests }

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	r, err := apimetrics.New(reg, apimetrics.Opts{Prefix: "sluice_api", API: "Control-plane API",
		Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 10), Route: echo.Context.Path, Catalogued: toCatalog})
	if err != nil {
		return nil, err
	}
	return &metrics{r}, nil
}

func (m *metrics) middleware(next echo.HandlerFunc) echo.HandlerFunc { return m.Middleware(next) }

// serveMetrics answers GET /metrics for platform operators only: the series
// carry tenant ids, topic and group names.
func (s *Server) serveMetrics(c echo.Context) error {
	if _, err := s.operatorCaller(c, authz.ActRead); err != nil {
		return err
	}
	s.cfg.Metrics.ServeHTTP(c.Response(), c.Request())
	return nil
}
