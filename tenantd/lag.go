package main

import (
	"log/slog"
	"sync/atomic"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/groups"
	"github.com/sluicehq/sluice/dataplane/lag"
	"github.com/sluicehq/sluice/dataplane/replicas"
	"github.com/sluicehq/sluice/dataplane/state"
)

// groupLag is a broker's consumer-group lag: the tracker behind its
// sluice_group_lag_* metrics and the groups part of its reports. It
// measures nothing until the broker's group coordinator hands it its
// committed offsets with useCoordinator.
type groupLag struct {
	tracker *lag.Tracker
	all     atomic.Pointer[func() []groups.CommittedOffset]
}

// newGroupLag measures against the broker's replicas (partition) and the
// cell state's topics (for names and retention).
func newGroupLag(syncer *state.Syncer, partition func(topicID string, part int32) (lag.Partition, bool), log *slog.Logger) (*groupLag, error) {
	g := &groupLag{}
	t, err := lag.New(lag.Config{
		Committed: g.committed,
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

// useCoordinator makes the lag follow a coordinator's committed offsets:
// the broker's wiring calls it with (*groups.Coordinator).AllCommitted once
// the coordinator runs, and with nil when it stops.
func (g *groupLag) useCoordinator(allCommitted func() []groups.CommittedOffset) {
	if allCommitted == nil {
		g.all.Store(nil)
		return
	}
	g.all.Store(&allCommitted)
}

func (g *groupLag) committed() []lag.Committed {
	all := g.all.Load()
	if all == nil {
		return nil
	}
	cs := (*all)()
	out := make([]lag.Committed, len(cs))
	for i, c := range cs {
		out[i] = lag.Committed{TenantID: c.TenantID, Group: c.Group, TopicID: c.TopicID, Partition: c.Partition,
			Offset: c.Offset, CommittedAt: c.CommittedAt}
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
