package billing_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/billing"
	"github.com/sluicehq/sluice/controlplane/pgtest"
)

func newLedger(t *testing.T) *billing.Ledger {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pgtest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &billing.Ledger{DB: pool}
}

var hour0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// encode is r as a broker writes it into a usage partition.
func encode(t *testing.T, r billing.Record) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func rec(t *testing.T, node int, boot string, seq int64, entries ...billing.Entry) json.RawMessage {
	t.Helper()
	return encode(t, billing.Record{Version: 1, Node: node, Boot: boot, Seq: seq, Entries: entries})
}

func e(tenant, topic, meter string, hour time.Time, v int64) billing.Entry {
	return billing.Entry{Tenant: tenant, Topic: topic, Meter: meter, Hour: hour.Unix(), Value: v}
}

// TestShipExactlyOnce: a shipment applies only at the position, a
// replayed shipment or a record of a source already applied adds nothing,
// and a bad record is rejected without stopping the others.
func TestShipExactlyOnce(t *testing.T) {
	l := newLedger(t)
	ctx := context.Background()
	r1 := rec(t, 1, "b1", 1, e("t1", "tp", "bytes_in", hour0, 100), e("t1", "tp", "messages_in", hour0, 2))
	r2 := rec(t, 1, "b1", 2, e("t1", "tp", "bytes_in", hour0.Add(time.Hour), 50))
	r2again := r2 // the flusher's retry: same source, another offset
	bad := json.RawMessage(`{"v":1,"node":1,"boot":"b1","seq":3,"entries":[{"tenant":"t1","meter":"nope","hour":0,"value":1}]}`)
	r3 := rec(t, 2, "b9", 1, e("t2", "", "bytes_out", hour0, 7))

	steps := []struct {
		name    string
		s       billing.Shipment
		applied bool
		pos     int64
		dups    int
		rej     int
	}{
		{"ask", billing.Shipment{From: -1}, false, 0, 0, 0},
		{"first", billing.Shipment{From: 0, Next: 2, Records: []json.RawMessage{r1, r2}}, true, 2, 0, 0},
		{"replay of the first", billing.Shipment{From: 0, Next: 2, Records: []json.RawMessage{r1, r2}}, false, 2, 0, 0},
		{"ahead of the position", billing.Shipment{From: 5, Next: 6, Records: []json.RawMessage{r3}}, false, 2, 0, 0},
		{"retried flush, bad record, another source", billing.Shipment{From: 2, Next: 5, Records: []json.RawMessage{r2again, bad, r3}}, true, 5, 1, 1},
	}
	for _, st := range steps {
		st.s.Cell, st.s.Partition = "c1", 1
		got, err := l.Ship(ctx, st.s)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got.Applied != st.applied || got.Position != st.pos || got.Duplicates != st.dups || got.Rejected != st.rej {
			t.Fatalf("%s: %+v, want applied %v position %d duplicates %d rejected %d", st.name, got, st.applied, st.pos, st.dups, st.rej)
		}
	}
	tot, err := l.Totals(ctx, "t1", hour0.Add(-24*time.Hour), hour0.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if tot["bytes_in"] != 150 || tot["messages_in"] != 2 || len(tot) != 2 {
		t.Fatalf("t1 totals %v, want bytes_in 150 messages_in 2", tot)
	}
	rows, err := l.Usage(ctx, billing.Query{Tenant: "t1", From: hour0, To: hour0.Add(2 * time.Hour), Meters: []string{"bytes_in"}, ByTopic: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Value != 100 || !rows[0].Start.Equal(hour0) || rows[1].Value != 50 || rows[0].TopicID != "tp" {
		t.Fatalf("hourly rows %+v", rows)
	}
	// Tenant-scoped: t1's query never returns t2's rows.
	for _, r := range rows {
		if r.Tenant != "t1" {
			t.Fatalf("row of %s in t1's usage", r.Tenant)
		}
	}
}

// TestShipConcurrentShippers: two shippers of one partition (an old
// leader and a new one) racing with the same ranges apply each once.
func TestShipConcurrentShippers(t *testing.T) {
	l := newLedger(t)
	ctx := context.Background()
	const n = 40
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pos := int64(0)
			for pos < n {
				r := rec(t, 1, "b", pos+1, e("t1", "tp", "messages_in", hour0, 1))
				res, err := l.Ship(ctx, billing.Shipment{Cell: "c1", Partition: 3, From: pos, Next: pos + 1, Records: []json.RawMessage{r}})
				if err != nil {
					t.Error(fmt.Errorf("shipper %d: %w", w, err))
					return
				}
				pos = res.Position
			}
		}()
	}
	wg.Wait()
	tot, err := l.Totals(ctx, "t1", hour0, hour0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if tot["messages_in"] != n {
		t.Fatalf("messages_in %d, want %d", tot["messages_in"], n)
	}
}

// TestShipPartitionsShareLedgerRows: the usage partitions of a cell ship
// at once, each adding to the same ledger rows (every tenant's hour); no
// shipment fails on a deadlock between them and every value is counted.
func TestShipPartitionsShareLedgerRows(t *testing.T) {
	l := newLedger(t)
	ctx := context.Background()
	const parts, ships, tenants = 6, 15, 40
	var wg sync.WaitGroup
	for p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range int64(ships) {
				var es []billing.Entry
				for tn := range tenants {
					es = append(es, e(fmt.Sprintf("t%02d", tn), "tp", "messages_in", hour0, 1), e(fmt.Sprintf("t%02d", tn), "tp", "bytes_in", hour0, 10))
				}
				r := rec(t, p+1, "b", i+1, es...)
				res, err := l.Ship(ctx, billing.Shipment{Cell: "c1", Partition: int32(p), From: i, Next: i + 1, Records: []json.RawMessage{r}})
				if err != nil {
					t.Errorf("partition %d shipment %d: %v", p, i, err)
					return
				}
				if !res.Applied {
					t.Errorf("partition %d shipment %d not applied (position %d)", p, i, res.Position)
					return
				}
			}
		}()
	}
	wg.Wait()
	for tn := range tenants {
		tot, err := l.Totals(ctx, fmt.Sprintf("t%02d", tn), hour0, hour0.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if tot["messages_in"] != parts*ships || tot["bytes_in"] != 10*parts*ships {
			t.Fatalf("tenant t%02d: messages_in %d, bytes_in %d; want %d, %d", tn, tot["messages_in"], tot["bytes_in"], parts*ships, 10*parts*ships)
		}
	}
}

// TestShipBatchOnce: a produced batch reported by two leaders (the one
// that appended it, and the next, which answered the producer's retry as
// a duplicate) counts once, also when both reports come in one shipment.
func TestShipBatchOnce(t *testing.T) {
	l := newLedger(t)
	ctx := context.Background()
	batch := billing.Batch{Tenant: "t1", Topic: "tp", Partition: 2, Base: 40, Hour: hour0.Unix(), Bytes: 300, Messages: 3}
	other := batch
	other.Base = 43
	mk := func(node int, seq int64, bs ...billing.Batch) json.RawMessage {
		return encode(t, billing.Record{Version: 1, Node: node, Boot: "b", Seq: seq, Batches: bs})
	}
	ship := func(from int64, recs ...json.RawMessage) {
		t.Helper()
		if res, err := l.Ship(ctx, billing.Shipment{Cell: "c1", Partition: 1, From: from, Next: from + int64(len(recs)), Records: recs}); err != nil || !res.Applied {
			t.Fatalf("ship: %+v %v", res, err)
		}
	}
	ship(0, mk(1, 1, batch), mk(2, 1, batch, other))
	ship(2, mk(3, 1, batch))
	tot, err := l.Totals(ctx, "t1", hour0, hour0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if tot["bytes_in"] != 600 || tot["messages_in"] != 6 {
		t.Fatalf("totals %v, want bytes_in 600 messages_in 6", tot)
	}
}

// BenchmarkShip: the ledger's throughput in usage records per second.
// Each shipment holds 100 records, as a shipper sends them from a busy
// usage partition; each record (version 2), one broker's flush, has the
// fetch meters of 5 tenants' topics and the closed produce ranges of the
// 10 partitions the broker leads, each range's end past the one before.
func BenchmarkShip(b *testing.B) {
	pool, err := pgxpool.New(context.Background(), pgtest.New(b))
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	l := &billing.Ledger{DB: pool}
	ctx := context.Background()
	const perShipment = 100
	seq, end := int64(0), int64(0)
	pos := int64(0)
	b.ResetTimer()
	for i := 0; i < b.N; i += perShipment {
		var recs []json.RawMessage
		for range min(perShipment, b.N-i) {
			seq++
			r := billing.Record{Version: 2, Node: 1, Boot: "bench", Seq: seq}
			for tn := range 5 {
				for _, m := range []string{"bytes_out", "messages_out"} {
					r.Entries = append(r.Entries, billing.Entry{Tenant: fmt.Sprint("t", tn), Topic: "tp", Meter: m, Hour: hour0.Unix(), Value: 10})
				}
			}
			end += 5
			for p := range int32(10) {
				r.Ranges = append(r.Ranges, billing.Range{Tenant: "t1", Topic: "tp", Partition: p, End: end, Hour: hour0.Unix(), Bytes: 1000 * end, Messages: end})
			}
			raw, _ := json.Marshal(r)
			recs = append(recs, raw)
		}
		res, err := l.Ship(ctx, billing.Shipment{Cell: "c1", Partition: 1, From: pos, Next: pos + int64(len(recs)), Records: recs})
		if err != nil || !res.Applied {
			b.Fatalf("ship: %+v %v", res, err)
		}
		pos = res.Position
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.StopTimer()
	// Each partition's last range holds the hour: its bytes counted once.
	if tot, err := l.Totals(ctx, "t1", hour0, hour0.Add(time.Hour)); err != nil || tot["bytes_in"] != 10*1000*end {
		b.Fatalf("ledger bytes_in %d (%v), want %d", tot["bytes_in"], err, 10*1000*end)
	}
}

type jsonRaw = json.RawMessage

// TestPrune: sources and batches applied before the cutoff are forgotten,
// newer ones kept, and the ledger's values stay.
func TestPrune(t *testing.T) {
	l := newLedger(t)
	ctx := context.Background()
	b := billing.Batch{Tenant: "t1", Topic: "tp", Base: 1, Hour: hour0.Unix(), Bytes: 10, Messages: 1}
	raw := encode(t, billing.Record{Version: 1, Node: 1, Boot: "b", Seq: 1, Batches: []billing.Batch{b}})
	if _, err := l.Ship(ctx, billing.Shipment{Cell: "c1", Partition: 1, From: 0, Next: 1, Records: []json.RawMessage{raw}}); err != nil {
		t.Fatal(err)
	}
	if n, err := l.Prune(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("prune of nothing old: %d %v", n, err)
	}
	if n, err := l.Prune(ctx, time.Now().Add(time.Hour)); err != nil || n != 2 {
		t.Fatalf("prune: %d rows, %v; want the source and the batch", n, err)
	}
	if tot, err := l.Totals(ctx, "t1", hour0, hour0.Add(time.Hour)); err != nil || tot["bytes_in"] != 10 {
		t.Fatalf("ledger after prune: %v %v", tot, err)
	}
}

// TestEstimate: month-to-date charges at the plan's list prices, and
// their linear projection to the month's end.
func TestEstimate(t *testing.T) {
	now := time.Date(2026, 4, 16, 0, 0, 0, 0, time.UTC) // half of April
	e := billing.EstimateFor("standard", map[string]int64{"bytes_in": 10 << 30, "bytes_out": 30 << 30, "partition_seconds": 3600 * 1000}, now)
	// 10 GiB × 0.06 + 30 GiB × 0.04 + 1000 partition-hours × 0.0015
	if e.MonthToDate != 3.3 || e.Projected != 6.6 || !e.MonthStart.Equal(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("estimate %+v", e)
	}
	if free := billing.EstimateFor("free", map[string]int64{"bytes_in": 1 << 40}, now); free.MonthToDate != 0 || len(free.Lines) != 0 {
		t.Fatalf("free plan estimate %+v", free)
	}
}
