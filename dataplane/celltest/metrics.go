package celltest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Gauge reads the gauge (or counter) name of reg whose label equals value;
// it is 0 while no such series exists.
func Gauge(t testing.TB, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					if m.GetGauge() != nil {
						return m.GetGauge().GetValue()
					}
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
