package history

import (
	"fmt"
	"sort"
	"sync"
)

// The properties the checker counts. All of them are about what was
// observed, never about timing.
const (
	// LostWrite: an acknowledged value is not at its acknowledged offset in
	// the final read of its partition (made after every fault healed, from
	// the log start to the high watermark), or the log start is above where
	// the history allowed it to move (MayTrim: retention, DeleteRecords).
	// A compacted checker excuses a value below a newer one of its key.
	LostWrite = "lost-write"
	// Duplicate: one value at two offsets (producers either never resend or
	// are idempotent, and every value is unique, so a retry must never
	// append twice).
	Duplicate = "duplicate"
	// InconsistentOffsets: one offset holding two values, across every
	// acknowledgement and every read.
	InconsistentOffsets = "inconsistent-offsets"
	// NonmonotonicPoll: within one read or consumer session, a partition's
	// records came back at an offset not above the last one read.
	NonmonotonicPoll = "nonmonotonic-poll"
	// PollSkip: within one read or consumer session, a partition's next
	// record is beyond the offset after the last one read (offsets are
	// dense, so any gap skips records), a session's first record is past
	// where it started, or the final read is not every offset from 0 to the
	// high watermark. A compacted checker (compacted.go) has gaps and
	// never counts one.
	PollSkip = "poll-skip"
	// HighWatermark: a reader saw a partition's high watermark go back, was
	// given a record at or above the high watermark it was given with it,
	// or read an offset the final high watermark no longer covers (what
	// was read was later lost).
	HighWatermark = "high-watermark"
	// FailedWritten: a value whose produce definitely did not append it is
	// in the final read.
	FailedWritten = "failed-written"
	// Resurrected (compacted checker only): a key's acknowledged tombstone
	// is gone from the final read while an older record of the key is the
	// newest there, so a deleted value came back (compacted.go).
	Resurrected = "resurrected"
)

// Properties lists the properties in summary order.
var Properties = []string{LostWrite, Duplicate, InconsistentOffsets, NonmonotonicPoll, PollSkip, HighWatermark, FailedWritten, Resurrected}

// examplesPerProperty bounds the violations kept as text per property.
const examplesPerProperty = 10

// Record is one record a client read.
type Record struct {
	Part   int32
	Offset int64
	Value  string
	Key    string // the record's key; only a compacted checker reads it (compacted.go)
	// Tombstone: the record has a null value (a delete on a compacted
	// topic); Value is then the unique id the workload put in a header.
	Tombstone bool
}

type at struct {
	part int32
	off  int64
}

// Checker records a history and counts violations of each property. Safe
// for concurrent use.
type Checker struct {
	// mu guards the fields below.
	mu       sync.Mutex
	acked    map[string]at // value → acknowledged position
	failed   map[string]bool
	valueAt  map[at]string              // position → the first value seen there
	where    map[string]at              // value → the first position it was seen at
	read     map[string]bool            // values read, the final reads included
	readEnd  map[int32]int64            // partition → highest offset read + 1
	hw       map[string]map[int32]int64 // reader → partition → last high watermark
	sessions map[string]map[int32]int64 // session → partition → offset after the last record read
	anywhere map[string]bool
	touched  map[int32]bool // partitions that must have a final read
	final    map[int32]bool
	trimmed  map[int32]int64 // partition → the log start may have been moved up to here (trim.go)
	counts   map[string]int
	examples map[string][]string
	acks     int
	polls    int
	records  int
	group    int // records polled by sessions started anywhere (group members)
	// compacted: the log is compacted (NewCompacted): offsets may have
	// gaps, and a record may vanish below a newer one of its key.
	compacted bool
	keyOf     map[string]string // value → its key (compacted.go)
	tombs     *tombstones       // the deletes of a compacted history (compacted.go)
}

// New returns an empty checker.
func New() *Checker {
	return &Checker{acked: map[string]at{}, failed: map[string]bool{}, valueAt: map[at]string{}, where: map[string]at{},
		read: map[string]bool{}, readEnd: map[int32]int64{}, hw: map[string]map[int32]int64{},
		sessions: map[string]map[int32]int64{}, anywhere: map[string]bool{}, touched: map[int32]bool{},
		final: map[int32]bool{}, trimmed: map[int32]int64{}, counts: map[string]int{}, examples: map[string][]string{},
		keyOf: map[string]string{}, tombs: newTombstones()}
}

func (c *Checker) violate(prop, format string, args ...any) {
	c.counts[prop]++
	if len(c.examples[prop]) < examplesPerProperty {
		c.examples[prop] = append(c.examples[prop], fmt.Sprintf(format, args...))
	}
}

// observe records value v at p, from an ack or a read.
func (c *Checker) observe(p at, v, how string) {
	if old, ok := c.valueAt[p]; ok && old != v {
		c.violate(InconsistentOffsets, "partition %d offset %d holds %q and %q (%s)", p.part, p.off, old, v, how)
	} else if !ok {
		c.valueAt[p] = v
	}
	if w, ok := c.where[v]; ok && w != p {
		c.violate(Duplicate, "%q at partition %d offset %d and partition %d offset %d (%s)", v, w.part, w.off, p.part, p.off, how)
	} else if !ok {
		c.where[v] = p
	}
}

// observeRead is observe for a record a client read.
func (c *Checker) observeRead(r Record, how string) {
	c.observe(at{r.Part, r.Offset}, r.Value, how)
	c.learnKey(r)
	c.read[r.Value] = true
	c.readEnd[r.Part] = max(c.readEnd[r.Part], r.Offset+1)
}

