package groups_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/groups"
	"github.com/sluicehq/sluice/dataplane/partition"
)

const movingTenant = "tenant-moving"

// moving is the cell state's tenants with movingTenant arriving from
// cell-a, its groups held or not, offsets listed or not (nil), beside a
// tenant that is not moving.
func moving(hold bool, offsets []wire.CommittedOffset) []wire.Tenant {
	return []wire.Tenant{{ID: "tenant-staying"},
		{ID: movingTenant, Move: &wire.TenantMove{Role: wire.MoveDestination, Peer: "cell-a", HoldGroups: hold, GroupOffsets: offsets}}}
}

func setMoves(coords []*groups.Coordinator, tenants []wire.Tenant) {
	for _, co := range coords {
		co.SetMoves(tenants)
	}
}

// movingCell runs two offsets partitions on a three-broker cell and a
// coordinator per broker, wrap (if set) wrapping each broker's logs.
func movingCell(t *testing.T, wrap func(b int, l groups.Log) groups.Log) (*celltest.Cell, []*groups.Coordinator) {
	cell := celltest.New(t, celltest.Options{Partitions: 2, Raft: partition.DefaultRaftConfig, CheckInterval: time.Hour})
	node := 0
	coords := coordinatorsOn(t, cell, func(c *groups.Config) {
		b := node
		node++
		c.Partitions = 2
		c.Logger = celltest.Logger(t, slog.LevelInfo)
		if wrap != nil {
			inner := c.Offsets
			c.Offsets = func(p int32) (groups.Log, bool) {
				l, ok := inner(p)
				if !ok {
					return nil, false
				}
				return wrap(b, l), true
			}
		}
	})
	return cell, coords
}

// groupIn returns a group name of movingTenant living in offsets
// partition p of 2, the n-th such name.
func groupIn(p int32, n int) string {
	for i := 0; ; i++ {
		g := fmt.Sprintf("g-%d", i)
		if groups.Partition(movingTenant, g, 2) == p {
			if n == 0 {
				return g
			}
			n--
		}
	}
}

// imported is the union of the partitions the coordinators report as
// imported for movingTenant.
func imported(coords []*groups.Coordinator) []int {
	var out []int
	for _, co := range coords {
		for _, imp := range co.OffsetsImported() {
			if imp.TenantID == movingTenant {
				out = append(out, imp.Partitions...)
			}
		}
	}
	slices.Sort(out)
	return out
}

func waitImported(t *testing.T, coords []*groups.Coordinator) {
	t.Helper()
	celltest.WaitFor(t, 60*time.Second, "every offsets partition to report its import", func() bool {
		return slices.Equal(imported(coords), []int{0, 1})
	})
}

