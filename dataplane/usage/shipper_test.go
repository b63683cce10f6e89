package usage

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dataplane/log"
)

// logSource is a usage partition reduced to its log: what the shipper
// reads, and the log start it moves (a replica does that through Raft).
type logSource struct{ l *log.Log }

func (s logSource) Fetch(offset int64, maxBytes int32) (log.Slice, int64, error) {
	sl, err := s.l.Read(offset, int(maxBytes), s.l.NextOffset())
	return sl, s.l.NextOffset(), err
}
func (s logSource) LogStartOffset() int64 { return s.l.LogStartOffset() }
func (s logSource) DeleteRecords(_ context.Context, offset int64) (int64, error) {
	if err := s.l.DeleteHead(offset); err != nil {
		return 0, err
	}
	return s.l.LogStartOffset(), nil
}

// ledger applies shipments at its position, as billing's does.
type ledger struct {
	mu      sync.Mutex
	pos     int64
	records int
}

func (g *ledger) Ship(_ context.Context, s Shipment) (int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s.From == g.pos && s.Next > g.pos {
		g.pos, g.records = s.Next, g.records+len(s.Records)
	}
	return g.pos, nil
}

func (g *ledger) position() (int64, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pos, g.records
}

// TestShipperTrimsShipped: once the ledger holds a usage partition's
// records, the shipper moves the partition's log start up to the
// ledger's position, so the partition keeps what is not yet billed, not
// its whole retention; it never moves it past what the ledger holds.
func TestShipperTrimsShipped(t *testing.T) {
	l, err := log.Open(context.Background(), log.Config{Dir: t.TempDir(), SegmentBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	const n = 200
	for i := range n {
		b, err := EncodeBatch(Record{Version: 1, Node: 1, Boot: "b", Seq: uint64(i + 1), At: time.Now().UnixMilli(),
			Entries: []Entry{{Tenant: "tn_a", Meter: "bytes_in", Hour: 0, Value: 10}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := l.Append(b, 1); err != nil {
			t.Fatal(err)
		}
	}
	g := &ledger{}
	sh, err := NewShipper(ShipperConfig{Led: func() map[int32]Source { return map[int32]Source{0: logSource{l}} },
		Sink: g, Interval: 10 * time.Millisecond, MaxBytes: 2 << 10, TrimEvery: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sh.Close() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		pos, recs := g.position()
		start := l.LogStartOffset()
		if start > pos {
			t.Fatalf("log start %d above the ledger's position %d: unbilled records deleted", start, pos)
		}
		if pos == n && recs == n && start == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: ledger at %d with %d records, log start %d; want %d, %d, %d", pos, recs, start, n, n, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if len(l.Segments()) > 2 {
		t.Fatalf("%d segments left after every record was billed and trimmed", len(l.Segments()))
	}
}
