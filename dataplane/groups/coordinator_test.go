package groups_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/groups"
	"github.com/sluicehq/sluice/dataplane/partition"
)

// startCoordinators runs one offsets partition on a three-broker Raft
// cell and a coordinator per broker.
func startCoordinators(t *testing.T) (*celltest.Cell, []*groups.Coordinator) {
	return startCoordinatorsWith(t, nil)
}

// startCoordinatorsWith is startCoordinators with mod adjusting each
// coordinator's config.
func startCoordinatorsWith(t *testing.T, mod func(*groups.Config)) (*celltest.Cell, []*groups.Coordinator) {
	// The brokers' Raft timeouts, so that no election happens unless the
	// test moves leadership, and no preferred-leader check that would move
	// it back behind the test's back.
	cell := celltest.New(t, celltest.Options{Partitions: 1, Raft: partition.DefaultRaftConfig, CheckInterval: time.Hour})
	return cell, coordinatorsOn(t, cell, mod)
}

// coordinatorsOn starts a coordinator per broker of cell over its
// partition 0, mod adjusting each one's config.
func coordinatorsOn(t *testing.T, cell *celltest.Cell, mod func(*groups.Config)) []*groups.Coordinator {
	var coords []*groups.Coordinator
	for b := range 3 {
		cfg := groups.Config{NodeID: b + 1, Partitions: 1, MinSessionTimeout: time.Second,
			InitialRebalanceDelay: 10 * time.Millisecond, CheckInterval: 20 * time.Millisecond,
			Offsets: func(p int32) (groups.Log, bool) {
				r := cell.Replica(b, int(p))
				if r == nil {
					return nil, false
				}
				return r, true
			}}
		if mod != nil {
			mod(&cfg)
		}
		co, err := groups.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { co.Close() })
		coords = append(coords, co)
	}
	return coords
}

// leaveWritten makes the static member instance leave group through co,
// its last member, and waits until broker b's offsets partition has grown:
// the emptied group's record is written.
func leaveWritten(ctx context.Context, t *testing.T, cell *celltest.Cell, b int, co *groups.Coordinator, tenant, group, instance string) {
	t.Helper()
	hw := cell.Replica(b, 0).HighWatermark()
	if err := co.Leave(ctx, tenant, group, []groups.MemberIdentity{{InstanceID: instance}}); err != nil {
		t.Fatalf("leave: %v", err)
	}
	celltest.WaitFor(t, 10*time.Second, "the emptied group to be written", func() bool {
		return cell.Replica(b, 0).HighWatermark() > hw
	})
}

// waitCoordinator waits until some coordinator serves the group and
// returns its broker index.
func waitCoordinator(t *testing.T, coords []*groups.Coordinator, tenant, group string, not int) int {
	t.Helper()
	at := -1
	celltest.WaitFor(t, 60*time.Second, "a loaded coordinator", func() bool {
		for b, co := range coords {
			if _, local, err := co.Locate(tenant, group); err == nil && local && b != not {
				at = b
				return true
			}
		}
		return false
	})
	return at
}

