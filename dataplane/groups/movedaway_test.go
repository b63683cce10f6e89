package groups_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/groups"
)

// gatedLog holds each Produce while gate is set, until release closes.
type gatedLog struct {
	groups.Log
	gate    *atomic.Bool
	held    chan<- struct{}
	release <-chan struct{}
}

func (l gatedLog) Produce(ctx context.Context, batch []byte) (int64, error) {
	if l.gate.Load() {
		l.held <- struct{}{}
		<-l.release
	}
	return l.Log.Produce(ctx, batch)
}

// TestMovedAwayCommitsNotAcknowledged: once the state that drops a tenant
// moving away (the switch) is applied, its commits are refused with
// NOT_COORDINATOR, including one that was already on its way through Raft
// and becomes durable only after the switch: the destination imports the
// offsets the source reports after the switch, so acknowledging that
// commit would lose it. The other tenant commits throughout, and a tenant
// that moves back commits again.
func TestMovedAwayCommitsNotAcknowledged(t *testing.T) {
	var gate atomic.Bool
	held, release := make(chan struct{}, 3), make(chan struct{})
	_, coords := movingCell(t, func(_ int, l groups.Log) groups.Log {
		return gatedLog{Log: l, gate: &gate, held: held, release: release}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g := groupIn(0, 0)
	co := coords[waitCoordinator(t, coords, movingTenant, g, -1)]
	other := coords[waitCoordinator(t, coords, "tenant-staying", g, -1)]
	tp := groups.TopicPartition{TopicID: "topic-x", Partition: 0}
	commit := func(co *groups.Coordinator, tenant string, off int64) error {
		return co.CommitOffsets(ctx, tenant, g, "", "", -1, []groups.OffsetCommit{{TopicPartition: tp, Offset: off}})
	}
	staying := wire.Tenant{ID: "tenant-staying"}
	setMoves(coords, []wire.Tenant{staying, {ID: movingTenant, Move: &wire.TenantMove{Role: wire.MoveSource, Peer: "cell-b"}}})
	if err := commit(co, movingTenant, 1); err != nil {
		t.Fatalf("a commit while the tenant is moving away, before the switch: %v", err)
	}

	gate.Store(true)
	inflight := make(chan error, 1)
	go func() { inflight <- commit(co, movingTenant, 2) }()
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the commit never reached the log")
	}
	setMoves(coords, []wire.Tenant{staying}) // the switch
	gate.Store(false)
	close(release)
	notCoordinator := func(what string, err error) {
		t.Helper()
		if groups.KafkaCode(err) != 16 || !strings.Contains(err.Error(), "moved") {
			t.Fatalf("%s: %v (code %d), want NOT_COORDINATOR saying the tenant moved", what, err, groups.KafkaCode(err))
		}
	}
	select {
	case err := <-inflight:
		notCoordinator("a commit durable only after the switch", err)
	case <-ctx.Done():
		t.Fatal("the in-flight commit never returned")
	}
	notCoordinator("a commit after the switch", commit(co, movingTenant, 3))
	if err := commit(other, "tenant-staying", 1); err != nil {
		t.Fatalf("the tenant that stays: %v", err)
	}
	// A later state without the tenant keeps it gone; one listing it
	// again (it moved back) serves it.
	setMoves(coords, []wire.Tenant{staying})
	notCoordinator("a commit after a later state", commit(co, movingTenant, 3))
	setMoves(coords, []wire.Tenant{staying, {ID: movingTenant}})
	if err := commit(co, movingTenant, 4); err != nil {
		t.Fatalf("a commit after the tenant moved back: %v", err)
	}
}
