package history

import (
	"fmt"
	"sort"
	"time"
)

// The compaction model (NewCompacted), for a topic with
// cleanup.policy=compact: offsets still never name two values and records
// still come back in offset order, but a compacted log has gaps, and a
// record may vanish from the final read only if a newer record of its key
// is there, at a higher offset, or a newer tombstone of its key was
// written (the tombstone itself may be gone). So each key's last
// acknowledged value survives at its acknowledged offset unless a later
// write of the key (one whose produce failed ambiguously, and did append)
// is in the log above it, or a tombstone of the key was written after it.
//
// Tombstones (records with a null value, AckedTombstone) carry a unique id
// in place of a value. An acknowledged tombstone stays until
// delete.retention.ms has passed since its timestamp (the cleaner expires
// a tombstone whose batch is older than the leader's "now" minus it, and
// that "now" is never after the final read) unless a newer record of its
// key supersedes it; after that it may vanish, and with it its key. A key
// whose acknowledged tombstone has vanished must not have an older record
// as the newest in the final read: that is a deleted value come back
// (Resurrected). A tombstone whose produce failed ambiguously may have
// been appended and expired: it excuses the older records of its key
// (MaybeTombstone).
//
// The properties keep their names: LostWrite counts an acknowledged value
// missing without a newer record of its key above it (or a tombstone of
// it) and an acknowledged tombstone missing too early, NonmonotonicPoll a
// final read out of offset order; PollSkip never fires on a gap.

// NewCompacted returns an empty checker for a compacted log whose
// tombstones may vanish as soon as they are written (see
// DeleteRetention).
func NewCompacted() *Checker {
	c := New()
	c.compacted = true
	return c
}

func newTombstones() *tombstones {
	return &tombstones{info: map[string]tombstone{}, maybe: map[string]bool{}, now: time.Now}
}

// tombstones is a compacted checker's knowledge of deletes; guarded by
// the Checker's mu.
type tombstones struct {
	retention time.Duration        // delete.retention.ms
	now       func() time.Time     // the final reads' clock
	info      map[string]tombstone // acknowledged tombstone id → what it deletes
	maybe     map[string]bool      // keys with a tombstone of unknown outcome
	read      int                  // tombstones in the final reads
	expired   int                  // acknowledged ones gone past delete.retention.ms, with their key
}

type tombstone struct {
	key string
	ts  time.Time // the record's timestamp
}

// DeleteRetention sets the topic's delete.retention.ms: an acknowledged
// tombstone must be in a final read made within it of the tombstone's
// timestamp by now (nil: time.Now), unless a newer record of its key is.
func (c *Checker) DeleteRetention(d time.Duration, now func() time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tombs.retention = d
	if now != nil {
		c.tombs.now = now
	}
}

// AckedTombstone is AckedKey for a tombstone of key with the unique id
// the workload put in it and its record timestamp.
func (c *Checker) AckedTombstone(part int32, off int64, key, id string, ts time.Time) {
	c.mu.Lock()
	c.learnKey(Record{Part: part, Offset: off, Value: id, Key: key})
	c.tombs.info[id] = tombstone{key: key, ts: ts}
	c.mu.Unlock()
	c.Acked(part, off, id)
}

// TombstoneCounts is how many tombstones were acknowledged, how many the
// final reads held, and how many were gone from them past
// delete.retention.ms with no newer record of their key (expired, and
// their key with them).
func (c *Checker) TombstoneCounts() (acked, read, expired int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.tombs.info), c.tombs.read, c.tombs.expired
}

// MaybeTombstone records a tombstone of key whose produce failed
// ambiguously: it may have been appended, have removed every older record
// of key, and have expired.
func (c *Checker) MaybeTombstone(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tombs.maybe[key] = true
}

// AckedKey is Acked for a value produced with key: in a compacted checker,
// the value may vanish below a newer record of key.
func (c *Checker) AckedKey(part int32, off int64, key, value string) {
	c.mu.Lock()
	c.learnKey(Record{Part: part, Offset: off, Value: value, Key: key})
	c.mu.Unlock()
	c.Acked(part, off, value)
}

