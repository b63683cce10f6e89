package replicated

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/celltest/cellstack"
	"github.com/sluicehq/sluice/dataplane/partition"
	"github.com/sluicehq/sluice/dataplane/replicas"
)

// startLifecycleCell is a managed cell (the replica manager follows the
// cell state, as tenantd wires it, so each topic's settings reach its
// replicas from the state) with the tests' short Raft timeouts; configure,
// if set, adjusts every broker's replica manager config.
func startLifecycleCell(t testing.TB, configure func(*replicas.Config)) *managedCell {
	t.Helper()
	return startManagedCellWith(t, celltest.TestRaftConfig, configure)
}

// createTopic creates a topic of tn with config and waits until every
// broker knows it and tn's key, holds a replica of each partition, and each
// partition has a serving leader.
func (m *managedCell) createTopic(tn *cptest.Tenant, name string, parts int, config map[string]string) string {
	m.t.Helper()
	if _, err := tn.Key.CreateTopic(context.Background(), api.CreateTopicRequest{Name: name, Partitions: parts, Config: config}); err != nil {
		m.t.Fatalf("create topic %s: %v", name, err)
	}
	id := cellstack.WaitKnown(m.t, 30*time.Second, cellstack.Key{TenantID: tn.Tenant.ID, ID: tn.KeyID, Secret: tn.Secret}, name, m.syncers...)
	celltest.WaitFor(m.t, 30*time.Second, "topic "+name+" led on every broker's replicas", func() bool {
		for p := range parts {
			if m.leader(id, p) == nil {
				return false
			}
		}
		return true
	})
	return id
}

// replica is broker b's replica of a partition (nil if it has none).
func (m *managedCell) replica(b int, topicID string, part int) *partition.Replica {
	r, _ := m.mgrs[b].Get(topicID, int32(part))
	return r
}

// waitSettings waits until every broker's replica of each of a topic's
// parts partitions applies settings that want accepts: how a test knows
// that a topic's settings, at creation or changed, reached its replicas.
func (m *managedCell) waitSettings(what, topicID string, parts int, want func(partition.Settings) bool) {
	m.t.Helper()
	celltest.WaitFor(m.t, 10*time.Second, what, func() bool {
		for b := range m.mgrs {
			for p := range parts {
				if r := m.replica(b, topicID, p); r == nil || !want(r.Settings()) {
					return false
				}
			}
		}
		return true
	})
}

// leader is the serving leader's replica of a partition, nil while none
// serves or a broker lacks its replica.
func (m *managedCell) leader(topicID string, part int) *partition.Replica {
	var lead *partition.Replica
	for b := range m.mgrs {
		r := m.replica(b, topicID, part)
		if r == nil {
			return nil
		}
		if r.IsLeader() {
			lead = r
		}
	}
	return lead
}
