package replicas_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sluicehq/sluice/contract/topicspec"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/partition"
	"github.com/sluicehq/sluice/dataplane/raftlog"
	"github.com/sluicehq/sluice/dataplane/replicas"
	"github.com/sluicehq/sluice/dataplane/transport"
)

// TestBehindLogStartReported: while a broker is down the leader deletes
// all but its last records, and the stored bytes the others report drop
// once retention removes the files; the broker comes back behind the log
// start, its manager counts the replica as behind and seeding (the
// broker's gauges, with bytes left to copy) and its status says so (the
// cell report), while the others' do not; once seeded, none is.
func TestBehindLogStartReported(t *testing.T) {
	const n = 3
	tns := make([]*transport.Node, n)
	var brokers []wire.Broker
	for i := range tns {
		id := replicas.ServerID(i + 1)
		tn, err := transport.New(transport.Config{ID: id, ListenAddr: "127.0.0.1:0", Credentials: celltest.PeerCredentials(t, id)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tn.Close() })
		tns[i] = tn
		brokers = append(brokers, wire.Broker{ID: string(rune('a' + i)), NodeID: i + 1, RaftAddr: string(tn.Addr())})
	}
	view := viewOf(t, wire.CellState{StateVersion: 1, Brokers: brokers, Topics: []wire.Topic{{ID: "tp_a", Name: "a",
		Config:     map[string]string{topicspec.SegmentBytes: "1048576"},
		Partitions: []wire.Partition{{Partition: 0, Replicas: []int{1, 2, 3}}}}}})
	dirs := make([]string, n)
	com := raftlog.NewCommitter(log.SyncFiles)
	t.Cleanup(com.Close)
	seedRate := int64(0)
	open := func(i int) *replicas.Manager {
		t.Helper()
		m, err := replicas.New(replicas.Config{NodeID: i + 1, DataDir: dirs[i], Transport: tns[i], Committer: com, Raft: celltest.TestRaftConfig, SeedRate: seedRate})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Apply(context.Background(), view); err != nil {
			t.Fatal(err)
		}
		return m
	}
	ms := make([]*replicas.Manager, n)
	for i := range ms {
		dirs[i] = filepath.Join(t.TempDir(), "replicas")
		ms[i] = open(i)
		m := &ms[i]
		t.Cleanup(func() {
			if *m != nil {
				_ = (*m).Close()
			}
		})
	}
	leader := func() (int, *partition.Replica) {
		for i, m := range ms {
			if m == nil {
				continue
			}
			if r, ok := m.Get("tp_a", 0); ok && r.IsLeader() {
				return i, r
			}
		}
		return -1, nil
	}
	celltest.WaitFor(t, wait, "a leader", func() bool { i, _ := leader(); return i >= 0 })
	produce := func(k int) {
		t.Helper()
		for range k {
			// A leader change on the loaded machine is no failure here:
			// the batch is sent again to the next leader (a duplicate only
			// adds bytes, which the test does not count exactly).
			celltest.WaitFor(t, wait, "a batch produced", func() bool {
				_, r := leader()
				if r == nil {
					return false
				}
				ctx, cancel := context.WithTimeout(context.Background(), wait)
				defer cancel()
				_, err := r.Produce(ctx, celltest.Batch(bytes.Repeat([]byte("x"), 64<<10)))
				if errors.Is(err, partition.ErrNotLeader) {
					return false
				}
				if err != nil {
					t.Fatalf("produce: %v", err)
				}
				return true
			})
		}
	}
	produce(2)
	li, _ := leader()
	down := (li + 1) % n
	celltest.WaitFor(t, wait, "the follower to apply", func() bool {
		r, _ := ms[down].Get("tp_a", 0)
		_, l := leader()
		return l != nil && r.HighWatermark() == l.HighWatermark()
	})
	if err := ms[down].Close(); err != nil {
		t.Fatal(err)
	}
	ms[down] = nil
	produce(40) // 2.5 MiB: closed segments the leader can delete
	li, l := leader()
	size := func(m *replicas.Manager) int64 {
		st := m.Status()
		if len(st) != 1 {
			t.Fatalf("status: %+v", st)
		}
		return st[0].SizeBytes
	}
	before := size(ms[li])
	if before < 2<<20 {
		t.Fatalf("the leader stores %d bytes after 2.6 MiB of batches", before)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	celltest.WaitFor(t, wait, "records deleted", func() bool {
		li, l = leader()
		if l == nil {
			return false
		}
		_, err := l.DeleteRecords(ctx, l.HighWatermark()-3)
		if errors.Is(err, partition.ErrNotLeader) {
			return false
		}
		if err != nil {
			t.Fatalf("delete records: %v", err)
		}
		return true
	})
	// The stored bytes the brokers report (the cell report, the tenant's
	// storage quota) drop once the deleted segments' files go.
	celltest.WaitFor(t, wait, "the stored bytes to drop after retention deletes segments", func() bool {
		for _, m := range ms {
			if m != nil {
				m.RetentionPass(ctx)
			}
		}
		for _, m := range ms {
			if m != nil && size(m) >= before/2 {
				return false
			}
		}
		return true
	})
	for i, m := range ms {
		if m != nil && m.BehindLogStart() != 0 {
			t.Fatalf("broker %d counts %d replicas behind the log start", i+1, m.BehindLogStart())
		}
	}
	seedRate = 128 << 10 // the ~200 KiB and more left take a while to copy
	ms[down] = open(down)
	celltest.WaitFor(t, wait, "the restarted broker to count its replica behind the log start and seeding", func() bool {
		return ms[down].BehindLogStart() == 1 && ms[down].Seeding() == 1 && ms[down].SeedBytesRemaining() > 0
	})
	m := ms[down]
	if g := testutil.ToFloat64(replicas.NewBehindLogStartGauge(func() *replicas.Manager { return m })); g != 1 {
		t.Fatalf("sluice_replicas_behind_log_start is %v on the broker behind, want 1", g)
	}
	seedMetrics := replicas.NewSeedMetrics(func() *replicas.Manager { return m })
	if g := testutil.ToFloat64(seedMetrics[0]); g != 1 {
		t.Fatalf("sluice_replicas_seeding is %v on the broker seeding, want 1", g)
	}
	if g := testutil.ToFloat64(seedMetrics[1]); g <= 0 {
		t.Fatalf("sluice_seed_bytes_remaining is %v while seeding", g)
	}
	if g := testutil.ToFloat64(replicas.NewBehindLogStartGauge(func() *replicas.Manager { return nil })); g != 0 {
		t.Fatalf("sluice_replicas_behind_log_start is %v without replicas, want 0", g)
	}
	st := ms[down].Status()
	if len(st) != 1 || !st[0].BehindLogStart {
		t.Fatalf("status of the broker behind the log start: %+v", st)
	}
	for i, m := range ms {
		if i != down {
			g := testutil.ToFloat64(replicas.NewBehindLogStartGauge(func() *replicas.Manager { return m }))
			if st := m.Status(); len(st) != 1 || st[0].BehindLogStart || g != 0 || m.Seeding() != 0 {
				t.Fatalf("broker %d: status %+v, gauge %v", i+1, st, g)
			}
		}
	}
	celltest.WaitFor(t, wait, "the replica to be seeded", func() bool {
		return m.BehindLogStart() == 0 && m.Seeding() == 0
	})
	if st := m.Status(); len(st) != 1 || st[0].BehindLogStart || st[0].HighWatermark != l.HighWatermark() {
		t.Fatalf("status of the seeded broker: %+v, leader's high watermark %d", st, l.HighWatermark())
	}
	if g, r := testutil.ToFloat64(seedMetrics[2]), testutil.ToFloat64(seedMetrics[1]); g < 128<<10 || r != 0 {
		t.Fatalf("after the seed sluice_seed_bytes_total is %v and sluice_seed_bytes_remaining %v", g, r)
	}
	if g := testutil.ToFloat64(replicas.NewSeedMetrics(func() *replicas.Manager { return nil })[0]); g != 0 {
		t.Fatalf("sluice_replicas_seeding is %v without replicas, want 0", g)
	}
}