// Acked records that value was acknowledged at partition part, offset off.
func (c *Checker) Acked(part int32, off int64, value string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.acks++
	c.touched[part] = true
	p := at{part, off}
	if old, ok := c.acked[value]; ok && old != p {
		c.violate(Duplicate, "%q acknowledged at partition %d offset %d and partition %d offset %d", value, old.part, old.off, part, off)
	}
	c.acked[value] = p
	c.observe(p, value, "ack")
}

// Failed records that the produce of value to part definitely did not
// append it.
func (c *Checker) Failed(part int32, value string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.touched[part] = true
	c.failed[value] = true
}

// step checks that r is at next, the offset after the last record read
// from its partition (next < 0: the first record sets where reading
// starts), and reports whether it is.
func (c *Checker) step(who string, next int64, r Record) bool {
	switch {
	case next < 0:
	case r.Offset < next:
		c.violate(NonmonotonicPoll, "%s: partition %d went back to offset %d after reading up to %d", who, r.Part, r.Offset, next-1)
		return false
	case r.Offset > next && !c.compacted:
		c.violate(PollSkip, "%s: partition %d jumped from offset %d to %d, skipping %d records", who, r.Part, next, r.Offset, r.Offset-next)
		return false
	}
	return true
}

// Read records one fetch by reader of partition part from offset from: the
// records it returned (already filtered to offsets ≥ from), which must be
// consecutive from from and below hw, the high watermark returned with
// them, which must not go back for one reader.
func (c *Checker) Read(reader string, part int32, from int64, recs []Record, hw int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.touched[part] = true
	last, ok := c.hw[reader][part]
	if ok && hw < last {
		c.violate(HighWatermark, "%s: partition %d: the high watermark went back from %d to %d", reader, part, last, hw)
	}
	if c.hw[reader] == nil {
		c.hw[reader] = map[int32]int64{}
	}
	c.hw[reader][part] = max(last, hw)
	next := from
	for _, r := range recs {
		if !c.step(reader, next, r) {
			return
		}
		next = r.Offset + 1
		if r.Offset >= hw {
			c.violate(HighWatermark, "%s: partition %d: read offset %d at or above the high watermark %d", reader, part, r.Offset, hw)
		}
		c.observeRead(r, "read by "+reader)
	}
}

// StartSession begins consumer session sess, which reads partition part
// from offset from (a fresh client, an assignment after a rebalance, or a
// seek). Records of partitions without a started session are checked only
// for consistency.
func (c *Checker) StartSession(sess string, part int32, from int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessions[sess] == nil {
		c.sessions[sess] = map[int32]int64{}
	}
	c.sessions[sess][part] = from
}

// StartSessionAnywhere begins session sess on partition part at an offset
// the checker learns from the session's first record: a group member's
// assignment, which starts from the group's committed offset.
func (c *Checker) StartSessionAnywhere(sess string, part int32) {
	c.StartSession(sess, part, -1)
	c.mu.Lock()
	c.anywhere[sess] = true
	c.mu.Unlock()
}

// EndSession forgets a session's position in part (it was revoked).
func (c *Checker) EndSession(sess string, part int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.sessions[sess], part)
}

// Polled records the records of one poll by session sess, in the order the
// client returned them.
func (c *Checker) Polled(sess string, recs []Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.polls++
	c.records += len(recs)
	if c.anywhere[sess] {
		c.group += len(recs)
	}
	s := c.sessions[sess]
	for _, r := range recs {
		c.observeRead(r, "poll by "+sess)
		if next, ok := s[r.Part]; ok {
			c.step(sess, next, r)
			s[r.Part] = r.Offset + 1
		}
	}
}

// Final records a read of all of partition part, from offset 0 to its high
// watermark hw, made after every fault healed, and checks the partition's
// history against it.
func (c *Checker) Final(part int32, recs []Record, hw int64) { c.FinalFrom(part, 0, recs, hw) }

// FinalFrom is Final for a read from the partition's log start, start,
// which may be above 0 only as far as MayTrim allowed; acknowledged values
// below it are not lost writes.
func (c *Checker) FinalFrom(part int32, start int64, recs []Record, hw int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.final[part] = true
	if c.compacted {
		c.finalCompacted(part, start, recs, hw)
		return
	}
	if start > c.trimmed[part] {
		c.violate(LostWrite, "final read of partition %d starts at its log start %d, but the log start was moved only up to %d", part, start, c.trimmed[part])
	}
	if int64(len(recs)) != hw-start {
		c.violate(PollSkip, "final read of partition %d: %d records from %d below the high watermark %d", part, len(recs), start, hw)
	}
	final := make(map[int64]string, len(recs))
	for i, r := range recs {
		if r.Offset != start+int64(i) {
			c.violate(PollSkip, "final read of partition %d: record %d has offset %d", part, i, r.Offset)
		}
		c.observe(at{part, r.Offset}, r.Value, "final read")
		c.read[r.Value] = true
		final[r.Offset] = r.Value
		if c.failed[r.Value] {
			c.violate(FailedWritten, "%q at partition %d offset %d was reported as never written", r.Value, part, r.Offset)
		}
	}
	if end := c.readEnd[part]; end > hw {
		c.violate(HighWatermark, "partition %d: offsets up to %d were read, the final high watermark is %d", part, end-1, hw)
	}
	var lost []string
	for v, p := range c.acked {
		if p.part == part && p.off >= start && final[p.off] != v {
			lost = append(lost, fmt.Sprintf("%q acknowledged at partition %d offset %d, final read has %q there", v, p.part, p.off, final[p.off]))
		}
	}
	sort.Strings(lost)
	for _, l := range lost {
		c.violate(LostWrite, "%s", l)
	}
}

// AckedEnd is the offset after the highest acknowledged offset of part.
func (c *Checker) AckedEnd(part int32) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var end int64
	for _, p := range c.acked {
		if p.part == part {
			end = max(end, p.off+1)
		}
	}
	return end
}
