package launch_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/cmd/internal/launch"
	"github.com/sluicehq/sluice/contract/api"
)

// moveCell starts a cell of six broker processes (extra flags for each)
// with a one-partition topic on brokers 1, 2 and 3 (the cell's first
// partition, so the first three node ids), and returns its id.
func moveCell(t *testing.T, ctx context.Context, name, topic string, args ...string) (*procCell, string) {
	t.Helper()
	c := startProcCellWith(t, name, 6, func(b *launch.Broker) { b.Args = append(b.Args, args...) })
	c.createTopic(ctx, topic, 1)
	tp, err := c.tenant.Client.Topic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if r := slices.Sorted(slices.Values(tp.Assignments[0].Replicas)); !slices.Equal(r, []int{1, 2, 3}) {
		t.Fatalf("the topic's partition is on %v, not 1, 2, 3", tp.Assignments[0].Replicas)
	}
	return c, c.topicID(ctx, topic)
}

// TestMoveReplicasOneTwoThreeToFourFiveSix moves a partition of a cell of
// six real broker processes from brokers 1, 2, 3 to 4, 5, 6 through
// /v1/admin/moves while a franz-go idempotent producer and a consumer
// group run: the move completes, the history holds (nothing acknowledged
// lost or doubled, dense offsets, high watermark monotonic, the group's
// polls in order) and brokers 1, 2 and 3 end with no data of the
// partition.
func TestMoveReplicasOneTwoThreeToFourFiveSix(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and six brokers")
	}
	const topic = "moved"
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c, topicID := moveCell(t, ctx, "move", topic)
	tr := c.startTraffic(ctx, topic, "move-group", 3*time.Minute)
	waitAcks(ctx, t, tr.chk, 200)
	tr.waitGroupRead(ctx, t, 0, "before the move")

	started := time.Now()
	mv, err := c.cp.Operator.AdminCreateMove(ctx, api.CreateMoveRequest{TopicID: topicID, Partition: 0, Replicas: []int{4, 5, 6}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.waitMove(ctx, mv.ID, "completed", 4*time.Minute); err != nil {
		t.Fatal(err)
	}
	finished := time.Now()
	read := tr.chk.Result().GroupRecords
	waitAcks(ctx, t, tr.chk, tr.chk.Result().Acks+100) // the producer goes on after the move
	tr.waitGroupRead(ctx, t, read, "after the move")
	tr.halt()
	for i := range 3 {
		if err := c.waitNoReplica(ctx, i, topicID); err != nil {
			t.Error(err)
		}
	}
	tp, err := c.tenant.Client.Topic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if r := tp.Assignments[0].Replicas; !slices.Equal(r, []int{4, 5, 6}) {
		t.Errorf("after the move the partition lists replicas %v, want 4, 5, 6", r)
	}
	res := tr.check(ctx, t, c, topic, 1)
	t.Logf("move %d completed in %v (from the request to the control plane showing it completed); %d acknowledged, %d polled by the group; longest wait for an acknowledgement during the move %v (one producer, one record at a time)",
		mv.ID, finished.Sub(started).Round(10*time.Millisecond), res.Acks, res.GroupRecords, tr.longestGap(started, finished).Round(time.Millisecond))
}

// TestMoveSurvivesLeaderAndControlPlaneKill moves a partition from brokers
// 1, 2, 3 to 4, 5, 6 under a producer and a group, SIGKILLs the
// partition's leader once the first joining replica is a non-voter, then
// SIGKILLs the control plane, starts both again: the move completes, the
// killed broker ends with no data of the partition, and the history holds.
// The brokers seed new replicas at 256 KiB/s and the partition holds a few
// MiB before the move, so the move is still under way when the leader is
// killed.
func TestMoveSurvivesLeaderAndControlPlaneKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and six brokers")
	}
	const topic = "interrupted"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, topicID := moveCell(t, ctx, "movekill", topic, "-seed-rate", "262144")

	// A few MiB first, so that seeding a joiner takes several seconds.
	// Uncompressed, so that the seed is as large as the records.
	bulk := c.kgo(kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	// Unique values: the group and the final read check them too.
	pad := strings.Repeat("x", 1024)
	for j := range 3 {
		rs := make([]*kgo.Record, 1000)
		for i := range rs {
			rs[i] = &kgo.Record{Value: fmt.Appendf(nil, "bulk%07d%s", j*len(rs)+i, pad)}
		}
		if err := bulk.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	bulk.Close()
	// Deleting the first record moves the log start past 0, so a joiner
	// is behind it and is seeded from segments, at the seed rate; with
	// the whole log still in Raft it would catch up by AppendEntries in
	// a moment, and the move could finish before the test finds a
	// source broker leading.
	adm := kadm.NewClient(c.kgo())
	var trim kadm.Offsets
	trim.Add(kadm.Offset{Topic: topic, Partition: 0, At: 1})
	if rs, err := adm.DeleteRecords(ctx, trim); err != nil || rs.Error() != nil {
		t.Fatalf("delete the first record: %v, %v", err, rs.Error())
	}
	tr := c.startTraffic(ctx, topic, "movekill-group", 3*time.Minute)
	tr.chk.MayTrim(0, 1) // the deleted first record
	waitAcks(ctx, t, tr.chk, 200)
	tr.waitGroupRead(ctx, t, 0, "before the move")

	started := time.Now()
	mv, err := c.cp.Operator.AdminCreateMove(ctx, api.CreateMoveRequest{TopicID: topicID, Partition: 0, Replicas: []int{4, 5, 6}})
	if err != nil {
		t.Fatal(err)
	}
	var at api.Move
	if err := launch.WaitFor(ctx, "a joining replica is a non-voter", 3*time.Minute, func() error {
		var err error
		if at, err = c.cp.Operator.AdminMove(ctx, mv.ID); err != nil {
			return err
		}
		if at.State != "running" || len(at.Nonvoters) == 0 {
			return fmt.Errorf("move %d is %s: voters %v, non-voters %v", at.ID, at.State, at.Voters, at.Nonvoters)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	leader := partitionLeader(ctx, t, c, topic)
	if leader < 1 || leader > 3 {
		t.Fatalf("the partition's leader is node %d, not a source broker (voters %v, non-voters %v)", leader, at.Voters, at.Nonvoters)
	}
	t.Logf("voters %v, non-voters %v: SIGKILL leader b%d, then the control plane", at.Voters, at.Nonvoters, leader)
	c.procs[leader-1].Kill()
	c.cp.Proc.Kill()
	c.startBroker(leader - 1)
	c.startControlPlane()

	if err := c.waitMove(ctx, mv.ID, "completed", 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	finished := time.Now()
	read := tr.chk.Result().GroupRecords
	waitAcks(ctx, t, tr.chk, tr.chk.Result().Acks+100)
	tr.waitGroupRead(ctx, t, read, "after the move")
	tr.halt()
	for i := range 3 {
		if err := c.waitNoReplica(ctx, i, topicID); err != nil {
			t.Error(err)
		}
	}
	res := tr.check(ctx, t, c, topic, 1)
	t.Logf("move %d completed %v after its request; %d acknowledged, %d polled by the group; longest wait for an acknowledgement %v",
		mv.ID, finished.Sub(started).Round(10*time.Millisecond), res.Acks, res.GroupRecords, tr.longestGap(started, finished).Round(time.Millisecond))
}

// partitionLeader is the leader of the topic's partition 0 that the
// brokers' Metadata names, once one does.
func partitionLeader(ctx context.Context, t *testing.T, c *procCell, topic string) int {
	t.Helper()
	adm := kadm.NewClient(c.kgo())
	leader := -1
	if err := launch.WaitFor(ctx, "a leader named in Metadata", time.Minute, func() error {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return err
		}
		p, ok := md.Topics[topic].Partitions[0]
		if !ok || p.Leader < 0 {
			return fmt.Errorf("no leader for %s/0: %+v", topic, md.Topics[topic])
		}
		leader = int(p.Leader)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return leader
}
