package controlplane

import (
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/contract/authz"
)

// metrics of the API: requests by route (the registered pattern, so label
// values stay bounded), method and status, and their latency.
type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	errors   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_api_requests_total", Help: "Control-plane API requests by route, method and status.",
		}, []string{"route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_api_request_seconds", Help: "Control-plane API request latency by route.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 10),
		}, []string{"route", "method"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_api_errors_total", Help: "Control-plane API rejections by catalogue code.",
		}, []string{"code"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.errors} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		status := c.Response().Status
		if err != nil {
			ce := toCatalog(err)
			status = ce.Entry.HTTPStatus
			m.errors.WithLabelValues(string(ce.Entry.Code)).Inc()
		}
		m.requests.WithLabelValues(route, c.Request().Method, strconv.Itoa(status)).Inc()
		m.latency.WithLabelValues(route, c.Request().Method).Observe(time.Since(start).Seconds())
		return err
	}
}

// serveMetrics answers GET /metrics for platform operators only: the series
// carry tenant ids, topic and group names.
func (s *Server) serveMetrics(c echo.Context) error {
	if _, err := s.operatorCaller(c, authz.ActRead); err != nil {
		return err
	}
	s.cfg.Metrics.ServeHTTP(c.Response(), c.Request())
	return nil
}
