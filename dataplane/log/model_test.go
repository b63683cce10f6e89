package log

import (
	"context"
	"errors"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// modelBatch is a batch as the model remembers it.
type modelBatch struct {
	base, last, maxTS int64
	data              []byte
}

// logModel is the in-memory model of a partition log.
type logModel struct {
	batches []modelBatch
	start   int64
}

func (m *logModel) next() int64 {
	if len(m.batches) == 0 {
		return m.start
	}
	return m.batches[len(m.batches)-1].last + 1
}

// find returns the index of the batch holding offset.
func (m *logModel) find(offset int64) int {
	for i, b := range m.batches {
		if b.base <= offset && offset <= b.last {
			return i
		}
	}
	return -1
}

// TestLogMatchesModel runs random sequences of append, read, truncate,
// delete-head, retention, roll, timestamp lookup and close/reopen against a
// small segment size and index interval, and checks every result against
// the in-memory model.
func TestLogMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := Config{
			Dir:                t.TempDir(),
			SegmentBytes:       rapid.Int64Range(HeaderSize, 3000).Draw(rt, "segment_bytes"),
			IndexIntervalBytes: rapid.IntRange(1, 600).Draw(rt, "index_interval"),
			RetentionAge:       -1,
			RetentionBytes:     rapid.Int64Range(0, 4000).Draw(rt, "retention_bytes"),
			Logger:             testLogger(t),
			Now:                func() time.Time { return time.Unix(1000, 0) },
		}
		l, err := Open(context.Background(), cfg)
		if err != nil {
			rt.Fatalf("open: %v", err)
		}
		defer func() { l.Close() }()
		m := &logModel{}
		check := func(what string) {
			if l.NextOffset() != m.next() || l.LogStartOffset() != m.start {
				rt.Fatalf("after %s: log [%d,%d), model [%d,%d)", what, l.LogStartOffset(), l.NextOffset(), m.start, m.next())
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"append": func(rt *rapid.T) {
				n := rapid.IntRange(1, 3).Draw(rt, "batches")
				var in []Batch
				var recs []int
				for range n {
					r := rapid.IntRange(1, 4).Draw(rt, "records")
					ts := rapid.Int64Range(0, 1000).Draw(rt, "ts")
					size := rapid.IntRange(1, 200).Draw(rt, "value_size")
					in = append(in, Batch{Data: makeBatch(r, size, ts, rapid.Uint64().Draw(rt, "tag")), LeaderEpoch: 1})
					recs = append(recs, r)
				}
				first, last, err := l.AppendBatches(in)
				if err != nil {
					rt.Fatalf("append: %v", err)
				}
				want := m.next()
				if first != want {
					rt.Fatalf("append base %d, want %d", first, want)
				}
				for i, b := range in {
					h, _ := ParseHeader(b.Data)
					if h.BaseOffset != want {
						rt.Fatalf("batch %d stamped %d, want %d", i, h.BaseOffset, want)
					}
					m.batches = append(m.batches, modelBatch{base: want, last: want + int64(recs[i]) - 1, maxTS: h.MaxTimestamp, data: append([]byte(nil), b.Data...)})
					want += int64(recs[i])
				}
				if last != want-1 {
					rt.Fatalf("append last %d, want %d", last, want-1)
				}
				check("append")
			},
			"read": func(rt *rapid.T) {
				off := rapid.Int64Range(m.start-2, m.next()+2).Draw(rt, "offset")
				maxBytes := rapid.IntRange(0, 2000).Draw(rt, "max_bytes")
				hwm := rapid.Int64Range(m.start, m.next()+1).Draw(rt, "max_offset")
				sl, err := l.Read(off, maxBytes, hwm)
				if off < m.start || off > m.next() {
					if !errors.Is(err, ErrOffsetOutOfRange) {
						rt.Fatalf("read %d outside [%d,%d]: %v", off, m.start, m.next(), err)
					}
					return
				}
				if err != nil {
					rt.Fatalf("read %d: %v", off, err)
				}
				defer sl.Release()
				if off == m.next() || off >= hwm {
					if sl.Size != 0 {
						rt.Fatalf("read %d (hwm %d, next %d) gave %d bytes", off, hwm, m.next(), sl.Size)
					}
					return
				}
				b, err := sl.AppendTo(nil)
				if err != nil {
					rt.Fatalf("read %d: %v", off, err)
				}
				got := splitBatches(rt, b)
				i := m.find(off)
				if len(got) == 0 || (len(got) > 1 && len(b) > maxBytes) {
					rt.Fatalf("read %d max %d: %d batches, %d bytes", off, maxBytes, len(got), len(b))
				}
				for j, g := range got {
					mb := m.batches[i+j]
					if !sameBatch(g, mb.data) {
						rt.Fatalf("read %d: batch %d differs from model batch at %d", off, j, mb.base)
					}
					if j > 0 && mb.base >= hwm {
						rt.Fatalf("read %d: batch %d at or past max offset %d", off, mb.base, hwm)
					}
				}
				if sl.BaseOffset != m.batches[i].base || sl.NextOffset != m.batches[i+len(got)-1].last+1 {
					rt.Fatalf("read %d: slice offsets %d..%d", off, sl.BaseOffset, sl.NextOffset)
				}
				// Raft's path: the batch with its header.
				h, rb, err := l.ReadBatch(off, nil)
				if err != nil || h.BaseOffset != m.batches[i].base || !sameBatch(rb, m.batches[i].data) {
					rt.Fatalf("read batch %d: %v", off, err)
				}
			},
			"truncate": func(rt *rapid.T) {
				var cands []int64
				for _, b := range m.batches {
					if b.base >= m.start {
						cands = append(cands, b.base)
					}
				}
				cands = append(cands, m.next())
				to := rapid.SampledFrom(cands).Draw(rt, "to")
				if err := l.TruncateTo(to); err != nil {
					rt.Fatalf("truncate to %d: %v", to, err)
				}
				for len(m.batches) > 0 && m.batches[len(m.batches)-1].base >= to {
					m.batches = m.batches[:len(m.batches)-1]
				}
				check("truncate")
			},
			"truncate_mid_batch": func(rt *rapid.T) {
				i := m.find(m.next() - 1)
				if i < 0 || m.batches[i].last == m.batches[i].base || m.batches[i].base < m.start {
					rt.Skip("no multi-record batch at the tail")
				}
				if err := l.TruncateTo(m.batches[i].base + 1); !errors.Is(err, ErrNotBatchBoundary) {
					rt.Fatalf("truncate mid batch: %v", err)
				}
				check("truncate mid batch")
			},
			"delete_head": func(rt *rapid.T) {
				to := rapid.Int64Range(m.start, m.next()).Draw(rt, "to")
				if err := l.DeleteHead(to); err != nil {
					rt.Fatalf("delete head %d: %v", to, err)
				}
				m.start = to
				check("delete head")
			},
			"retention": func(rt *rapid.T) {
				before := l.Size()
				if _, err := l.ApplyRetention(); err != nil {
					rt.Fatalf("retention: %v", err)
				}
				start := l.LogStartOffset()
				if start < m.start || start > m.next() {
					rt.Fatalf("retention moved start from %d to %d (next %d)", m.start, start, m.next())
				}
				if start > m.start {
					if cfg.RetentionBytes == 0 || l.Size() < cfg.RetentionBytes || l.Size() >= before {
						rt.Fatalf("retention to %d: size %d -> %d, limit %d", start, before, l.Size(), cfg.RetentionBytes)
					}
					if segs := l.Segments(); segs[0] != start {
						rt.Fatalf("retention start %d is not the first segment %d", start, segs[0])
					}
				}
				m.start = start
			},
			"roll": func(rt *rapid.T) {
				if err := l.Roll(); err != nil {
					rt.Fatalf("roll: %v", err)
				}
				check("roll")
			},
			"sync": func(rt *rapid.T) {
				if err := l.Sync(); err != nil || l.DurableOffset() != m.next() {
					rt.Fatalf("sync: %v, durable %d", err, l.DurableOffset())
				}
			},
			"timestamp": func(rt *rapid.T) {
				ts := rapid.Int64Range(-1, 1010).Draw(rt, "ts")
				want, wantFound := int64(0), false
				for _, b := range m.batches {
					if b.last >= m.start && b.maxTS >= ts {
						want, wantFound = max(b.base, m.start), true
						break
					}
				}
				got, found, err := l.OffsetForTimestamp(ts)
				if err != nil || found != wantFound || got != want {
					rt.Fatalf("offset for timestamp %d: %d %v %v, want %d %v", ts, got, found, err, want, wantFound)
				}
			},
			"reopen": func(rt *rapid.T) {
				if err := l.Close(); err != nil {
					rt.Fatalf("close: %v", err)
				}
				l, err = Open(context.Background(), cfg)
				if err != nil {
					rt.Fatalf("reopen: %v", err)
				}
				if r := l.Recovery(); r.Cut() || len(r.RebuiltIndexes) > 0 {
					rt.Fatalf("clean reopen repaired something: %+v", r)
				}
				check("reopen")
			},
		})
	})
}
