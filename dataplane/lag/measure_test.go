package lag

import (
	"testing"
	"time"
)

func TestMeasure(t *testing.T) {
	now := time.UnixMilli(1_000_000_000)
	ms := now.UnixMilli()
	// Ten batches of two records (offsets 2i, 2i+1), batch i written
	// (10-i) minutes ago.
	var ts []int64
	for i := range 10 {
		ts = append(ts, ms-int64(10-i)*time.Minute.Milliseconds())
	}
	p, sizes := openPartition(t, ts...)
	sum := func(from int) int64 { // bytes of batches from..9
		var n int64
		for _, s := range sizes[from:] {
			n += s
		}
		return n
	}
	hour := Retention{Ms: time.Hour.Milliseconds()}

	cases := []struct {
		name      string
		p         *logPartition
		committed int64
		r         Retention
		want      Measurement
	}{
		{"caught up", p, 20, hour, Measurement{HighWatermark: 20}},
		{"behind", p, 14, hour, Measurement{HighWatermark: 20, Records: 6, Bytes: sum(7), Seconds: 180, RetentionFraction: 180.0 / 3600}},
		{"inside a batch counts the batch", p, 15, hour, Measurement{HighWatermark: 20, Records: 5, Bytes: sum(7), Seconds: 180, RetentionFraction: 180.0 / 3600}},
		{"from the start", p, 0, hour, Measurement{HighWatermark: 20, Records: 20, Bytes: sum(0), Seconds: 600, RetentionFraction: 600.0 / 3600}},
		{"bytes nearer than time", p, 14, Retention{Ms: time.Hour.Milliseconds(), Bytes: 2 * sum(7)},
			Measurement{HighWatermark: 20, Records: 6, Bytes: sum(7), Seconds: 180, RetentionFraction: 0.5}},
		{"time nearer than bytes", p, 14, Retention{Ms: 360_000, Bytes: 100 * sum(7)},
			Measurement{HighWatermark: 20, Records: 6, Bytes: sum(7), Seconds: 180, RetentionFraction: 0.5}},
		{"no retention limit", p, 14, Retention{Ms: -1, Bytes: -1},
			Measurement{HighWatermark: 20, Records: 6, Bytes: sum(7), Seconds: 180}},
		{"past retention", p, 0, Retention{Ms: 300_000},
			Measurement{HighWatermark: 20, Records: 20, Bytes: sum(0), Seconds: 600, RetentionFraction: 2}},
		{"beyond the high watermark", p, 25, hour, Measurement{HighWatermark: 20}},
		{"no position committed", p, -1, hour, Measurement{HighWatermark: 20, Records: 20, Bytes: sum(0), Seconds: 600, RetentionFraction: 600.0 / 3600}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Measure(tc.p, tc.committed, tc.r, now)
			if err != nil || got != tc.want {
				t.Fatalf("Measure(committed %d) = %+v, %v\nwant %+v", tc.committed, got, err, tc.want)
			}
		})
	}

	t.Run("high watermark below the log end", func(t *testing.T) {
		q := &logPartition{Log: p.Log, hw: 16}
		got, err := Measure(q, 14, hour, now)
		want := Measurement{HighWatermark: 16, Records: 2, Bytes: sizes[7], Seconds: 180, RetentionFraction: 180.0 / 3600}
		if err != nil || got != want {
			t.Fatalf("got %+v, %v\nwant %+v", got, err, want)
		}
	})
	t.Run("empty partition", func(t *testing.T) {
		e, _ := openPartition(t)
		for _, committed := range []int64{0, 3} {
			got, err := Measure(e, committed, hour, now)
			if err != nil || got != (Measurement{}) {
				t.Fatalf("committed %d: got %+v, %v; want zero", committed, got, err)
			}
		}
	})
	t.Run("future timestamps count as no age", func(t *testing.T) {
		f, _ := openPartition(t, ms+60_000)
		got, err := Measure(f, 0, hour, now)
		if err != nil || got.Records != 2 || got.Seconds != 0 || got.RetentionFraction != 0 {
			t.Fatalf("got %+v, %v", got, err)
		}
	})
	t.Run("committed below the log start", func(t *testing.T) {
		d, sz := openPartition(t, ts...)
		if err := d.DeleteHead(6); err != nil {
			t.Fatal(err)
		}
		start := d.LogStartOffset()
		if start != 6 {
			t.Fatalf("log start %d", start)
		}
		var retained int64
		for _, s := range sz[3:] {
			retained += s
		}
		got, err := Measure(d, 2, hour, now)
		want := Measurement{HighWatermark: 20, LogStartOffset: 6, Records: 14, Bytes: retained, Seconds: 420,
			RetentionFraction: 1, Expired: true}
		if err != nil || got != want {
			t.Fatalf("got %+v, %v\nwant %+v", got, err, want)
		}
		// Even with nothing retained left to read, the loss shows.
		if err := d.DeleteHead(20); err != nil {
			t.Fatal(err)
		}
		got, err = Measure(d, 2, hour, now)
		want = Measurement{HighWatermark: 20, LogStartOffset: 20, RetentionFraction: 1, Expired: true}
		if err != nil || got != want {
			t.Fatalf("all deleted: got %+v, %v\nwant %+v", got, err, want)
		}
	})
}
