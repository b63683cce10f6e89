package lag

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/contract/wire"
)

type fixture struct {
	now       time.Time
	committed []Committed
	parts     map[string]Partition // by topic id + "/" + partition
	topics    map[string]*wire.Topic
	odd       Committed
	calls     int
}

func (f *fixture) tracker(t *testing.T, maxSeries int) *Tracker {
	t.Helper()
	tr, err := New(Config{
		Committed: func() []Committed { f.calls++; return f.committed },
		Partition: func(topicID string, part int32) (Partition, bool) {
			p, ok := f.parts[topicID+"/"+string(rune('0'+part))]
			return p, ok
		},
		Topic:     func(id string) (*wire.Topic, bool) { tp, ok := f.topics[id]; return tp, ok },
		MaxSeries: maxSeries,
		Now:       func() time.Time { return f.now },
	})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func newFixture(t *testing.T) *fixture {
	now := time.UnixMilli(2_000_000_000)
	ms := now.UnixMilli()
	// tp_orders/0: 5 batches, 1 minute apart, the last written now.
	// tp_orders/1: empty. tp_audit/0: 2 batches, 10 minutes old.
	var ts []int64
	for i := range 5 {
		ts = append(ts, ms-int64(4-i)*60_000)
	}
	o0, _ := openPartition(t, ts...)
	o1, _ := openPartition(t)
	a0, _ := openPartition(t, ms-600_000, ms-600_000)
	return &fixture{
		now: now,
		committed: []Committed{
			{TenantID: "tn_b", Group: "billing", TopicID: "tp_audit", Partition: 0, Offset: 0},
			{TenantID: "tn_a", Group: "workers", TopicID: "tp_orders", Partition: 1, Offset: 0},
			{TenantID: "tn_a", Group: "workers", TopicID: "tp_orders", Partition: 0, Offset: 6},
			{TenantID: "tn_a", Group: "workers", TopicID: "tp_gone", Partition: 0, Offset: 1},
			{TenantID: "tn_a", Group: "workers", TopicID: "tp_remote", Partition: 0, Offset: 1},
		},
		// A group id that is not UTF-8: reported, never a label value.
		odd:   Committed{TenantID: "tn_a", Group: "bad\xffgroup", TopicID: "tp_orders", Partition: 1, Offset: 0},
		parts: map[string]Partition{"tp_orders/0": o0, "tp_orders/1": o1, "tp_audit/0": a0},
		topics: map[string]*wire.Topic{
			"tp_orders": {ID: "tp_orders", TenantID: "tn_a", Name: "orders", Config: map[string]string{"retention.ms": "3600000", "retention.bytes": "-1"}},
			"tp_audit":  {ID: "tp_audit", TenantID: "tn_b", Name: "audit", Config: map[string]string{"retention.ms": "1200000"}},
			"tp_remote": {ID: "tp_remote", TenantID: "tn_a", Name: "remote", Config: map[string]string{}},
		},
	}
}

func TestTrackerReport(t *testing.T) {
	f := newFixture(t)
	tr := f.tracker(t, 0)
	got := tr.Report()
	want := []wire.GroupLag{
		{TenantID: "tn_a", Group: "workers", TopicID: "tp_orders", Partition: 0, CommittedOffset: 6, Measured: true,
			HighWatermark: 10, LagRecords: 4, LagBytes: got[0].LagBytes, LagSeconds: 60, RetentionFraction: 60.0 / 3600},
		{TenantID: "tn_a", Group: "workers", TopicID: "tp_orders", Partition: 1, CommittedOffset: 0, Measured: true},
		// No local replica: reported, not measured.
		{TenantID: "tn_a", Group: "workers", TopicID: "tp_remote", Partition: 0, CommittedOffset: 1},
		{TenantID: "tn_b", Group: "billing", TopicID: "tp_audit", Partition: 0, CommittedOffset: 0, Measured: true,
			HighWatermark: 4, LagRecords: 4, LagBytes: got[3].LagBytes, LagSeconds: 600, RetentionFraction: 0.5},
		// A topic the cell state no longer has: its commit is carried,
		// unmeasured, after the rest (the control plane keeps it only for a
		// tenant moving out of the cell, whose final offsets it is).
		{TenantID: "tn_a", Group: "workers", TopicID: "tp_gone", Partition: 0, CommittedOffset: 1},
	}
	if len(got) != len(want) {
		t.Fatalf("report has %d rows, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	if got[0].LagBytes <= 0 || got[3].LagBytes <= 0 {
		t.Fatalf("lag bytes %d, %d", got[0].LagBytes, got[3].LagBytes)
	}

	// Lag (what scrapes read) reuses the report's measurement within
	// Every, and measures again after.
	tr.Lag()
	if f.calls != 1 {
		t.Fatalf("committed offsets read %d times within Every", f.calls)
	}
	f.now = f.now.Add(time.Second)
	f.committed = f.committed[:1]
	if got := tr.Lag(); len(got) != 1 || f.calls != 2 {
		t.Fatalf("after Every: %d rows, %d reads", len(got), f.calls)
	}
	// A report never reuses one: a commit made just before it is in it
	// (a tenant moving away hands the destination its final offsets from
	// the report after the switch).
	f.committed = append(f.committed, Committed{TenantID: "tn_a", Group: "workers", TopicID: "tp_gone", Partition: 0, Offset: 9})
	got = tr.Report()
	if f.calls != 3 || len(got) != 2 || got[1].CommittedOffset != 9 {
		t.Fatalf("a report within Every of the last pass: %d reads, rows %+v", f.calls, got)
	}
}

func TestTrackerMetrics(t *testing.T) {
	f := newFixture(t)
	f.committed = append(f.committed, f.odd)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(f.tracker(t, 0))
	want := `
# HELP sluice_group_lag_records Records between a consumer group's committed offset and the high watermark.
# TYPE sluice_group_lag_records gauge
sluice_group_lag_records{group="billing",partition="0",tenant="tn_b",topic="audit"} 4
sluice_group_lag_records{group="workers",partition="0",tenant="tn_a",topic="orders"} 4
sluice_group_lag_records{group="workers",partition="1",tenant="tn_a",topic="orders"} 0
# HELP sluice_group_lag_seconds Age of the oldest record a consumer group has not consumed (0 when caught up).
# TYPE sluice_group_lag_seconds gauge
sluice_group_lag_seconds{group="billing",partition="0",tenant="tn_b",topic="audit"} 600
sluice_group_lag_seconds{group="workers",partition="0",tenant="tn_a",topic="orders"} 60
sluice_group_lag_seconds{group="workers",partition="1",tenant="tn_a",topic="orders"} 0
# HELP sluice_group_lag_retention_fraction Consumer-group lag as a fraction of the topic's retention (time or bytes, whichever is nearer); 1 or more: unread records are or may be deleted.
# TYPE sluice_group_lag_retention_fraction gauge
sluice_group_lag_retention_fraction{group="billing",partition="0",tenant="tn_b",topic="audit"} 0.5
sluice_group_lag_retention_fraction{group="workers",partition="0",tenant="tn_a",topic="orders"} 0.016666666666666666
sluice_group_lag_retention_fraction{group="workers",partition="1",tenant="tn_a",topic="orders"} 0
# HELP sluice_group_lag_aggregated 1 when group lag is exported per topic (partition="all") because the per-partition series would exceed the cap.
# TYPE sluice_group_lag_aggregated gauge
sluice_group_lag_aggregated 0
`
	names := []string{"sluice_group_lag_records", "sluice_group_lag_seconds", "sluice_group_lag_retention_fraction", "sluice_group_lag_aggregated"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "sluice_group_lag_bytes"); err != nil || n != 3 {
		t.Fatalf("lag bytes series: %d %v", n, err)
	}

	// Above the cap: one series per group and topic.
	agg := prometheus.NewPedanticRegistry()
	agg.MustRegister(f.tracker(t, 2))
	want = `
# HELP sluice_group_lag_records Records between a consumer group's committed offset and the high watermark.
# TYPE sluice_group_lag_records gauge
sluice_group_lag_records{group="billing",partition="all",tenant="tn_b",topic="audit"} 4
sluice_group_lag_records{group="workers",partition="all",tenant="tn_a",topic="orders"} 4
# HELP sluice_group_lag_seconds Age of the oldest record a consumer group has not consumed (0 when caught up).
# TYPE sluice_group_lag_seconds gauge
sluice_group_lag_seconds{group="billing",partition="all",tenant="tn_b",topic="audit"} 600
sluice_group_lag_seconds{group="workers",partition="all",tenant="tn_a",topic="orders"} 60
# HELP sluice_group_lag_aggregated 1 when group lag is exported per topic (partition="all") because the per-partition series would exceed the cap.
# TYPE sluice_group_lag_aggregated gauge
sluice_group_lag_aggregated 1
`
	if err := testutil.GatherAndCompare(agg, strings.NewReader(want), "sluice_group_lag_records", "sluice_group_lag_seconds", "sluice_group_lag_aggregated"); err != nil {
		t.Fatal(err)
	}

	// A group that goes away takes its series with it.
	f.now = f.now.Add(time.Minute)
	f.committed = nil
	if n, err := testutil.GatherAndCount(reg, "sluice_group_lag_records"); err != nil || n != 0 {
		t.Fatalf("series after the groups went: %d %v", n, err)
	}
}

func TestConfigValidate(t *testing.T) {
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "required") {
		t.Fatalf("empty config: %v", err)
	}
}

// A group lists every partition of the topics it consumes: those it
// committed, and the others (NoCommit, offset -1) measured from the log
// start, the records a consumer starting from the earliest offset would
// read. A topic it only subscribes to counts as consumed too.
func TestTrackerListsPartitionsWithoutCommits(t *testing.T) {
	now := time.UnixMilli(2_000_000_000)
	ms := now.UnixMilli()
	p0, _ := openPartition(t, ms, ms)
	p1, _ := openPartition(t, ms)
	// Partition 2: 4 batches of 2 records, the first 2 deleted by
	// retention: 4 records retained of 8.
	p2, sizes := openPartition(t, ms-60_000, ms-60_000, ms-60_000, ms-30_000)
	if err := p2.DeleteHead(4); err != nil {
		t.Fatal(err)
	}
	a0, _ := openPartition(t, ms-10_000)
	parts := map[string]Partition{"tp_orders/0": p0, "tp_orders/1": p1, "tp_orders/2": p2, "tp_audit/0": a0}
	three := []wire.Partition{{Partition: 0}, {Partition: 1}, {Partition: 2}}
	topics := map[string]*wire.Topic{
		"tp_orders": {ID: "tp_orders", Name: "orders", Config: map[string]string{}, Partitions: three},
		"tp_audit":  {ID: "tp_audit", Name: "audit", Config: map[string]string{}, Partitions: three[:1]},
	}
	committedAt := now.Add(-time.Second)
	// The orders topic's three partitions, two of them committed on.
	orders := []wire.GroupLag{
		{TenantID: "tn_a", Group: "workers", TopicID: "tp_orders", Partition: 0, CommittedOffset: 4, CommittedAt: committedAt,
			Measured: true, HighWatermark: 4},
		{TenantID: "tn_a", Group: "workers", TopicID: "tp_orders", Partition: 1, CommittedOffset: 1, CommittedAt: committedAt,
			Measured: true, HighWatermark: 2, LagRecords: 1, LagBytes: sizesOf(t, p1, 1, 2)},
		{TenantID: "tn_a", Group: "workers", TopicID: "tp_orders", Partition: 2, CommittedOffset: -1, Measured: true,
			HighWatermark: 8, LogStartOffset: 4, LagRecords: 4, LagBytes: sizes[2] + sizes[3], LagSeconds: 60},
	}
	cases := []struct {
		name     string
		consumed []Consumed
		want     []wire.GroupLag
	}{
		{name: "committed on two of three partitions", want: orders},
		{name: "a subscribed topic without commits", consumed: []Consumed{
			{TenantID: "tn_a", Group: "workers", TopicID: "tp_audit"},
			{TenantID: "tn_a", Group: "workers", TopicID: "tp_orders"}, // already committed on: no duplicates
			{TenantID: "tn_a", Group: "workers", TopicID: "tp_gone"},   // deleted: left out
		}, want: append([]wire.GroupLag{
			{TenantID: "tn_a", Group: "workers", TopicID: "tp_audit", Partition: 0, CommittedOffset: -1, Measured: true,
				HighWatermark: 2, LagRecords: 2, LagBytes: sizesOf(t, a0, 0, 2), LagSeconds: 10},
		}, orders...)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := New(Config{
				Committed: func() []Committed {
					return []Committed{
						{TenantID: "tn_a", Group: "workers", TopicID: "tp_orders", Partition: 1, Offset: 1, CommittedAt: committedAt},
						{TenantID: "tn_a", Group: "workers", TopicID: "tp_orders", Partition: 0, Offset: 4, CommittedAt: committedAt},
					}
				},
				Consumed: func() []Consumed { return tc.consumed },
				Partition: func(topicID string, part int32) (Partition, bool) {
					p, ok := parts[topicID+"/"+string(rune('0'+part))]
					return p, ok
				},
				Topic: func(id string) (*wire.Topic, bool) { tp, ok := topics[id]; return tp, ok },
				Now:   func() time.Time { return now },
			})
			if err != nil {
				t.Fatal(err)
			}
			got := tr.Report()
			if len(got) != len(tc.want) {
				t.Fatalf("report has %d rows, want %d: %+v", len(got), len(tc.want), got)
			}
			for i := range tc.want {
				if got[i] != tc.want[i] {
					t.Errorf("row %d:\n got %+v\nwant %+v", i, got[i], tc.want[i])
				}
			}
			if ls := tr.Lag(); !ls[len(ls)-1].NoCommit || ls[len(ls)-2].NoCommit {
				t.Fatalf("NoCommit marks: %+v", ls)
			}
		})
	}
}

// sizesOf is the bytes of p's batches holding [from, to).
func sizesOf(t *testing.T, p Partition, from, to int64) int64 {
	t.Helper()
	n, err := p.BytesBetween(from, to)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
