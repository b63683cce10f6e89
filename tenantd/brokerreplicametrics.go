package main

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/groups"
	"github.com/sluicehq/sluice/dataplane/kafka"
	"github.com/sluicehq/sluice/dataplane/replicas"
	"github.com/sluicehq/sluice/dataplane/toptenants"
)

// brokerParts are what a running broker's metrics read, set by
// runReplicas while they run (nil before and after).
type brokerParts struct {
	coord  atomic.Pointer[groups.Coordinator]
	selfID atomic.Int64 // this broker's node id in its cell; 0 until known
	// labels bound the tenant label of both front doors' request
	// metrics to the same busiest tenants.
	labels *toptenants.Labels
}

func newBrokerParts() *brokerParts {
	return &brokerParts{labels: toptenants.New(kafka.TopTenants, 10*time.Second, nil)}
}

// registerReplicaMetrics registers the broker's replica gauges on reg and
// returns what unregisters them.
func registerReplicaMetrics(reg prometheus.Registerer, manager *atomic.Pointer[replicas.Manager], syncer *cellview.Syncer, parts *brokerParts) (func(), error) {
	started := time.Now()
	age := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sluice_cell_state_sync_age_seconds",
		Help: "Seconds since the control plane last answered this broker's cell-state poll (since the broker started, if it never has).",
	}, func() float64 {
		last := syncer.LastSync()
		if last.IsZero() {
			last = started
		}
		return time.Since(last).Seconds()
	})
	cs := append([]prometheus.Collector{replicas.NewBehindLogStartGauge(manager.Load)}, replicas.NewSeedMetrics(manager.Load)...)
	cs = append(cs, replicas.NewCompactionMetrics(manager.Load)...)
	cs = append(cs, newPartitionCollector(manager.Load, syncer.View, parts), age)
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

var (
	descLed = prometheus.NewDesc("sluice_partitions_led",
		"Partitions whose Raft leader is this broker.", nil, nil)
	descLeaderless = prometheus.NewDesc("sluice_partitions_leaderless",
		"Partitions with a replica on this broker that knows no leader.", nil, nil)
	descUnder = prometheus.NewDesc("sluice_partitions_under_replicated",
		"Partitions this broker leads with fewer live, in-sync replicas than the cell state assigns: a replica's broker answers no transport probe, the Raft configuration lacks an assigned voter, or a follower has not held the leader's whole log for 30 s.", nil, nil)
	descReplicas = prometheus.NewDesc("sluice_replicas",
		"Partition replicas on this broker (internal offsets partitions excluded).", nil, nil)
	descLeaderChanges = prometheus.NewDesc("sluice_partition_leader_changes_total",
		"Leader elections seen by this broker's replicas: the sum of their leader epochs' increases since the broker started.", nil, nil)
	descLogBytes = prometheus.NewDesc("sluice_log_bytes",
		"Bytes of partition logs on this broker.", nil, nil)
	descSegments = prometheus.NewDesc("sluice_log_segments",
		"Log segments of the partitions on this broker.", nil, nil)
	descRebalances = prometheus.NewDesc("sluice_group_rebalances_total",
		"Consumer-group rebalances completed by the groups this broker coordinates: the sum of their generations' increases since the broker started.", nil, nil)
	descGroups = prometheus.NewDesc("sluice_groups",
		"Consumer groups this broker coordinates.", nil, nil)
)

// partitionCollector computes the broker's partition metrics at each
// scrape from the replica manager's status, the cell state's assignment,
// the transport's peer liveness and the group coordinator.
type partitionCollector struct {
	manager func() *replicas.Manager
	view    func() *cellview.View
	parts   *brokerParts

	mu            sync.Mutex
	epochs        map[string]int64 // by topic/partition: the last leader epoch seen
	leaderChanges float64
	generations   map[string]int32 // by tenant/group
	rebalances    float64
}

func newPartitionCollector(m func() *replicas.Manager, v func() *cellview.View, parts *brokerParts) *partitionCollector {
	return &partitionCollector{manager: m, view: v, parts: parts, epochs: map[string]int64{}, generations: map[string]int32{}}
}

func (pc *partitionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLed, descLeaderless, descUnder, descReplicas, descLeaderChanges, descLogBytes, descSegments, descRebalances, descGroups} {
		ch <- d
	}
}

func (pc *partitionCollector) Collect(ch chan<- prometheus.Metric) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	var led, leaderless, under, count, bytes, segments float64
	if m := pc.manager(); m != nil {
		v := pc.view()
		self := int(pc.parts.selfID.Load())
		for _, st := range m.Status() {
			count++
			bytes += float64(st.SizeBytes)
			key := st.TopicID + "/" + strconv.Itoa(st.Partition)
			if last, ok := pc.epochs[key]; ok && st.LeaderEpoch > last {
				pc.leaderChanges += float64(st.LeaderEpoch - last)
			}
			if _, ok := pc.epochs[key]; !ok || st.LeaderEpoch > pc.epochs[key] {
				pc.epochs[key] = st.LeaderEpoch
			}
			r, ok := m.Get(st.TopicID, int32(st.Partition))
			if ok {
				segments += float64(len(r.Store().Log().Segments()))
			}
			switch {
			case st.LeaderNode == 0:
				leaderless++
			case st.LeaderNode == self && self != 0:
				led++
				if ok && underReplicated(v, st.TopicID, st.Partition, r.InSync) {
					under++
				}
			}
		}
	}
	var groupCount float64
	if c := pc.parts.coord.Load(); c != nil {
		for _, g := range c.AllGroups() {
			groupCount++
			key := g.TenantID + "/" + g.Group
			if last, ok := pc.generations[key]; ok && g.Generation > last {
				pc.rebalances += float64(g.Generation - last)
			}
			if g.Generation > pc.generations[key] {
				pc.generations[key] = g.Generation
			}
		}
	}
	for _, x := range []struct {
		d *prometheus.Desc
		t prometheus.ValueType
		v float64
	}{
		{descLed, prometheus.GaugeValue, led}, {descLeaderless, prometheus.GaugeValue, leaderless},
		{descUnder, prometheus.GaugeValue, under}, {descReplicas, prometheus.GaugeValue, count},
		{descLeaderChanges, prometheus.CounterValue, pc.leaderChanges}, {descLogBytes, prometheus.GaugeValue, bytes},
		{descSegments, prometheus.GaugeValue, segments}, {descRebalances, prometheus.CounterValue, pc.rebalances},
		{descGroups, prometheus.GaugeValue, groupCount},
	} {
		ch <- prometheus.MustNewConstMetric(x.d, x.t, x.v)
	}
}
