package main

import (
	"fmt"
	"strings"
	"sync"
	"time"

	gometrics "github.com/hashicorp/go-metrics"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/dataplane/raftlog"
)

// raftTimings turns the timings hashicorp/raft reports through go-metrics
// into Prometheus histograms: commit latency (raft.commitTime: from the
// leader dispatching an entry to its commit), FSM apply latency
// (raft.fsm.apply) and the Raft log store's StoreLogs time on the leader
// (raft.leader.dispatchLog) and on followers
// (raft.rpc.appendEntries.storeLogs), which in Sluice's store includes
// waiting for the group commit's fsync. go-metrics is process-wide, so the
// series cover every Raft group of the process (in `tenantd dev`, the
// three brokers together). Every other go-metrics key is dropped.
type raftTimings struct {
	gometrics.BlackholeSink
	hist *prometheus.HistogramVec // by kind
}

var (
	raftOnce sync.Once
	raftHist *prometheus.HistogramVec
)

// raftTimingHistograms installs the go-metrics sink (once per process)
// and returns its histograms, for each broker registry to register.
func raftTimingHistograms() *prometheus.HistogramVec {
	raftOnce.Do(func() {
		raftHist = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_raft_seconds",
			Help:    "Raft timings of this process's partitions, by kind: commit (leader dispatch to commit), apply (FSM apply), store_leader and store_follower (StoreLogs, including the group commit's fsync).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}, []string{"kind"})
		cfg := gometrics.DefaultConfig("")
		cfg.EnableHostname, cfg.EnableHostnameLabel, cfg.EnableRuntimeMetrics = false, false, false
		_, _ = gometrics.NewGlobal(cfg, &raftTimings{hist: raftHist})
	})
	return raftHist
}

// raftKinds maps the go-metrics keys kept to their kind label.
var raftKinds = map[string]string{
	"raft.commitTime":                  "commit",
	"raft.fsm.apply":                   "apply",
	"raft.leader.dispatchLog":          "store_leader",
	"raft.rpc.appendEntries.storeLogs": "store_follower",
}

// AddSample receives MeasureSince's milliseconds.
func (r *raftTimings) AddSample(key []string, val float32) {
	if kind, ok := raftKinds[strings.Join(key, ".")]; ok {
		r.hist.WithLabelValues(kind).Observe(float64(val) / 1000)
	}
}

func (r *raftTimings) AddSampleWithLabels(key []string, val float32, _ []gometrics.Label) {
	r.AddSample(key, val)
}

// fsyncBuckets span 50 µs (a page-cache-only sync) to about 1.6 s (a disk
// in trouble).
var fsyncBuckets = prometheus.ExponentialBuckets(0.00005, 2, 16)

// observeFsync registers sluice_fsync_seconds on reg and feeds it the
// sync time of every group-commit round of com (one observation per
// round, covering every partition the round made durable), and
// sluice_commit_stores_total, the partition stores those rounds covered:
// divided by the histogram's count, the partitions a round serves. The
// returned func detaches and unregisters both. A nil reg does nothing.
func observeFsync(reg prometheus.Registerer, com *raftlog.Committer) (func(), error) {
	if reg == nil {
		return func() {}, nil
	}
	h := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "sluice_fsync_seconds",
		Help:    "Time each group-commit round of this broker's Raft log store took to fsync the partition logs and entries files it covered.",
		Buckets: fsyncBuckets,
	})
	if err := reg.Register(h); err != nil {
		return nil, fmt.Errorf("register fsync histogram: %w", err)
	}
	stores := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "sluice_commit_stores_total",
		Help: "Partition replicas' stores made durable by this broker's group-commit rounds; over sluice_fsync_seconds_count, the partitions one round serves.",
	}, func() float64 { return float64(com.Stats().Stores) })
	if err := reg.Register(stores); err != nil {
		reg.Unregister(h)
		return nil, fmt.Errorf("register commit stores counter: %w", err)
	}
	com.SetRoundObserver(func(d time.Duration) { h.Observe(d.Seconds()) })
	return func() {
		com.SetRoundObserver(nil)
		reg.Unregister(h)
		reg.Unregister(stores)
	}, nil
}
