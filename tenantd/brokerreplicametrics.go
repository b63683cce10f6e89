package main

import (
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicehq/sluice/dataplane/replicas"
)

// registerReplicaMetrics registers the broker's replica gauges on reg and
// returns what unregisters them.
func registerReplicaMetrics(reg prometheus.Registerer, manager *atomic.Pointer[replicas.Manager]) (func(), error) {
	g := replicas.NewBehindLogStartGauge(manager.Load)
	if err := reg.Register(g); err != nil {
		return nil, fmt.Errorf("register replica metrics: %w", err)
	}
	return func() { reg.Unregister(g) }, nil
}