// TestMoveHoldsGroups: while a tenant moving here has HoldGroups, every
// group call of it answers COORDINATOR_LOAD_IN_PROGRESS (Kafka 14,
// retriable) saying the tenant is moving, and another tenant's groups are
// served; once the hold clears the tenant's groups are served too.
func TestMoveHoldsGroups(t *testing.T) {
	_, coords := movingCell(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g := groupIn(0, 0)
	b := waitCoordinator(t, coords, movingTenant, g, -1)
	co := coords[b]
	setMoves(coords, moving(true, nil))
	join := func(tenant string) error {
		_, err := co.Join(ctx, groups.JoinRequest{TenantID: tenant, Group: g, ProtocolType: "consumer",
			SessionTimeout: 10 * time.Second, Protocols: []groups.Protocol{{Name: "range"}}})
		return err
	}
	tp := groups.TopicPartition{TopicID: "topic-x", Partition: 0}
	calls := []struct {
		name string
		do   func() error
	}{
		{"join", func() error { return join(movingTenant) }},
		{"sync", func() error { _, err := co.Sync(ctx, movingTenant, g, "m", "", 1, nil); return err }},
		{"heartbeat", func() error { return co.Heartbeat(ctx, movingTenant, g, "m", "", 1) }},
		{"leave", func() error { return co.Leave(ctx, movingTenant, g, []groups.MemberIdentity{{MemberID: "m"}}) }},
		{"commit", func() error {
			return co.CommitOffsets(ctx, movingTenant, g, "", "", -1, []groups.OffsetCommit{{TopicPartition: tp, Offset: 1}})
		}},
		{"fetch", func() error { _, err := co.FetchOffsets(ctx, movingTenant, g, nil); return err }},
		{"describe", func() error { _, err := co.DescribeGroup(movingTenant, g); return err }},
		{"list", func() error { _, err := co.ListGroups(movingTenant); return err }},
		{"delete offsets", func() error { return co.DeleteOffsets(ctx, movingTenant, g, []groups.TopicPartition{tp}) }},
		{"delete groups", func() error { return co.DeleteGroups(ctx, movingTenant, []string{g})[g] }},
	}
	for _, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			if !errors.Is(err, groups.ErrCoordinatorLoading) || groups.KafkaCode(err) != 14 || !strings.Contains(err.Error(), "moving") {
				t.Fatalf("%s of a held tenant: %v (code %d), want COORDINATOR_LOAD_IN_PROGRESS saying the tenant is moving",
					tc.name, err, groups.KafkaCode(err))
			}
		})
	}
	other := coords[waitCoordinator(t, coords, "tenant-staying", g, -1)]
	if err := other.CommitOffsets(ctx, "tenant-staying", g, "", "", -1, []groups.OffsetCommit{{TopicPartition: tp, Offset: 1}}); err != nil {
		t.Fatalf("a tenant that is not moving: %v", err)
	}
	setMoves(coords, moving(false, nil))
	if err := join(movingTenant); err != nil {
		t.Fatalf("join once the hold is cleared: %v", err)
	}
}

