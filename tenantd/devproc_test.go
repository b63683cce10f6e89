package main

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/tenantd/devtest"
)

// startDev builds tenantd and runs `tenantd dev` with extra flags until
// the test ends (devtest.Start, 30 s for its banner).
func startDev(t *testing.T, extra ...string) *devtest.Dev {
	t.Helper()
	return devtest.Start(t, buildTenantd(t), 30*time.Second, extra...)
}
