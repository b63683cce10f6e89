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
	cs := append([]prometheus.Collector{replicas.NewBehindLogStartGauge(manager.Load)}, replicas.NewSeedMetrics(manager.Load)...)
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, r := range cs[:i] {
				reg.Unregister(r)
			}
			return nil, fmt.Errorf("register replica metrics: %w", err)
		}
	}
	return func() {
		for _, c := range cs {
			reg.Unregister(c)
		}
	}, nil
}
