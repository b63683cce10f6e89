package localpart_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/kafka"
	"github.com/sluicehq/sluice/dataplane/kafka/localpart"
	"github.com/sluicehq/sluice/dataplane/log"
)

func syncer(t *testing.T) *cellview.Syncer {
	t.Helper()
	s, err := cellview.New(cellview.Config{Cell: "c1", CacheFile: filepath.Join(t.TempDir(), "state.json")})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Apply(wire.CellState{Version: wire.Version, Cell: "c1", StateVersion: 1,
		Topics: []wire.Topic{{ID: "t1", TenantID: "tn", Name: "orders", Partitions: []wire.Partition{{Partition: 0, Replicas: []int{1}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestProduceFetchReopen: offsets are dense from 0, the high watermark is
// the durable end, a watcher wakes on commit, and everything acknowledged
// is there after a reopen.
func TestProduceFetchReopen(t *testing.T) {
	dir := t.TempDir()
	st := syncer(t)
	s, err := localpart.New(localpart.Config{Dir: dir, NodeID: 3, State: st})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Get("t1", 1); ok {
		t.Fatal("a partition the state does not have was opened")
	}
	if _, ok := s.Get("nope", 0); ok {
		t.Fatal("a topic the state does not have was opened")
	}
	p, ok := s.Get("t1", 0)
	if !ok {
		t.Fatal("partition missing")
	}
	if node, ok := p.Leader(); !ok || node != 3 {
		t.Fatalf("leader %d %v", node, ok)
	}
	wake := make(chan struct{}, 1)
	cancel := p.Watch(0, wake)
	defer cancel()
	for i := range 3 {
		base, err := p.Produce(context.Background(), celltest.Batch([]byte("a"), []byte("b")))
		if err != nil || base != int64(2*i) {
			t.Fatalf("produce %d: base %d err %v", i, base, err)
		}
	}
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("watcher not woken by a commit")
	}
	if hw := p.HighWatermark(); hw != 6 {
		t.Fatalf("hw %d", hw)
	}
	sl, hw, err := p.Fetch(2, 1)
	if err != nil || hw != 6 || sl.BaseOffset != 2 || sl.NextOffset != 4 {
		t.Fatalf("fetch: %+v hw %d err %v", sl, hw, err)
	}
	sl.Release()
	if sl, _, err := p.Fetch(6, 1<<20); err != nil || sl.Size != 0 {
		t.Fatalf("fetch at hw: %+v %v", sl, err)
	}
	if _, _, err := p.Fetch(7, 1<<20); err == nil {
		t.Fatal("fetch past the end succeeded")
	} else if !isOutOfRange(err) {
		t.Fatalf("fetch past the end: %v", err)
	}
	var _ kafka.Partitions = s
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}

	s2, err := localpart.New(localpart.Config{Dir: dir, NodeID: 3, State: st})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	p2, ok := s2.Get("t1", 0)
	if !ok || p2.HighWatermark() != 6 {
		t.Fatalf("reopened: ok %v", ok)
	}
}

func isOutOfRange(err error) bool { return errors.Is(err, log.ErrOffsetOutOfRange) }
