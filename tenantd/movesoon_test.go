package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/wire"
)

// TestWatchMovesAsksForReports: a change of a replica's leader, voters,
// non-voters or tenant-move step asks for a report; a joiner's or a
// mirror's distance alone does not.
func TestWatchMovesAsksForReports(t *testing.T) {
	var mu sync.Mutex
	cur := []wire.PartitionStatus{{TopicID: "tp", Partition: 0, LeaderNode: 1, LeaderEpoch: 2, Voters: []int{1, 2, 3}, Nonvoters: []int{4},
		Joining: []wire.JoinStatus{{Node: 4, BytesBehind: 100}}, Mirror: &wire.MirrorStatus{Mirroring: true, Lag: new(int64(100))}}}
	set := func(f func(p *wire.PartitionStatus)) {
		mu.Lock()
		defer mu.Unlock()
		f(&cur[0])
	}
	status := func() []wire.PartitionStatus {
		mu.Lock()
		defer mu.Unlock()
		out := make([]wire.PartitionStatus, len(cur))
		copy(out, cur)
		return out
	}
	soon := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- watchMoves(ctx, status, nil, soon) }()
	defer func() {
		cancel()
		<-done
	}()

	// A joiner's and a mirror's distance change: no report asked for over several
	// comparisons (the one case checked by waiting, bounded).
	set(func(p *wire.PartitionStatus) {
		p.Joining = []wire.JoinStatus{{Node: 4, BytesBehind: 10}}
		p.Mirror = &wire.MirrorStatus{Mirroring: true, Lag: new(int64(10))}
	})
	select {
	case <-soon:
		t.Fatal("a joiner's distance asked for a report")
	case <-time.After(5 * moveSoonEvery):
	}
	for _, tc := range []struct {
		name string
		f    func(p *wire.PartitionStatus)
	}{
		{"promoted", func(p *wire.PartitionStatus) { p.Voters, p.Nonvoters = []int{1, 2, 3, 4}, nil }},
		{"leader handed over", func(p *wire.PartitionStatus) { p.LeaderNode, p.LeaderEpoch = 4, 3 }},
		{"old replica removed", func(p *wire.PartitionStatus) { p.Voters = []int{4, 2, 3} }},
		{"mirror promoted", func(p *wire.PartitionStatus) { p.Mirror = &wire.MirrorStatus{Promoted: true} }},
		{"fenced", func(p *wire.PartitionStatus) { p.Mirror = &wire.MirrorStatus{Fenced: true, FencedEnd: 9} }},
	} {
		set(tc.f)
		select {
		case <-soon:
		case <-time.After(time.Minute):
			t.Fatalf("%s: no report asked for", tc.name)
		}
	}
}

// TestTenantMoveStepsText: the text changes at each tenant-move step a
// broker's report must carry soon (a source tenant dropped at the switch,
// an import asked, an import durable) and not otherwise.
func TestTenantMoveStepsText(t *testing.T) {
	moving := []wire.Tenant{{ID: "t1", Move: &wire.TenantMove{Role: wire.MoveSource, Peer: "c2"}}, {ID: "t2"}}
	base := tenantMoveSteps(moving, nil)
	if got := tenantMoveSteps([]wire.Tenant{{ID: "t2"}, moving[0]}, nil); got != base {
		t.Errorf("the same moves in another order changed the text: %q vs %q", got, base)
	}
	for name, got := range map[string]string{
		"switched (source tenant dropped)": tenantMoveSteps([]wire.Tenant{{ID: "t2"}}, nil),
		"import asked": tenantMoveSteps([]wire.Tenant{{ID: "t1", Move: &wire.TenantMove{Role: wire.MoveSource, Peer: "c2",
			GroupOffsets: []wire.CommittedOffset{}}}, {ID: "t2"}}, nil),
		"import durable": tenantMoveSteps(moving, []wire.OffsetsImport{{TenantID: "t1", Partitions: []int{0}}}),
	} {
		if got == base {
			t.Errorf("%s: the text did not change", name)
		}
	}
}

// TestWatchFastWhileTenantMoves: a cell state that names a tenant move
// makes the watchers compare every moveSoonFast; one without, or without
// a predicate, every moveSoonEvery.
func TestWatchFastWhileTenantMoves(t *testing.T) {
	still := []wire.Tenant{{ID: "a"}, {ID: "b"}}
	moving := []wire.Tenant{{ID: "a"}, {ID: "b", Move: &wire.TenantMove{Role: wire.MoveSource, Peer: "cell-2"}}}
	if tenantMoving(still) || !tenantMoving(moving) || tenantMoving(nil) {
		t.Fatalf("tenantMoving: still %v, moving %v, none %v", tenantMoving(still), tenantMoving(moving), tenantMoving(nil))
	}
	for _, tc := range []struct {
		name string
		fast func() bool
		want time.Duration
	}{
		{"no predicate", nil, moveSoonEvery},
		{"no move", func() bool { return tenantMoving(still) }, moveSoonEvery},
		{"a move", func() bool { return tenantMoving(moving) }, moveSoonFast},
	} {
		if got := watchEvery(tc.fast); got != tc.want {
			t.Errorf("%s: every %s, want %s", tc.name, got, tc.want)
		}
	}
	if moveSoonFast >= moveSoonEvery {
		t.Fatalf("moveSoonFast %s is not below moveSoonEvery %s", moveSoonFast, moveSoonEvery)
	}
}