// TestMoveImportsOffsets: the listed offsets are committed through Raft
// in the partitions of their groups and acknowledged for every partition
// (one holds none of the tenant's groups); OffsetFetch returns them once
// the hold clears; a repeated state writes nothing again, nor does a new
// leader of the partition; a changed list is imported again except into a
// group that committed on its own since.
func TestMoveImportsOffsets(t *testing.T) {
	cell, coords := movingCell(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g1, g2 := groupIn(0, 0), groupIn(0, 1)
	b := waitCoordinator(t, coords, movingTenant, g1, -1)
	waitCoordinator(t, coords, movingTenant, groupIn(1, 0), -1)
	list := []wire.CommittedOffset{
		{Group: g1, TopicID: "topic-x", Partition: 0, Offset: 10, Metadata: "m"},
		{Group: g1, TopicID: "topic-x", Partition: 1, Offset: 11},
		{Group: g2, TopicID: "topic-y", Partition: 0, Offset: 5},
		{Group: g2, TopicID: "topic-y", Partition: 0, Offset: 7},  // the last of a partition wins
		{Group: "", TopicID: "topic-y", Partition: 0, Offset: 7},  // dropped: no group
		{Group: g2, TopicID: "topic-y", Partition: -1, Offset: 7}, // dropped: no partition
	}
	if imp := imported(coords); len(imp) != 0 {
		t.Fatalf("imported before any list: %v", imp)
	}
	setMoves(coords, moving(true, list))
	waitImported(t, coords)
	hw := cell.Replica(b, 0).HighWatermark()
	if hw != 4 { // three offsets and the marker
		t.Fatalf("offsets partition 0 holds %d records after the import, want 4", hw)
	}
	if hw1 := cell.Replica(cell.Leader(1), 1).HighWatermark(); hw1 != 0 {
		t.Fatalf("offsets partition 1, with none of the tenant's groups, holds %d records", hw1)
	}
	if _, err := coords[b].FetchOffsets(ctx, movingTenant, g1, nil); !errors.Is(err, groups.ErrCoordinatorLoading) {
		t.Fatalf("fetch while held after the import: %v", err)
	}

	check := func(co *groups.Coordinator, want map[string]map[groups.TopicPartition]int64) {
		t.Helper()
		for g, offs := range want {
			got, err := co.FetchOffsets(ctx, movingTenant, g, nil)
			if err != nil || len(got) != len(offs) {
				t.Fatalf("offsets of %s: %+v %v, want %v", g, got, err, offs)
			}
			for tp, o := range offs {
				if got[tp].Offset != o || got[tp].LeaderEpoch != -1 {
					t.Fatalf("offset of %s %v: %+v, want %d", g, tp, got[tp], o)
				}
			}
		}
	}
	x0, x1, y0 := groups.TopicPartition{TopicID: "topic-x"}, groups.TopicPartition{TopicID: "topic-x", Partition: 1}, groups.TopicPartition{TopicID: "topic-y"}
	want := map[string]map[groups.TopicPartition]int64{g1: {x0: 10, x1: 11}, g2: {y0: 7}}

	// The same list again, as every later state repeats it: nothing new.
	setMoves(coords, moving(true, slices.Clone(list)))
	settle(t, coords)
	if got := cell.Replica(b, 0).HighWatermark(); got != hw {
		t.Fatalf("a repeated import wrote %d records", got-hw)
	}
	setMoves(coords, moving(false, list))
	check(coords[b], want)
	if got, _ := coords[b].FetchOffsets(ctx, movingTenant, g1, []groups.TopicPartition{x0}); got[x0].Metadata != "m" {
		t.Fatalf("imported metadata: %+v", got[x0])
	}

	// A new leader replays the marker and writes nothing.
	if err := cell.Replica(b, 0).Raft().LeadershipTransfer().Error(); err != nil {
		t.Fatalf("leadership transfer: %v", err)
	}
	nb := waitCoordinator(t, coords, movingTenant, g1, b)
	waitImported(t, coords)
	settle(t, coords)
	if got := cell.Replica(nb, 0).HighWatermark(); got != hw {
		t.Fatalf("the new leader wrote %d records", got-hw)
	}
	check(coords[nb], want)

	// g1 commits on its own; then a changed list is imported into g2 only.
	if err := coords[nb].CommitOffsets(ctx, movingTenant, g1, "", "", -1, []groups.OffsetCommit{{TopicPartition: x0, Offset: 50}}); err != nil {
		t.Fatalf("commit after the release: %v", err)
	}
	changed := []wire.CommittedOffset{
		{Group: g1, TopicID: "topic-x", Partition: 0, Offset: 12},
		{Group: g2, TopicID: "topic-y", Partition: 0, Offset: 9},
	}
	setMoves(coords, moving(false, changed))
	celltest.WaitFor(t, 30*time.Second, "the changed list's import", func() bool {
		got, err := coords[nb].FetchOffsets(ctx, movingTenant, g2, nil)
		return err == nil && got[y0].Offset == 9
	})
	check(coords[nb], map[string]map[groups.TopicPartition]int64{g2: {y0: 9}})
	if got, _ := coords[nb].FetchOffsets(ctx, movingTenant, g1, nil); got[x0].Offset != 50 || got[x1].Offset != 11 {
		t.Fatalf("a group that committed since the import was overwritten: %+v", got)
	}
}

// settle waits for every coordinator to run two more checks, time for
// any import a state would start to be written.
func settle(t *testing.T, coords []*groups.Coordinator) {
	t.Helper()
	var at []int64
	for _, co := range coords {
		at = append(at, co.Checks())
	}
	celltest.WaitFor(t, 10*time.Second, "two more checks", func() bool {
		for i, co := range coords {
			if co.Checks() < at[i]+2 {
				return false
			}
		}
		return true
	})
}

// failingLog fails the produce calls fail says to, before they reach Raft.
type failingLog struct {
	groups.Log
	fail func() bool
}

func (l failingLog) Produce(ctx context.Context, batch []byte) (int64, error) {
	if l.fail() {
		return 0, errors.New("injected: leader lost")
	}
	return l.Log.Produce(ctx, batch)
}

// TestMoveImportSurvivesLeaderChange: an import cut short after its first
// batch (the leader lost mid-import) is finished by the next leader,
// which commits only what is missing: the partition ends with every
// offset once and one marker.
func TestMoveImportSurvivesLeaderChange(t *testing.T) {
	groups.SetImportLimits(t, 16<<10, time.Hour) // the first leader does not retry
	var produces, failed atomic.Int64
	cell, coords := movingCell(t, func(b int, l groups.Log) groups.Log {
		return failingLog{Log: l, fail: func() bool {
			if produces.Add(1) == 2 { // the import's second batch
				failed.Add(1)
				return true
			}
			return false
		}}
	})
	g := groupIn(0, 0)
	b := waitCoordinator(t, coords, movingTenant, g, -1)
	waitCoordinator(t, coords, movingTenant, groupIn(1, 0), -1)
	var list []wire.CommittedOffset
	meta := strings.Repeat("m", 1000)
	const n = 60 // about 60 KiB: four batches of 16 KiB
	for i := range n {
		list = append(list, wire.CommittedOffset{Group: groupIn(0, i%5), TopicID: "topic-x", Partition: i, Offset: int64(i), Metadata: meta})
	}
	setMoves(coords, moving(true, list))
	celltest.WaitFor(t, 30*time.Second, "the injected failure", func() bool { return failed.Load() == 1 })
	first := cell.Replica(b, 0).HighWatermark()
	if first == 0 || first >= n {
		t.Fatalf("after the failure the partition holds %d records, want part of the import", first)
	}
	if slices.Contains(imported(coords), 0) {
		t.Fatal("a partition whose import failed was reported imported")
	}
	if err := cell.Replica(b, 0).Raft().LeadershipTransfer().Error(); err != nil {
		t.Fatalf("leadership transfer: %v", err)
	}
	nb := waitCoordinator(t, coords, movingTenant, g, b)
	waitImported(t, coords)
	if got := cell.Replica(nb, 0).HighWatermark(); got != n+1 {
		t.Fatalf("the partition holds %d records after the import, want %d offsets and a marker (the first batch was not written twice)", got, n)
	}
	setMoves(coords, moving(false, list))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	total := 0
	for i := range 5 {
		got, err := coords[nb].FetchOffsets(ctx, movingTenant, groupIn(0, i), nil)
		if err != nil {
			t.Fatal(err)
		}
		for tp, o := range got {
			if o.Offset != int64(tp.Partition) || o.Metadata != meta {
				t.Fatalf("imported offset %v: %+v", tp, o.Offset)
			}
		}
		total += len(got)
	}
	if total != n {
		t.Fatalf("%d offsets imported, want %d", total, n)
	}
}

// TestMoveImportsNothing: a state listing an empty import (a tenant
// without committed offsets on its source, as JSON carries it) is
// acknowledged for every partition without a write; one listing none
// (null) is not acknowledged at all.
func TestMoveImportsNothing(t *testing.T) {
	cell, coords := movingCell(t, nil)
	waitCoordinator(t, coords, movingTenant, groupIn(0, 0), -1)
	waitCoordinator(t, coords, movingTenant, groupIn(1, 0), -1)
	for _, tc := range []struct {
		name, json string
		want       []int
	}{
		{"null", `{"role":"destination","peer":"cell-a","hold_groups":true,"group_offsets":null}`, nil},
		{"empty", `{"role":"destination","peer":"cell-a","hold_groups":true,"group_offsets":[]}`, []int{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mv wire.TenantMove
			if err := json.Unmarshal([]byte(tc.json), &mv); err != nil {
				t.Fatal(err)
			}
			setMoves(coords, []wire.Tenant{{ID: movingTenant, Move: &mv}})
			settle(t, coords)
			if got := imported(coords); !slices.Equal(got, tc.want) {
				t.Fatalf("imported partitions %v, want %v", got, tc.want)
			}
		})
	}
	for p := range 2 {
		if hw := cell.Replica(cell.Leader(p), p).HighWatermark(); hw != 0 {
			t.Fatalf("offsets partition %d holds %d records", p, hw)
		}
	}
}
