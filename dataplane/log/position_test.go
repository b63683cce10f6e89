package log

import (
	"errors"
	"testing"
)

func TestBytesBetweenAndBatchTimestamp(t *testing.T) {
	cfg := testConfig(t)
	cfg.SegmentBytes = 1000
	cfg.IndexIntervalBytes = 300
	l := openLog(t, cfg)
	// 30 batches of 2 records; batch i is timestamped 1000+10i (max +1).
	var sizes []int64
	for i := range 30 {
		b := appendN(t, l, 1, 2, 100, int64(1000+10*i))
		sizes = append(sizes, int64(len(b[0])))
	}
	if len(l.Segments()) < 3 {
		t.Fatalf("want several segments, got %v", l.Segments())
	}
	sum := func(from, to int) int64 { // batches [from, to)
		var n int64
		for _, s := range sizes[from:to] {
			n += s
		}
		return n
	}
	cases := []struct {
		name     string
		from, to int64
		want     int64
	}{
		{"whole log", 0, 60, sum(0, 30)},
		{"empty range at start", 0, 0, 0},
		{"empty range at end", 60, 60, 0},
		{"one batch", 4, 6, sizes[2]},
		{"mid-batch from counts the whole batch", 5, 60, sum(2, 30)},
		{"mid-batch to stops before its batch", 0, 7, sum(0, 3)},
		{"across segments", 2, 58, sum(1, 29)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := l.BytesBetween(tc.from, tc.to)
			if err != nil || got != tc.want {
				t.Fatalf("BytesBetween(%d, %d) = %d, %v; want %d", tc.from, tc.to, got, err, tc.want)
			}
		})
	}
	for _, bad := range [][2]int64{{-1, 4}, {4, 61}, {6, 4}} {
		if _, err := l.BytesBetween(bad[0], bad[1]); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("BytesBetween(%d, %d): %v, want ErrOffsetOutOfRange", bad[0], bad[1], err)
		}
	}
	for _, tc := range []struct{ offset, want int64 }{{0, 1001}, {1, 1001}, {2, 1011}, {59, 1291}} {
		got, err := l.BatchMaxTimestamp(tc.offset)
		if err != nil || got != tc.want {
			t.Fatalf("BatchMaxTimestamp(%d) = %d, %v; want %d", tc.offset, got, err, tc.want)
		}
	}
	if _, err := l.BatchMaxTimestamp(60); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("BatchMaxTimestamp at the end: %v", err)
	}

	// After a delete-head the retained part still sums, and below it is out of range.
	segs := l.Segments()
	if err := l.DeleteHead(segs[1] + 2); err != nil {
		t.Fatal(err)
	}
	start := l.LogStartOffset()
	got, err := l.BytesBetween(start, 60)
	if want := sum(int(start/2), 30); err != nil || got != want {
		t.Fatalf("after delete head: BytesBetween(%d, 60) = %d, %v; want %d", start, got, err, want)
	}
	if _, err := l.BytesBetween(0, 60); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("below the log start: %v", err)
	}
	if _, err := l.BatchMaxTimestamp(start - 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("timestamp below the log start: %v", err)
	}
	l.Close()
	if _, err := l.BytesBetween(start, 60); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed log: %v", err)
	}
}
