package main

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dataplane/celltest/history"
)

func newTestTrimmer(retention time.Duration) (*Trimmer, *history.Checker) {
	chk := history.New()
	return &Trimmer{cfg: Config{Retention: retention}, chk: chk, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		acked: map[int32][]ackAt{}, asked: map[int32]int64{}, start: map[int32]int64{}}, chk
}

// The trimmer counts a log start above a record younger than retention.ms
// (and not below a DeleteRecords offset) as an early deletion, excuses
// older records and those DeleteRecords asked for, and tells the checker
// how far records may be gone.
func TestTrimmerEarlyDeletion(t *testing.T) {
	now := time.Now()
	tr, chk := newTestTrimmer(20 * time.Second)
	tr.Acked(0, 0, now.Add(-40*time.Second)) // old enough for retention
	tr.Acked(0, 1, now.Add(-30*time.Second))
	tr.Acked(0, 2, now.Add(-5*time.Second)) // too young
	tr.Acked(0, 3, now.Add(-4*time.Second))
	tr.observe(0, 2, now)
	res := history.Result{}
	tr.Report(&res)
	if res.Counts[EarlyDeletion] != 0 {
		t.Fatalf("deleting records older than retention.ms counted: %v", res.Examples[EarlyDeletion])
	}
	tr.observe(0, 3, now)
	tr.Report(&res)
	if res.Counts[EarlyDeletion] != 1 {
		t.Fatalf("deleting a record 5 s old under retention.ms 20 s: %d early deletions, want 1", res.Counts[EarlyDeletion])
	}
	// A DeleteRecords offset excuses the young records below it.
	tr.mu.Lock()
	tr.asked[0] = 4
	tr.mu.Unlock()
	tr.observe(0, 4, now)
	tr.Report(&res)
	if res.Counts[EarlyDeletion] != 1 {
		t.Fatalf("records below a DeleteRecords offset counted as early deletions: %d", res.Counts[EarlyDeletion])
	}
	// A lower report (a deposed leader) does not lower what is allowed.
	tr.observe(0, 1, now)
	if tr.start[0] != 4 || tr.backs != 1 {
		t.Fatalf("start %d, backs %d after a lower report", tr.start[0], tr.backs)
	}
	// The checker allows a skip to the reported log start, not beyond.
	chk.Skipped("s", 0, 0, 4)
	chk.Skipped("s", 0, 0, 5)
	if got := chk.Result().Counts[history.PollSkip]; got != 1 {
		t.Fatalf("poll skips: %d, want 1 (the skip past the log start)", got)
	}
}

// Without retention, only DeleteRecords may move the log start.
func TestTrimmerWithoutRetention(t *testing.T) {
	tr, _ := newTestTrimmer(0)
	tr.Acked(1, 0, time.Now().Add(-time.Hour))
	tr.observe(1, 1, time.Now())
	res := history.Result{}
	tr.Report(&res)
	if res.Counts[EarlyDeletion] != 1 {
		t.Fatalf("a log start moved without retention or DeleteRecords: %d early deletions, want 1", res.Counts[EarlyDeletion])
	}
}
