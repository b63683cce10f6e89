package billing_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sluicehq/sluice/billing"
)

func rangeRec(t *testing.T, node int, boot string, seq int64, ranges ...billing.Range) json.RawMessage {
	t.Helper()
	return encode(t, billing.Record{Version: 2, Node: node, Boot: boot, Seq: seq, Ranges: ranges})
}

func rg(part int32, end int64, hour time.Time, bytes, msgs int64) billing.Range {
	return billing.Range{Tenant: "t1", Topic: "tp", Partition: part, End: end, Hour: hour.Unix(), Bytes: bytes, Messages: msgs}
}

// TestShipRangesOnce: a partition's produce ranges count once per (topic,
// partition, hour), whichever usage partition brings them and in whatever
// order: a range recorded again by the next leader (in another usage
// partition) adds nothing, an older range arriving after a newer one of
// its hour adds nothing, and one of an hour the ledger has not seen adds
// its sums.
func TestShipRangesOnce(t *testing.T) {
	l := newLedger(t)
	ctx := context.Background()
	h1 := hour0.Add(time.Hour)
	// Partition 0: ranges end 10 (hour0: 100 B, 10 msgs so far), end 25
	// (hour0: 250 B), end 40 (h1: 30 B). Old leader records [10, 25] into
	// usage partition 1 and crashes after the close at 40 committed; the
	// new leader records 40 again and then its own next range, end 55
	// (h1: 80 B), into usage partition 2, which ships first.
	steps := []struct {
		name string
		s    billing.Shipment
	}{
		{"new leader's usage partition first", billing.Shipment{Partition: 2, From: 0, Next: 2, Records: []json.RawMessage{
			rangeRec(t, 2, "b2", 1, rg(0, 40, h1, 30, 3)),
			rangeRec(t, 2, "b2", 2, rg(0, 55, h1, 80, 8)),
		}}},
		{"old leader's usage partition", billing.Shipment{Partition: 1, From: 0, Next: 3, Records: []json.RawMessage{
			rangeRec(t, 1, "b1", 1, rg(0, 10, hour0, 100, 10)),
			rangeRec(t, 1, "b1", 2, rg(0, 25, hour0, 250, 25)),
			rangeRec(t, 1, "b1", 3, rg(0, 40, h1, 30, 3)), // the range the new leader re-recorded
		}}},
		{"a re-recorded range after a later one", billing.Shipment{Partition: 1, From: 3, Next: 4, Records: []json.RawMessage{
			rangeRec(t, 1, "b1", 4, rg(0, 25, hour0, 250, 25)),
		}}},
	}
	for _, st := range steps {
		st.s.Cell = "c1"
		res, err := l.Ship(ctx, st.s)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if !res.Applied || res.Rejected != 0 {
			t.Fatalf("%s: %+v", st.name, res)
		}
	}
	rows, err := l.Usage(ctx, billing.Query{Tenant: "t1", From: hour0, To: hour0.Add(2 * time.Hour), Meters: []string{"bytes_in", "messages_in"}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range rows {
		got[r.Meter+"@"+r.Start.UTC().Format("15")] = r.Value
	}
	want := map[string]int64{"bytes_in@10": 250, "messages_in@10": 25, "bytes_in@11": 80, "messages_in@11": 8}
	if len(got) != len(want) {
		t.Fatalf("ledger %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("ledger %v, want %v", got, want)
		}
	}
}

// TestShipRangeRejects: a version 2 record with produced batches, or a
// range without a tenant or with a non-positive end, is rejected and
// applies nothing.
func TestShipRangeRejects(t *testing.T) {
	l := newLedger(t)
	ctx := context.Background()
	bad := []json.RawMessage{
		json.RawMessage(`{"v":2,"node":1,"boot":"b","seq":1,"batches":[{"tenant":"t1","topic":"tp","partition":0,"base":0,"hour":0,"bytes":1,"messages":1}]}`),
		rangeRec(t, 1, "b", 2, billing.Range{Topic: "tp", End: 5, Bytes: 1}),
		rangeRec(t, 1, "b", 3, rg(0, 0, hour0, 1, 1)),
	}
	res, err := l.Ship(ctx, billing.Shipment{Cell: "c1", Partition: 0, From: 0, Next: 3, Records: bad})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rejected != 3 || res.Records != 0 {
		t.Fatalf("%+v, want 3 rejected", res)
	}
	tot, err := l.Totals(ctx, "t1", hour0.Add(-time.Hour), hour0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(tot) != 0 {
		t.Fatalf("totals %v after rejected records", tot)
	}
}

// TestPruneKeepsLatestRange: pruning forgets old hours' ranges but keeps
// each partition's latest, so its next leader's re-recording still counts
// nothing.
func TestPruneKeepsLatestRange(t *testing.T) {
	l := newLedger(t)
	ctx := context.Background()
	h1 := hour0.Add(time.Hour)
	if _, err := l.Ship(ctx, billing.Shipment{Cell: "c1", Partition: 0, From: 0, Next: 1, Records: []json.RawMessage{
		rangeRec(t, 1, "b", 1, rg(0, 10, hour0, 100, 10), rg(1, 7, hour0, 70, 7), rg(0, 20, h1, 5, 1)),
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Prune(ctx, h1.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := l.DB.QueryRow(ctx, `SELECT count(*) FROM usage_ranges`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 { // partition 0's hour h1 and partition 1's hour0
		t.Fatalf("%d ranges after prune, want 2", n)
	}
	if _, err := l.Ship(ctx, billing.Shipment{Cell: "c1", Partition: 0, From: 1, Next: 2, Records: []json.RawMessage{
		rangeRec(t, 2, "b2", 1, rg(1, 7, hour0, 70, 7), rg(0, 20, h1, 5, 1)),
	}}); err != nil {
		t.Fatal(err)
	}
	tot, err := l.Totals(ctx, "t1", hour0.Add(-time.Hour), hour0.Add(3*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if tot["bytes_in"] != 175 || tot["messages_in"] != 18 {
		t.Fatalf("totals %v, want bytes_in 175 messages_in 18", tot)
	}
}
