package replicas_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/partition"
)

const (
	mvTopic  = "tp_mirror"
	mvTenant = "ten_mirror"
	waitMove = 60 * time.Second
	mvPID    = 4242
)

// move is a tenant's move from cell-a to cell-b, each cell of three
// brokers with its own CA, driven only by the states the test publishes
// as the control plane does (contract/wire/tenantmove.go).
type move struct {
	t        *testing.T
	src, dst *cellOf
	seq      int32 // the idempotent producer's next sequence
	lastBase int64 // where its last acknowledged batch went
}

func newMove(t *testing.T) *move {
	x := &move{t: t, src: newCellOf(t, "cell-a", 3), dst: newCellOf(t, "cell-b", 3)}
	x.src.publish(x.srcState(false, true))
	celltest.WaitFor(t, waitMove, "a source leader", func() bool { return x.src.leader() != nil })
	return x
}

func mvTopicOf() wire.Topic {
	return wire.Topic{ID: mvTopic, TenantID: mvTenant, Name: "orders", Partitions: []wire.Partition{{Partition: 0, Replicas: []int{1, 2, 3}}}}
}

// srcState is the source cell's state: the tenant's topic, fenced or not,
// granted to cell-b or not.
func (x *move) srcState(fenced, grant bool) wire.CellState {
	t := mvTopicOf()
	t.Fenced = fenced
	st := wire.CellState{Tenants: []wire.Tenant{{ID: mvTenant, Name: "ten", Status: "active"}}, Topics: []wire.Topic{t}}
	if grant {
		st.MirrorGrants = wire.MirrorGrants{{Cell: "cell-b", TenantID: mvTenant, Topics: []string{mvTopic}, PeerCA: string(x.dst.ca.CertPEM())}}
	}
	return st
}

// dstState is the destination cell's state: the topic, a mirror of the
// source's when m is set.
func (x *move) dstState(m *wire.TopicMirror) wire.CellState {
	t := mvTopicOf()
	t.Mirror = m
	return wire.CellState{Tenants: []wire.Tenant{{ID: mvTenant, Name: "ten", Status: "active"}}, Topics: []wire.Topic{t}}
}

func (x *move) mirrorOf(promote bool) *wire.TopicMirror {
	return &wire.TopicMirror{SourceCell: "cell-a", SourceBrokers: x.src.mirrorBrokers(), SourcePeerCA: string(x.src.ca.CertPEM()), Promote: promote}
}

// produce sends the idempotent producer's next batch of two records to c,
// again while a lost leader left its outcome unknown, as an idempotent
// client does (a batch that got in is answered as a duplicate).
func (x *move) produce(ctx context.Context, c *cellOf) error {
	vals := [][]byte{fmt.Appendf(nil, "s%d", x.seq), fmt.Appendf(nil, "s%d", x.seq+1)}
	var base int64
	var err error
	for {
		base, err = c.Produce(ctx, 0, celltest.IdempotentBatch(mvPID, 0, x.seq, vals...))
		var nl *partition.NotLeaderError
		if err == nil || !errors.As(err, &nl) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return err
	}
	x.lastBase, x.seq = base, x.seq+2
	return nil
}

func (x *move) produceN(ctx context.Context, c *cellOf, n int) {
	x.t.Helper()
	for range n {
		if err := x.produce(ctx, c); err != nil {
			x.t.Fatalf("produce to %s: %v", c.name, err)
		}
	}
}

// mirrored waits until every running destination replica holds hw.
func (x *move) mirrored(hw int64) {
	x.t.Helper()
	celltest.WaitFor(x.t, waitMove, fmt.Sprintf("every destination replica to hold %d", hw), func() bool {
		for b := range 3 {
			if r := x.dst.Replica(b, 0); r == nil || r.HighWatermark() < hw {
				return false
			}
		}
		return true
	})
}

// lead is c's serving leader, once there is one.
func (x *move) lead(c *cellOf) *partition.Replica {
	x.t.Helper()
	var r *partition.Replica
	celltest.WaitFor(x.t, waitMove, "a leader of "+c.name, func() bool {
		r = c.leader()
		return r != nil
	})
	return r
}

// srcHW is the source leader's high watermark, once there is one.
func (x *move) srcHW() int64 {
	x.t.Helper()
	return x.lead(x.src).HighWatermark()
}

func moveCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitMove)
	t.Cleanup(cancel)
	return ctx
}

