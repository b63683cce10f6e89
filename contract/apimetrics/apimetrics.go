// Package apimetrics counts the requests of Sluice's echo HTTP APIs (the
// control plane's /v1 and the brokers' HTTP data API): by route pattern
// (bounded label values), method and status, their latency, and the
// rejections by error-catalogue code. Both planes import it.
package apimetrics

import (
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/contract/catalog"
)

// Opts name an API's series and say how to read a request.
type Opts struct {
	Prefix      string // of the series' names: Prefix+"_requests_total", …
	API         string // for the help texts, e.g. "Control-plane API"
	LatencyNote string // added to the latency help, e.g. " (long polls included)"
	Buckets     []float64
	// Route is the route pattern a request matched ("" if none; counted
	// as "unmatched").
	Route func(echo.Context) string
	// Catalogued maps a handler's error onto the catalogue, for its status
	// and code.
	Catalogued func(error) *catalog.Error
}

// Requests is an API's request metrics.
type Requests struct {
	o        Opts
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	errors   *prometheus.CounterVec
}

// New registers the metrics on reg.
func New(reg prometheus.Registerer, o Opts) (*Requests, error) {
	m := &Requests{
		o: o,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: o.Prefix + "_requests_total", Help: o.API + " requests by route, method and status.",
		}, []string{"route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: o.Prefix + "_request_seconds", Help: o.API + " request latency by route" + o.LatencyNote + ".",
			Buckets: o.Buckets,
		}, []string{"route", "method"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: o.Prefix + "_errors_total", Help: o.API + " rejections by catalogue code.",
		}, []string{"code"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.errors} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Middleware counts every request next serves.
func (m *Requests) Middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		route := m.o.Route(c)
		if route == "" {
			route = "unmatched"
		}
		status := c.Response().Status
		if err != nil {
			ce := m.o.Catalogued(err)
			status = ce.Entry.HTTPStatus
			m.errors.WithLabelValues(string(ce.Entry.Code)).Inc()
		}
		m.requests.WithLabelValues(route, c.Request().Method, strconv.Itoa(status)).Inc()
		m.latency.WithLabelValues(route, c.Request().Method).Observe(time.Since(start).Seconds())
		return err
	}
}
