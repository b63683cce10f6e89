package log

import (
	"testing"
	"time"
)

// TestReconfigure: new segment and retention settings apply to an open log
// (the next roll and the next retention pass), bad ones are refused and
// change nothing.
func TestReconfigure(t *testing.T) {
	now := time.UnixMilli(10_000_000_000)
	cfg := testConfig(t)
	cfg.Now = func() time.Time { return now }
	l := openLog(t, cfg)
	appendN(t, l, 20, 1, 100, now.UnixMilli())
	if n := len(l.Segments()); n != 1 {
		t.Fatalf("segments %d with the default segment size", n)
	}
	if err := l.Reconfigure(Settings{SegmentBytes: 10}); err == nil {
		t.Fatal("segment size below a batch header accepted")
	}
	if got := l.Settings(); got.SegmentBytes != DefaultSegmentBytes || got.RetentionAge != DefaultRetentionAge {
		t.Fatalf("settings after a refused change: %+v", got)
	}
	if err := l.Reconfigure(Settings{SegmentBytes: 1000, RetentionAge: time.Minute}); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 20, 1, 100, now.UnixMilli())
	if n := len(l.Segments()); n < 3 {
		t.Fatalf("segments %d after shrinking segment.bytes to 1000", n)
	}
	// Nothing is older than a minute yet.
	if p, err := l.RetentionPoint(l.NextOffset()); err != nil || p != 0 {
		t.Fatalf("retention point %d %v before anything expired", p, err)
	}
	now = now.Add(2 * time.Minute)
	segs := l.Segments()
	// Bounded by a limit inside the second segment: only the first may go.
	p, err := l.RetentionPoint(segs[1] + 1)
	if err != nil || p != segs[1] {
		t.Fatalf("retention point below %d: %d %v, want %d", segs[1]+1, p, err, segs[1])
	}
	// Unbounded: every closed segment, never the active one.
	if p, err := l.RetentionPoint(l.NextOffset()); err != nil || p != segs[len(segs)-1] {
		t.Fatalf("retention point %d %v, want the active segment's base %d", p, err, segs[len(segs)-1])
	}
	if l.LogStartOffset() != 0 || len(l.Segments()) != len(segs) {
		t.Fatal("RetentionPoint deleted something")
	}
}