// TestTenantMoveDrivenByCellState walks the contract's steps 1 to 4 with
// only cell states: the destination mirrors the source over the source
// brokers' transport while an idempotent producer writes to the source,
// a destination broker restarted midway resumes; the source's state
// fences it, the destination's promotes, the source drops the topic and
// the destination's drops the mirror. The destination's log is the
// source's byte for byte below the fenced end, the producer goes on
// there (next sequence taken, a retry a duplicate), and every step shows
// in the leaders' reports and the applied state version.
func TestTenantMoveDrivenByCellState(t *testing.T) {
	x := newMove(t)
	ctx := moveCtx(t)
	x.produceN(ctx, x.src, 20)

	// Step 1: mirror.
	v := x.dst.publish(x.dstState(x.mirrorOf(false)))
	for n := 1; n <= 3; n++ {
		if got := x.dst.manager(n).AppliedVersion(); got != v {
			t.Fatalf("destination node %d applied state %d, want %d", n, got, v)
		}
	}
	x.dst.waitStatus("the destination leader to report mirroring", func(s *wire.MirrorStatus) bool {
		return s != nil && s.Mirroring && !s.Promoted && !s.Fenced
	})
	x.mirrored(40)
	if _, err := x.lead(x.dst).Produce(ctx, celltest.Batch([]byte("early"))); !errors.Is(err, partition.ErrMirroring) {
		t.Fatalf("produce to the destination while mirroring: %v, want ErrMirroring", err)
	}
	if st, _ := x.src.mirrorStatus(); st != nil {
		t.Fatalf("the unfenced source reports %+v", st)
	}

	// A destination broker restarted mid-mirror resumes: it opens in
	// mirror mode again and catches up with what was written meanwhile.
	restarted := x.dst.Leader(0) + 1
	x.dst.stop(restarted)
	x.produceN(ctx, x.src, 20)
	x.dst.start(restarted)
	if r := x.dst.Replica(restarted-1, 0); r == nil || !r.Mirroring() {
		t.Fatalf("restarted destination node %d: replica %v, not mirroring", restarted, r)
	}
	x.produceN(ctx, x.src, 10)
	hw := x.srcHW()
	x.mirrored(hw)
	caught := x.dst.waitStatus("lag 0", func(s *wire.MirrorStatus) bool { return s != nil && s.Mirroring && s.Lag != nil && *s.Lag == 0 })
	if st := caught; st.BytesPerSec != 0 {
		t.Fatalf("a mirror without a rate on brokers without a default reports %+v, want unlimited (0)", st)
	}

	// A copy rate in the state reaches the puller, which starts over at
	// it and keeps mirroring.
	rated := x.mirrorOf(false)
	rated.BytesPerSec = 4 << 20
	x.dst.publish(x.dstState(rated))
	x.dst.waitStatus("the puller at the state's rate", func(s *wire.MirrorStatus) bool {
		return s != nil && s.Mirroring && s.BytesPerSec == 4<<20
	})
	x.produceN(ctx, x.src, 5)
	x.mirrored(x.srcHW())

	// Step 2: fence.
	fenceAt := time.Now()
	x.src.publish(x.srcState(true, true))
	st := x.src.waitStatus("the source leader to report its fence", func(s *wire.MirrorStatus) bool { return s != nil && s.Fenced })
	t.Logf("fence: reported %v after its state", time.Since(fenceAt))
	end := st.FencedEnd
	if end != x.lastBase+2 {
		t.Fatalf("fenced end %d, want after the producer's last batch at %d", end, x.lastBase)
	}
	if err := x.produce(ctx, x.src); !errors.Is(err, partition.ErrFenced) {
		t.Fatalf("produce to the fenced source: %v, want ErrFenced", err)
	}
	// A new source leader finds the fence applied and keeps it.
	old := x.src.Leader(0) + 1
	x.src.stop(old)
	celltest.WaitFor(t, waitMove, "a new source leader", func() bool { return x.src.leader() != nil })
	if e, ok := x.lead(x.src).Fenced(); !ok || e != end {
		t.Fatalf("new source leader: fenced %v at %d, want at %d", ok, e, end)
	}
	x.src.start(old)

	// Step 3: promote.
	promoteAt := time.Now()
	x.dst.publish(x.dstState(x.mirrorOf(true)))
	x.dst.waitStatus("the destination leader to report its promotion", func(s *wire.MirrorStatus) bool { return s != nil && s.Promoted })
	t.Logf("promotion: reported %v after its state", time.Since(promoteAt))
	var dst, src *partition.Replica
	celltest.WaitFor(t, waitMove, "leaders of both cells", func() bool {
		dst, src = x.dst.leader(), x.src.leader()
		return dst != nil && src != nil
	})
	if dst.HighWatermark() != end {
		t.Fatalf("after the promotion: destination %v, source %v, want both; destination at %d", dst, src, end)
	}
	sameBelow(t, src, dst, end)

	// Step 4: switch. The source drops the tenant's topic and its grant;
	// the destination serves it as any other.
	x.src.publish(wire.CellState{})
	v = x.dst.publish(x.dstState(nil))
	celltest.WaitFor(t, waitMove, "the source replicas to be deleted", func() bool {
		return !x.src.hasDir(1) && !x.src.hasDir(2) && !x.src.hasDir(3)
	})
	x.dst.waitStatus("no mirror status after the switch", func(s *wire.MirrorStatus) bool { return s == nil })
	for n := 1; n <= 3; n++ {
		if got := x.dst.manager(n).AppliedVersion(); got != v {
			t.Fatalf("destination node %d applied state %d, want %d", n, got, v)
		}
	}
	retry, retrySeq := x.lastBase, x.seq-2
	if err := x.produce(ctx, x.dst); err != nil || x.lastBase != end {
		t.Fatalf("the producer's next batch on the destination: at %d, %v; want at %d", x.lastBase, err, end)
	}
	dup := celltest.IdempotentBatch(mvPID, 0, retrySeq, fmt.Appendf(nil, "s%d", retrySeq), fmt.Appendf(nil, "s%d", retrySeq+1))
	if base, err := x.dst.Produce(ctx, 0, dup); err != nil || base != retry {
		t.Fatalf("retry of the batch at %d: %d, %v; want the duplicate's offset", retry, base, err)
	}
	if hw := x.lead(x.dst).HighWatermark(); hw != end+2 {
		t.Fatalf("destination high watermark %d, want %d", hw, end+2)
	}
	// Followers apply the promotion in their own time.
	celltest.WaitFor(t, waitMove, "every destination replica promoted", func() bool {
		for n := 1; n <= 3; n++ {
			if r := x.dst.Replica(n-1, 0); r == nil || r.Mirroring() {
				return false
			}
		}
		return true
	})
	celltest.WaitFor(t, waitMove, "the mirror markers to go", func() bool {
		for n := 1; n <= 3; n++ {
			if _, err := os.Stat(filepath.Join(x.dst.dirs[n-1], mvTopic, "0", "mirror.destination")); err == nil {
				return false
			}
		}
		return true
	})
}

