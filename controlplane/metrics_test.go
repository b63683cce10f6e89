package controlplane_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/controlplane"
)

// TestMetricsAreForOperatorsOnly: the process's metrics carry tenant ids
// (the brokers' per-tenant series), so GET /metrics answers platform
// operators only; anonymous callers and every tenant credential get an
// error that names no tenant.
func TestMetricsAreForOperatorsOnly(t *testing.T) {
	reg := prometheus.NewRegistry()
	bytesIn := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "test_tenant_bytes_total"}, []string{"tenant"})
	reg.MustRegister(bytesIn)
	e := newEnv(t, func(c *controlplane.Config) {
		c.Registerer = reg
		c.Metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	})
	a := e.signup("metrics-a")
	bytesIn.WithLabelValues(a.Tenant.ID).Add(42)
	opID, opSecret, err := controlplane.CreateOperatorKey(context.Background(), e.db, "scraper")
	if err != nil {
		t.Fatal(err)
	}
	basic := func(id, secret string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(id+":"+secret))
	}
	get := func(auth string) (int, string) {
		t.Helper()
		status, b, _ := e.send("GET", "/metrics", auth, "", "")
		return status, string(b)
	}
	for _, tc := range []struct {
		name, auth string
		status     int
	}{
		{"anonymous", "", 401},
		{"wrong operator secret", basic(opID, opSecret+"x"), 401},
		{"tenant admin key", basic(a.keyID, a.secret), 403},
		{"tenant owner session", "Bearer " + a.Session.Token, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := get(tc.auth)
			if status != tc.status || strings.Contains(body, a.Tenant.ID) || strings.Contains(body, "test_tenant_bytes_total") {
				t.Fatalf("GET /metrics: %d %.300s, want %d and no series", status, body, tc.status)
			}
		})
	}
	status, body := get(basic(opID, opSecret))
	if status != 200 || !strings.Contains(body, `test_tenant_bytes_total{tenant="`+a.Tenant.ID+`"} 42`) ||
		!strings.Contains(body, "sluice_api_requests_total") {
		t.Fatalf("operator GET /metrics: %d %.500s", status, body)
	}
}