// TestCoordinatorReloadsOnLeaderChange: a group's generation, members,
// assignments and committed offsets, and deletions, are rebuilt by the
// next leader of the offsets partition; the previous leader answers
// NOT_COORDINATOR.
func TestCoordinatorReloadsOnLeaderChange(t *testing.T) {
	cell, coords := startCoordinators(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const tenant = "tenant-1"
	b := waitCoordinator(t, coords, tenant, "g", -1)
	co := coords[b]
	for o := range coords {
		if o == b {
			continue
		}
		if _, err := coords[o].Join(ctx, groups.JoinRequest{TenantID: tenant, Group: "g", ProtocolType: "consumer",
			SessionTimeout: 10 * time.Second, Protocols: []groups.Protocol{{Name: "range"}}}); !errors.Is(err, groups.ErrNotCoordinator) {
			t.Fatalf("join at a follower: %v, want ErrNotCoordinator", err)
		}
	}

	jr, err := co.Join(ctx, groups.JoinRequest{TenantID: tenant, Group: "g", InstanceID: "i-1", ClientID: "c", ProtocolType: "consumer",
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second, Protocols: []groups.Protocol{{Name: "range", Metadata: []byte("sub")}}})
	if err != nil || jr.LeaderID != jr.MemberID || len(jr.Members) != 1 {
		t.Fatalf("join: %+v %v", jr, err)
	}
	a, err := co.Sync(ctx, tenant, "g", jr.MemberID, "i-1", jr.Generation, map[string][]byte{jr.MemberID: []byte("all of it")})
	if err != nil || string(a) != "all of it" {
		t.Fatalf("sync: %q %v", a, err)
	}
	tp := func(p int32) groups.TopicPartition { return groups.TopicPartition{TopicID: "topic-x", Partition: p} }
	// -2 as kafkajs's resetOffsets commits it (earliest): kept as sent.
	commits := []groups.OffsetCommit{{TopicPartition: tp(0), Offset: 10, LeaderEpoch: 1, Metadata: "m0"}, {TopicPartition: tp(1), Offset: 20},
		{TopicPartition: tp(2), Offset: -2}}
	if err := co.CommitOffsets(ctx, tenant, "g", jr.MemberID, "i-1", jr.Generation, commits); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if err := co.CommitOffsets(ctx, tenant, "g", jr.MemberID, "i-1", jr.Generation-1, commits); !errors.Is(err, groups.ErrIllegalGeneration) {
		t.Fatalf("stale commit: %v", err)
	}
	if err := co.DeleteOffsets(ctx, tenant, "g", []groups.TopicPartition{tp(1)}); err != nil {
		t.Fatalf("delete offsets: %v", err)
	}
	if err := co.CommitOffsets(ctx, tenant, "simple", "", "", -1, commits[:1]); err != nil {
		t.Fatalf("simple commit: %v", err)
	}
	if errs := co.DeleteGroups(ctx, tenant, []string{"simple", "g", "nope"}); errs["simple"] != nil ||
		!errors.Is(errs["g"], groups.ErrGroupNotEmpty) || !errors.Is(errs["nope"], groups.ErrGroupNotFound) {
		t.Fatalf("delete groups: %v", errs)
	}
	before, _ := co.DescribeGroup(tenant, "g")
	epoch, ok := co.Epoch(tenant, "g")
	if !ok {
		t.Fatal("the coordinator has no epoch for its group")
	}
	if _, ok := coords[(b+1)%3].Epoch(tenant, "g"); ok {
		t.Fatal("a follower has an epoch for the group")
	}

	// Move leadership of the offsets partition.
	if err := cell.Replica(b, 0).Raft().LeadershipTransfer().Error(); err != nil {
		t.Fatalf("leadership transfer: %v", err)
	}
	nb := waitCoordinator(t, coords, tenant, "g", b)
	nco := coords[nb]
	celltest.WaitFor(t, 10*time.Second, "the old coordinator to step down", func() bool {
		return errors.Is(co.Heartbeat(ctx, tenant, "g", jr.MemberID, "i-1", jr.Generation), groups.ErrNotCoordinator)
	})

	if _, ok := co.Epoch(tenant, "g"); ok {
		t.Fatal("the old coordinator still has an epoch for the group")
	}
	if ne, ok := nco.Epoch(tenant, "g"); !ok || ne <= epoch {
		t.Fatalf("new coordinator's epoch %d (%v), want more than %d", ne, ok, epoch)
	}
	after, err := nco.DescribeGroup(tenant, "g")
	if err != nil || after.State != groups.StateStable || after.Generation != before.Generation || len(after.Members) != 1 ||
		after.Members[0].MemberID != jr.MemberID || string(after.Members[0].Assignment) != "all of it" || after.Members[0].InstanceID != "i-1" {
		t.Fatalf("after failover: %+v %v\nbefore: %+v", after, err, before)
	}
	got, err := nco.FetchOffsets(ctx, tenant, "g", nil)
	if err != nil || len(got) != 2 || got[tp(0)].Offset != 10 || got[tp(0)].Metadata != "m0" || got[tp(0)].LeaderEpoch != 1 || got[tp(2)].Offset != -2 {
		t.Fatalf("offsets after failover: %+v %v", got, err)
	}
	if _, err := nco.DescribeGroup(tenant, "simple"); !errors.Is(err, groups.ErrGroupNotFound) {
		t.Fatalf("deleted group after failover: %v", err)
	}
	if err := nco.Heartbeat(ctx, tenant, "g", jr.MemberID, "i-1", jr.Generation); err != nil {
		t.Fatalf("heartbeat at the new coordinator: %v", err)
	}
	if err := nco.CommitOffsets(ctx, tenant, "g", jr.MemberID, "i-1", jr.Generation-1, commits); !errors.Is(err, groups.ErrIllegalGeneration) {
		t.Fatalf("stale commit at the new coordinator: %v", err)
	}
	all := nco.AllCommitted()
	offsets := map[int32]int64{}
	for _, c := range all {
		if c.TenantID == tenant && c.Group == "g" {
			offsets[c.Partition] = c.Offset
		}
	}
	if len(all) != 2 || len(offsets) != 2 || offsets[0] != 10 || offsets[2] != -2 {
		t.Fatalf("all committed: %+v", all)
	}
	if l, _ := nco.ListGroups(tenant); len(l) != 1 || l[0].Group != "g" || l[0].State != groups.StateStable {
		t.Fatalf("list groups: %+v", l)
	}
	if l, _ := nco.ListGroups("tenant-2"); len(l) != 0 {
		t.Fatalf("another tenant lists %+v", l)
	}

	// The last member leaves: the group is Empty at the next generation,
	// and that is written, so the next leader does not bring the member
	// back.
	leaveWritten(ctx, t, cell, nb, nco, tenant, "g", "i-1")
	if err := cell.Replica(nb, 0).Raft().LeadershipTransfer().Error(); err != nil {
		t.Fatalf("leadership transfer: %v", err)
	}
	third := coords[waitCoordinator(t, coords, tenant, "g", nb)]
	d, err := third.DescribeGroup(tenant, "g")
	if err != nil || d.State != groups.StateEmpty || len(d.Members) != 0 || d.Generation != after.Generation+1 {
		t.Fatalf("emptied group after a second failover: %+v %v", d, err)
	}
}

// TestCoordinatorSignalsChanges: the coordinator calls Config.Changed when
// what a group consumes may have changed (its assignment, its first
// commit of a partition, deletions), so the lag report need not wait for
// its interval; a commit that only moves known offsets does not call it.
// AllGroups shows a group's members before it commits anything.
func TestCoordinatorSignalsChanges(t *testing.T) {
	var changed [3]atomic.Int64
	node := 0
	_, coords := startCoordinatorsWith(t, func(c *groups.Config) {
		n := &changed[node]
		node++
		c.Changed = func() { n.Add(1) }
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const tenant = "tenant-1"
	b := waitCoordinator(t, coords, tenant, "g", -1)
	co, n := coords[b], &changed[b]
	if n.Load() == 0 {
		t.Fatal("loading the offsets partition did not signal")
	}
	step := func(name string, wantSignal bool, do func() error) {
		t.Helper()
		before := n.Load()
		if err := do(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := n.Load() > before; got != wantSignal {
			t.Fatalf("%s: signalled %v, want %v", name, got, wantSignal)
		}
	}
	var jr groups.JoinResult
	step("join", false, func() (err error) {
		jr, err = co.Join(ctx, groups.JoinRequest{TenantID: tenant, Group: "g", ClientID: "c", ProtocolType: "consumer",
			SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second, Protocols: []groups.Protocol{{Name: "range", Metadata: []byte("sub")}}})
		return err
	})
	step("sync", true, func() error {
		_, err := co.Sync(ctx, tenant, "g", jr.MemberID, "", jr.Generation, map[string][]byte{jr.MemberID: []byte("asg")})
		return err
	})
	all := co.AllGroups()
	if len(all) != 1 || all[0].TenantID != tenant || all[0].Group != "g" || all[0].ProtocolType != "consumer" ||
		len(all[0].Members) != 1 || string(all[0].Members[0].Metadata) != "sub" || string(all[0].Members[0].Assignment) != "asg" ||
		len(all[0].Offsets) != 0 {
		t.Fatalf("all groups before any commit: %+v", all)
	}
	tp := func(p int32) groups.TopicPartition { return groups.TopicPartition{TopicID: "topic-x", Partition: p} }
	commit := func(offset int64, parts ...int32) func() error {
		var cs []groups.OffsetCommit
		for _, p := range parts {
			cs = append(cs, groups.OffsetCommit{TopicPartition: tp(p), Offset: offset})
		}
		return func() error { return co.CommitOffsets(ctx, tenant, "g", jr.MemberID, "", jr.Generation, cs) }
	}
	step("first commit", true, commit(1, 0, 1))
	step("commit moving known offsets", false, commit(2, 0, 1))
	step("commit of a new partition", true, commit(3, 1, 2))
	step("delete offsets", true, func() error { return co.DeleteOffsets(ctx, tenant, "g", []groups.TopicPartition{tp(2)}) })
	if all := co.AllGroups(); len(all) != 1 || len(all[0].Offsets) != 2 || all[0].Offsets[tp(1)].Offset != 3 {
		t.Fatalf("all groups after commits: %+v", all)
	}
}
