package mirror_test

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/partition"
)

// TestMirrorEpochsAboveSource: a source whose leader changed several
// times (its epoch is well above a new group's term) is mirrored, fenced
// and promoted. The destination's leader epoch and the epochs of the
// batches it takes are above every epoch the source wrote or served; a
// destination leader change keeps them growing; OffsetForLeaderEpoch
// answers for the source's epochs and the destination's; a client that
// knows the source's epoch is not told it is ahead.
func TestMirrorEpochsAboveSource(t *testing.T) {
	m := newMove(t, celltest.Options{}, celltest.Options{}, 0)
	ctx := ctxLong(t)
	fill(t, m.src, 3, func(int) []byte { return celltest.Batch([]byte("first leader")) })
	for i := 0; i < 3; i++ {
		b := m.src.WaitLeader(0, waitLong)
		m.src.StopBroker(b)
		m.src.WaitLeader(0, waitLong)
		fill(t, m.src, 2, func(int) []byte { return celltest.Batch([]byte("next leader")) })
		m.src.StartBroker(b)
	}
	m.startPullers()
	src, end := fenceLeader(t, ctx, m.src)
	srcEpoch := src.LeaderEpoch()
	srcEpochs := src.Epochs()
	if last := srcEpochs[len(srcEpochs)-1].Epoch; last > srcEpoch || len(srcEpochs) < 2 {
		t.Fatalf("source epochs %+v, leader epoch %d", srcEpochs, srcEpoch)
	}
	dst := m.promote(end)
	m.sameLog()
	if got := dst.LeaderEpoch(); got <= srcEpoch || got != srcEpoch+int32(dst.Raft().CurrentTerm()) {
		t.Fatalf("destination leader epoch %d (term %d), want the source's %d + term", got, dst.Raft().CurrentTerm(), srcEpoch)
	}
	if _, err := dst.FetchEpoch(srcEpoch, 0, 1<<20); !errors.Is(err, partition.ErrFencedLeaderEpoch) {
		t.Fatalf("fetch at the source's epoch %d: %v, want ErrFencedLeaderEpoch (a stale epoch, not an unknown one)", srcEpoch, err)
	}
	off, err := m.dst.Produce(ctx, 0, celltest.Batch([]byte("after the move")))
	if err != nil || off != end {
		t.Fatalf("produce after the promotion: %d, %v; want offset %d", off, err, end)
	}
	first := dst.LeaderEpoch()
	if h, _, err := dst.Store().Log().ReadBatch(end, nil); err != nil || h.LeaderEpoch != first {
		t.Fatalf("batch after the promotion: epoch %d, %v; want %d", h.LeaderEpoch, err, first)
	}

	m.stopBroker(m.dst.WaitLeader(0, waitLong))
	m.dst.WaitLeader(0, waitLong)
	off, err = sendRetrying(ctx, m.dst, celltest.Batch([]byte("after a leader change")))
	if err != nil {
		t.Fatal(err)
	}
	dst = leaderOf(m.dst)
	second := dst.LeaderEpoch()
	if h, _, err := dst.Store().Log().ReadBatch(off, nil); err != nil || second <= first || h.LeaderEpoch != second {
		t.Fatalf("batch after a leader change: epoch %d, %v; want the new leader's %d, above %d", h.LeaderEpoch, err, second, first)
	}

	// OffsetForLeaderEpoch: each source epoch ends where the next one
	// starts, the last where the destination's first starts.
	for i, e := range srcEpochs {
		want := end
		if i+1 < len(srcEpochs) {
			want = srcEpochs[i+1].StartOffset
		}
		if ep, got, ok, err := dst.EpochEnd(e.Epoch); err != nil || !ok || ep != e.Epoch || got != want {
			t.Fatalf("EpochEnd(%d) = %d, %d, %v, %v; want %d, %d", e.Epoch, ep, got, ok, err, e.Epoch, want)
		}
	}
	if ep, got, ok, err := dst.EpochEnd(srcEpoch); err != nil || !ok || got != end || ep > srcEpoch {
		t.Fatalf("EpochEnd(source's epoch %d) = %d, %d, %v, %v; want it to end at %d", srcEpoch, ep, got, ok, err, end)
	}
	if ep, got, ok, err := dst.EpochEnd(first); err != nil || !ok || ep != first || got != off {
		t.Fatalf("EpochEnd(%d) = %d, %d, %v, %v; want %d, %d", first, ep, got, ok, err, first, off)
	}
	if ep, got, ok, err := dst.EpochEnd(second); err != nil || !ok || ep != second || got != dst.HighWatermark() {
		t.Fatalf("EpochEnd(%d) = %d, %d, %v, %v; want %d, the high watermark %d", second, ep, got, ok, err, second, dst.HighWatermark())
	}
}
