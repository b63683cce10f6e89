package replicas

import "github.com/prometheus/client_golang/prometheus"

// NewBehindLogStartGauge is sluice_replicas_behind_log_start: how many of
// the broker's replicas are behind their leader's log start (they missed
// records that retention or DeleteRecords removed, or are new, and serve
// nothing until seeded from a peer's segments), read from the Manager
// current returns
// (zero while it returns nil: the replicas are not running).
func NewBehindLogStartGauge(current func() *Manager) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sluice_replicas_behind_log_start",
		Help: "Replicas on this broker behind their leader's log start, serving neither produce nor fetch until seeded.",
	}, func() float64 {
		if m := current(); m != nil {
			return float64(m.BehindLogStart())
		}
		return 0
	})
}