// learnKey records r's key for its value; a value seen with two keys is
// an inconsistency (every value is written once, with one key).
func (c *Checker) learnKey(r Record) {
	if r.Key == "" {
		return
	}
	if k, ok := c.keyOf[r.Value]; ok && k != r.Key {
		c.violate(InconsistentOffsets, "%q at partition %d offset %d has key %q, earlier %q", r.Value, r.Part, r.Offset, r.Key, k)
		return
	}
	c.keyOf[r.Value] = r.Key
}

// finalCompacted is FinalFrom in the compaction model; c.mu is held.
func (c *Checker) finalCompacted(part int32, start int64, recs []Record, hw int64) {
	if start > c.trimmed[part] {
		c.violate(LostWrite, "final read of partition %d starts at its log start %d, but the log start was moved only up to %d", part, start, c.trimmed[part])
	}
	final := make(map[int64]string, len(recs))
	newest := map[string]int64{} // key → its highest offset in the final read
	prev := start - 1
	for i, r := range recs {
		switch {
		case r.Offset <= prev:
			c.violate(NonmonotonicPoll, "final read of partition %d: record %d has offset %d, after offset %d", part, i, r.Offset, prev)
		case r.Offset >= hw:
			c.violate(HighWatermark, "final read of partition %d: record %d has offset %d, at or above the high watermark %d", part, i, r.Offset, hw)
		}
		prev = max(prev, r.Offset)
		c.observe(at{part, r.Offset}, r.Value, "final read")
		c.learnKey(r)
		c.read[r.Value] = true
		final[r.Offset] = r.Value
		if r.Tombstone {
			c.tombs.read++
		}
		if k, ok := c.keyOf[r.Value]; ok {
			if o, seen := newest[k]; !seen || r.Offset > o {
				newest[k] = r.Offset
			}
		}
		if c.failed[r.Value] {
			c.violate(FailedWritten, "%q at partition %d offset %d was reported as never written", r.Value, part, r.Offset)
		}
	}
	if end := c.readEnd[part]; end > hw {
		c.violate(HighWatermark, "partition %d: offsets up to %d were read, the final high watermark is %d", part, end-1, hw)
	}
	// deletedAbove[k]: the highest offset of an acknowledged tombstone of
	// k in this partition.
	deletedAbove := map[string]int64{}
	for id, tb := range c.tombs.info {
		if p := c.acked[id]; p.part == part {
			if o, ok := deletedAbove[tb.key]; !ok || p.off > o {
				deletedAbove[tb.key] = p.off
			}
		}
	}
	now := c.tombs.now()
	var lost, back []string
	for v, p := range c.acked {
		if p.part != part || p.off < start {
			continue
		}
		got, ok := final[p.off]
		if got == v {
			continue
		}
		if ok {
			lost = append(lost, fmt.Sprintf("%q acknowledged at partition %d offset %d, final read has %q there", v, part, p.off, got))
			continue
		}
		k, known := c.keyOf[v]
		if o, seen := newest[k]; known && seen && o > p.off {
			continue // compacted below a newer record of its key
		}
		if o, deleted := deletedAbove[k]; known && (deleted && o > p.off || c.tombs.maybe[k]) {
			continue // below a tombstone of its key, which may have expired too
		}
		if tb, isTomb := c.tombs.info[v]; isTomb {
			if age := now.Sub(tb.ts); age >= c.tombs.retention {
				// Expired; its key must not have come back.
				c.tombs.expired++
				if o, seen := newest[k]; seen && o < p.off {
					back = append(back, fmt.Sprintf("key %q: its tombstone %q acknowledged at partition %d offset %d expired, but the older record at offset %d is the newest in the final read",
						k, v, part, p.off, o))
				}
				continue
			}
			lost = append(lost, fmt.Sprintf("tombstone %q (key %q) acknowledged at partition %d offset %d is not in the final read %v after its timestamp, within delete.retention.ms %v, and no newer record of its key is",
				v, k, part, p.off, now.Sub(tb.ts).Round(time.Millisecond), c.tombs.retention))
			continue
		}
		lost = append(lost, fmt.Sprintf("%q (key %q) acknowledged at partition %d offset %d is not in the final read, and no newer record (or tombstone) of its key is", v, k, part, p.off))
	}
	sort.Strings(lost)
	for _, l := range lost {
		c.violate(LostWrite, "%s", l)
	}
	sort.Strings(back)
	for _, l := range back {
		c.violate(Resurrected, "%s", l)
	}
}