// TestTenantMoveCancelled: a move fenced and then rolled back before any
// promotion: the source's state unfences (produce is taken there again)
// and the destination's drops the mirror, so the destination replicas
// are deleted, and stay deleted while the state lists the topic without
// a mirror; a new mirror of the topic starts over from the source.
func TestTenantMoveCancelled(t *testing.T) {
	x := newMove(t)
	ctx := moveCtx(t)
	x.produceN(ctx, x.src, 10)
	x.dst.publish(x.dstState(x.mirrorOf(false)))
	x.mirrored(20)
	x.src.publish(x.srcState(true, true))
	x.src.waitStatus("the source's fence", func(s *wire.MirrorStatus) bool { return s != nil && s.Fenced })

	// Rollback: both states at once, as the control plane publishes them.
	x.src.publish(x.srcState(false, false))
	x.dst.publish(x.dstState(nil))
	x.src.waitStatus("the source to be unfenced", func(s *wire.MirrorStatus) bool { return s == nil })
	x.produceN(ctx, x.src, 1)
	celltest.WaitFor(t, waitMove, "the destination replicas and their data to go", func() bool {
		for n := 1; n <= 3; n++ {
			if x.dst.Replica(n-1, 0) != nil || x.dst.hasDir(n) {
				return false
			}
		}
		return true
	})
	// The same state again, and a restarted broker: nothing reopens.
	x.dst.publish(x.dstState(nil))
	x.dst.stop(1)
	x.dst.start(1)
	for n := 1; n <= 3; n++ {
		if x.dst.Replica(n-1, 0) != nil || x.dst.hasDir(n) {
			t.Fatalf("destination node %d reopened the cancelled replica", n)
		}
	}

	// A new move of the topic starts over and mirrors everything.
	x.src.publish(x.srcState(false, true))
	x.dst.publish(x.dstState(x.mirrorOf(false)))
	x.mirrored(x.srcHW())
	x.dst.waitStatus("the new mirror", func(s *wire.MirrorStatus) bool { return s != nil && s.Mirroring && s.Lag != nil && *s.Lag == 0 })
}

// TestTopicMirrorRefused: a mirror the broker cannot follow as the state
// says (a negative rate, this cell as its source) opens no puller and its
// leader reports why.
func TestTopicMirrorRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*wire.TopicMirror)
	}{
		{"negative rate", func(m *wire.TopicMirror) { m.BytesPerSec = -1 }},
		{"own cell", func(m *wire.TopicMirror) { m.SourceCell = "cell-b" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newMove(t)
			m := x.mirrorOf(false)
			tc.mod(m)
			x.dst.publish(x.dstState(m))
			st := x.dst.waitStatus("the refusal", func(s *wire.MirrorStatus) bool { return s != nil && s.Error != "" })
			if !st.Mirroring || st.Lag != nil { // it never read the source: no lag to tell
				t.Fatalf("status %+v", st)
			}
			if hw := x.lead(x.dst).HighWatermark(); hw != 0 {
				t.Fatalf("the refused mirror copied up to %d", hw)
			}
		})
	}
}
