package httpapi

import (
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics of the HTTP data API, by route pattern (bounded label values),
// method and status.
type metrics struct {
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	errors    *prometheus.CounterVec
	forwards  *prometheus.CounterVec
	published *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_http_requests_total", Help: "HTTP data API requests by route, method and status.",
		}, []string{"route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_http_request_seconds", Help: "HTTP data API request latency by route (long polls included).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 12),
		}, []string{"route", "method"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_http_errors_total", Help: "HTTP data API rejections by catalogue code.",
		}, []string{"code"}),
		forwards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_http_forwards_total", Help: "Requests (or parts of publishes) forwarded to the partition's leader or the group's coordinator, by route and outcome.",
		}, []string{"route", "outcome"}),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_http_published_total", Help: "Messages and bytes (record batch bytes) appended through the HTTP data API by this broker.",
		}, []string{"unit"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.errors, m.forwards, m.published} {
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
		route := routeName(c)
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

// routeName is the route pattern a request matched, as documented (the
// escaping of ':' for echo removed).
func routeName(c echo.Context) string {
	return strings.ReplaceAll(c.Path(), `\:`, ":")
}
