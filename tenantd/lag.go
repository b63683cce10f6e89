package main

import (
	"log/slog"
	"sync/atomic"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/groups"
	"github.com/sluicehq/sluice/dataplane/lag"
	"github.com/sluicehq/sluice/dataplane/replicas"
)

// groupLag is a broker's consumer-group lag: the tracker behind its
// sluice_group_lag_* metrics and the groups part of its reports. It
// measures nothing until the broker's group coordinator hands it its
// groups with useCoordinator. A group consumes the topics it committed
// on and those its members subscribe to or are assigned under Kafka's
// consumer protocol; every partition of them is reported.
type groupLag struct {
	tracker *lag.Tracker
	syncer  *cellview.Syncer
	all     atomic.Pointer[func() []groups.GroupSnapshot]
	// soon asks the reporter for a report before its interval ends
	// (cellview.ReporterConfig.Soon); changed sends on it.
	soon chan struct{}
}

// newGroupLag measures against the broker's replicas (partition) and the
// cell state's topics (for names, partitions and retention).
func newGroupLag(syncer *cellview.Syncer, partition func(topicID string, part int32) (lag.Partition, bool), log *slog.Logger) (*groupLag, error) {
	g := &groupLag{syncer: syncer, soon: make(chan struct{}, 1)}
	t, err := lag.New(lag.Config{
		Committed: g.committed,
		Consumed:  g.consumed,
		Partition: partition,
		Topic:     func(id string) (*wire.Topic, bool) { return syncer.View().TopicByID(id) },
		Logger:    log,
	})
	if err != nil {
		return nil, err
	}
	g.tracker = t
	return g, nil
}

// useCoordinator makes the lag follow a coordinator's groups: the
// broker's wiring calls it with (*groups.Coordinator).AllGroups once the
// coordinator runs, and with nil when it stops.
func (g *groupLag) useCoordinator(allGroups func() []groups.GroupSnapshot) {
	if allGroups == nil {
		g.all.Store(nil)
	} else {
		g.all.Store(&allGroups)
	}
	g.changed()
}

// changed asks for a report soon (groups.Config.Changed): a group
// appeared, committed a partition for the first time or was assigned
// anew. It never blocks; requests coalesce until the report is sent.
func (g *groupLag) changed() {
	select {
	case g.soon <- struct{}{}:
	default:
	}
}

func (g *groupLag) snapshot() []groups.GroupSnapshot {
	all := g.all.Load()
	if all == nil {
		return nil
	}
	return (*all)()
}

func (g *groupLag) committed() []lag.Committed {
	var out []lag.Committed
	for _, s := range g.snapshot() {
		for tp, c := range s.Offsets {
			out = append(out, lag.Committed{TenantID: s.TenantID, Group: s.Group, TopicID: tp.TopicID, Partition: tp.Partition,
				Offset: c.Offset, CommittedAt: c.CommittedAt})
		}
	}
	return out
}

// consumed is the topics the groups' members subscribe to or are
// assigned, by id in the tenant's namespace; names the cell state does
// not know (a subscription to a topic not created yet) are left out.
func (g *groupLag) consumed() []lag.Consumed {
	var out []lag.Consumed
	v := g.syncer.View()
	for _, s := range g.snapshot() {
		md, asg := make([][]byte, len(s.Members)), make([][]byte, len(s.Members))
		for i, m := range s.Members {
			md[i], asg[i] = m.Metadata, m.Assignment
		}
		for _, name := range lag.ConsumerTopics(s.ProtocolType, md, asg) {
			if t, ok := v.Topic(s.TenantID, name); ok {
				out = append(out, lag.Consumed{TenantID: s.TenantID, Group: s.Group, TopicID: t.ID})
			}
		}
	}
	return out
}

// report is the groups part of the broker's report.
func (g *groupLag) report() []wire.GroupLag { return g.tracker.Report() }

// replicaOf looks a partition up among the broker's running replicas.
func replicaOf(m *atomic.Pointer[replicas.Manager]) func(topicID string, part int32) (lag.Partition, bool) {
	return func(topicID string, part int32) (lag.Partition, bool) {
		mgr := m.Load()
		if mgr == nil {
			return nil, false
		}
		r, ok := mgr.Get(topicID, part)
		if !ok {
			return nil, false
		}
		return lag.ReplicaPartition(r), true
	}
}
