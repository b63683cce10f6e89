package groups_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/groups"
)

// clock runs at the pace of real time from a point the test sets, so
// that rebalances complete while the test jumps hours ahead.
type clock struct {
	mu   sync.Mutex
	skew time.Duration
}

func newClock(t0 time.Time) *clock { return &clock{skew: time.Until(t0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.skew)
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	c.skew = time.Until(t)
	c.mu.Unlock()
}

// TestOffsetsExpire: an empty group's offsets and record are deleted once
// OffsetsRetention has passed since its last commit and since it became
// empty; a group with members keeps them however old; the deletion is
// durable, so the next coordinator does not bring them back.
func TestOffsetsExpire(t *testing.T) {
	const retention = time.Hour
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clk := newClock(t0)
	cell, coords := startCoordinatorsWith(t, func(c *groups.Config) {
		c.Now, c.OffsetsRetention = clk.Now, retention
		c.MaxSessionTimeout = 24 * time.Hour
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const tenant = "tenant-1"
	b := waitCoordinator(t, coords, tenant, "standalone", -1)
	co := coords[b]
	tp := groups.TopicPartition{TopicID: "topic-x", Partition: 0}
	commit := []groups.OffsetCommit{{TopicPartition: tp, Offset: 7}}

	// member joins a consumer of group that stays a member, then syncs
	// and commits as it; it returns the member id.
	member := func(group string) string {
		t.Helper()
		jr, err := co.Join(ctx, groups.JoinRequest{TenantID: tenant, Group: group, ClientID: "c", ProtocolType: "consumer",
			SessionTimeout: 24 * time.Hour, RebalanceTimeout: 10 * time.Second, Protocols: []groups.Protocol{{Name: "range"}}})
		if err != nil {
			t.Fatalf("join %s: %v", group, err)
		}
		if _, err := co.Sync(ctx, tenant, group, jr.MemberID, "", jr.Generation, map[string][]byte{jr.MemberID: []byte("a")}); err != nil {
			t.Fatalf("sync %s: %v", group, err)
		}
		if err := co.CommitOffsets(ctx, tenant, group, jr.MemberID, "", jr.Generation, commit); err != nil {
			t.Fatalf("commit %s: %v", group, err)
		}
		return jr.MemberID
	}

	// standalone: commits without membership, last at t0.
	if err := co.CommitOffsets(ctx, tenant, "standalone", "", "", -1, commit); err != nil {
		t.Fatal(err)
	}
	// active: a member that stays, committed at t0.
	member("active")
	// left: committed at t0, its member leaves 30 minutes later.
	left := member("left")
	clk.set(t0.Add(30 * time.Minute))
	if err := co.Leave(ctx, tenant, "left", []groups.MemberIdentity{{MemberID: left}}); err != nil {
		t.Fatal(err)
	}
	celltest.WaitFor(t, 10*time.Second, "the coordinator to see left empty", func() bool {
		d, err := co.DescribeGroup(tenant, "left")
		return err == nil && d.State == groups.StateEmpty
	})
	waitChecks(t, co)

	has := func(group string) bool {
		got, err := co.FetchOffsets(ctx, tenant, group, nil)
		if err != nil {
			t.Fatalf("fetch offsets of %s: %v", group, err)
		}
		return len(got) == 1
	}
	clk.set(t0.Add(retention - time.Minute))
	waitChecks(t, co)
	if !has("standalone") || !has("active") || !has("left") {
		t.Fatal("offsets expired before the retention passed")
	}

	clk.set(t0.Add(retention + time.Minute))
	celltest.WaitFor(t, 10*time.Second, "standalone's offsets to expire", func() bool { return !has("standalone") })
	if _, err := co.DescribeGroup(tenant, "standalone"); !errors.Is(err, groups.ErrGroupNotFound) {
		t.Fatalf("expired group still described: %v", err)
	}
	waitChecks(t, co)
	if !has("active") || !has("left") {
		t.Fatal("left expired less than a retention after it became empty, or active expired with a member")
	}

	// A commit restarts an empty group's clock.
	clk.set(t0.Add(retention + 20*time.Minute))
	if err := co.CommitOffsets(ctx, tenant, "left", "", "", -1, commit); err != nil {
		t.Fatal(err)
	}
	clk.set(t0.Add(2*retention + 10*time.Minute))
	waitChecks(t, co)
	if !has("left") {
		t.Fatal("left expired less than a retention after its last commit")
	}
	clk.set(t0.Add(2*retention + 30*time.Minute))
	celltest.WaitFor(t, 10*time.Second, "left's offsets to expire", func() bool { return !has("left") })
	if !has("active") {
		t.Fatal("a group with a member lost its offsets")
	}

	// The next coordinator replays the tombstones.
	if err := cell.Replica(b, 0).Raft().LeadershipTransfer().Error(); err != nil {
		t.Fatalf("leadership transfer: %v", err)
	}
	nco := coords[waitCoordinator(t, coords, tenant, "active", b)]
	for _, g := range []string{"standalone", "left"} {
		if got, err := nco.FetchOffsets(ctx, tenant, g, nil); err != nil || len(got) != 0 {
			t.Fatalf("%s after failover: %+v %v", g, got, err)
		}
	}
	if got, err := nco.FetchOffsets(ctx, tenant, "active", nil); err != nil || got[tp].Offset != 7 {
		t.Fatalf("active after failover: %+v %v", got, err)
	}
}

// TestOffsetsRetentionNegativeKeepsForever: a negative retention never
// expires anything.
func TestOffsetsRetentionNegativeKeepsForever(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clk := newClock(t0)
	_, coords := startCoordinatorsWith(t, func(c *groups.Config) { c.Now, c.OffsetsRetention = clk.Now, -1 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	co := coords[waitCoordinator(t, coords, "t", "g", -1)]
	tp := groups.TopicPartition{TopicID: "x", Partition: 0}
	if err := co.CommitOffsets(ctx, "t", "g", "", "", -1, []groups.OffsetCommit{{TopicPartition: tp, Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	waitChecks(t, co)
	clk.set(t0.Add(10 * 365 * 24 * time.Hour))
	waitChecks(t, co)
	waitChecks(t, co)
	if got, err := co.FetchOffsets(ctx, "t", "g", nil); err != nil || got[tp].Offset != 1 {
		t.Fatalf("offsets after ten years with retention off: %+v %v", got, err)
	}
}

// waitChecks returns after the coordinator has run its periodic check
// at least twice since the call.
func waitChecks(t *testing.T, co *groups.Coordinator) {
	t.Helper()
	from := co.Checks()
	celltest.WaitFor(t, 10*time.Second, "two coordinator checks", func() bool { return co.Checks() >= from+2 })
}
