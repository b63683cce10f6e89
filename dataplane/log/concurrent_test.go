package log

import (
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentAppendReadSyncRetention runs one writer (append, retention),
// a syncer and two readers at once. Readers check every batch they get is
// the one written at its offset; run it with -race.
func TestConcurrentAppendReadSyncRetention(t *testing.T) {
	cfg := testConfig(t)
	cfg.SegmentBytes = 4096
	cfg.IndexIntervalBytes = 256
	cfg.RetentionAge = -1
	cfg.RetentionBytes = 32 << 10
	l := openLog(t, cfg)
	var done atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	wg.Go(func() {
		defer done.Store(true)
		for i := range 1500 {
			next := l.NextOffset()
			if _, _, err := l.Append(makeBatch(1+i%3, 100, int64(i), uint64(next)), 1); err != nil {
				errs <- err
				return
			}
			if i%50 == 0 {
				if _, err := l.ApplyRetention(); err != nil {
					errs <- err
					return
				}
			}
		}
	})
	wg.Go(func() {
		for !done.Load() {
			if err := l.Sync(); err != nil {
				errs <- err
				return
			}
		}
	})
	for r := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			var buf []byte
			for !done.Load() {
				start, end := l.LogStartOffset(), l.DurableOffset()
				if end <= start {
					continue
				}
				off := start + rng.Int64N(end-start)
				sl, err := l.Read(off, 2000, end)
				if errors.Is(err, ErrOffsetOutOfRange) {
					continue // retention moved the start meanwhile
				}
				if err != nil {
					errs <- err
					return
				}
				buf, err = sl.AppendTo(buf[:0])
				sl.Release()
				if err != nil {
					errs <- err
					return
				}
				for len(buf) > 0 {
					h, err := ValidateBatch(buf[:min(len(buf), int(binaryLen(buf)))])
					if err != nil {
						errs <- err
						return
					}
					if batchTag(t, buf[:h.Size()]) != uint64(h.BaseOffset) {
						errs <- errors.New("batch served at the wrong offset")
						return
					}
					buf = buf[h.Size():]
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if _, err := l.Read(l.LogStartOffset(), math.MaxInt32, math.MaxInt64); err != nil {
		t.Fatal(err)
	}
}

func binaryLen(b []byte) int64 {
	if len(b) < HeaderSize {
		return int64(len(b))
	}
	h, _ := ParseHeader(b)
	return h.Size()
}
