package apimetrics

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/contract/catalog"
)

// A served request counts under its route pattern and status; a rejected
// one under the status and code of its catalogue entry.
func TestRequestsByRouteStatusAndCode(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, Opts{Prefix: "t", API: "Test API", Buckets: prometheus.DefBuckets, Route: echo.Context.Path,
		Catalogued: catalog.Of})
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	e.Use(m.Middleware)
	e.GET("/ok/:id", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
	e.GET("/gone/:id", func(c echo.Context) error { return catalog.NotFound.New("no such thing") })
	for _, p := range []string{"/ok/1", "/ok/2", "/gone/1"} {
		e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, p, nil))
	}
	want := `
# HELP t_requests_total Test API requests by route, method and status.
# TYPE t_requests_total counter
t_requests_total{method="GET",route="/gone/:id",status="404"} 1
t_requests_total{method="GET",route="/ok/:id",status="204"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "t_requests_total"); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(m.errors.WithLabelValues(string(catalog.NotFound.Code))); got != 1 {
		t.Errorf("errors{code=not_found} = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(m.latency); n != 2 {
		t.Errorf("%d latency series, want 2", n)
	}
}

// The same names cannot be registered twice on one registry.
func TestRegisterTwiceFails(t *testing.T) {
	reg := prometheus.NewRegistry()
	o := Opts{Prefix: "t", API: "Test API", Route: echo.Context.Path, Catalogued: catalog.Of}
	if _, err := New(reg, o); err != nil {
		t.Fatal(err)
	}
	if _, err := New(reg, o); err == nil {
		t.Fatal("registered the same series twice")
	}
}
