package history

import (
	"fmt"
	"sort"
)

// The compaction model (NewCompacted), for a topic with
// cleanup.policy=compact and no tombstones in its history: offsets still
// never name two values and records still come back in offset order, but
// a compacted log has gaps, and a record may vanish from the final read
// only if a newer record of its key is there, at a higher offset. So each
// key's last acknowledged value survives at its acknowledged offset unless
// a later write of the key (one whose produce failed ambiguously, and did
// append) is in the log above it. The properties keep their names:
// LostWrite counts an acknowledged value missing without a newer record of
// its key above it, NonmonotonicPoll a final read out of offset order;
// PollSkip never fires on a gap.

// NewCompacted returns an empty checker for a compacted log.
func NewCompacted() *Checker {
	c := New()
	c.compacted = true
	return c
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
	var lost []string
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
		lost = append(lost, fmt.Sprintf("%q (key %q) acknowledged at partition %d offset %d is not in the final read, and no newer record of its key is", v, k, part, p.off))
	}
	sort.Strings(lost)
	for _, l := range lost {
		c.violate(LostWrite, "%s", l)
	}
}
