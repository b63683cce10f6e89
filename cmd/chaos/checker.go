package main

import (
	"fmt"
	"sort"
	"sync"
)

// The properties the checker counts, after Jepsen's Kafka checker.
const (
	// LostWrite: an acknowledged value is missing from the final read of
	// its partition (made after every fault healed, from offset 0 to the
	// high watermark).
	LostWrite = "lost-write"
	// Duplicate: one value at two offsets (the producers are idempotent and
	// every value is unique, so a retry must never append twice).
	Duplicate = "duplicate"
	// InconsistentOffsets: one offset holding two values, across every
	// acknowledgement and every read.
	InconsistentOffsets = "inconsistent-offsets"
	// NonmonotonicPoll: within one consumer session (no rebalance, no
	// seek), a partition's records came back at an offset not above the
	// last one that session read.
	NonmonotonicPoll = "nonmonotonic-poll"
	// PollSkip: within one consumer session, a partition's next record is
	// beyond the offset after the last one read (offsets are dense, so any
	// gap skips records), or a session's first record is past where it
	// started reading.
	PollSkip = "poll-skip"
)

// Properties lists the properties in summary order.
var Properties = []string{LostWrite, Duplicate, InconsistentOffsets, NonmonotonicPoll, PollSkip}

type at struct {
	part int32
	off  int64
}

// Checker records a history of acknowledged produces and consumer polls and
// counts violations of each property. Safe for concurrent use.
type Checker struct {
	// mu guards the fields below.
	mu       sync.Mutex
	acked    map[string]at // value → acknowledged position
	valueAt  map[at]string // position → the first value seen there
	where    map[string]at // value → the first position it was seen at
	sessions map[string]*session
	counts   map[string]int
	examples map[string][]string
	acks     int
	polls    int
	records  int
	group    int // records polled by sessions started anywhere (group members)
	anywhere map[string]bool
	final    map[int32]bool
}

type session struct {
	next map[int32]int64 // partition → offset after the last record read
}

// NewChecker returns an empty checker.
func NewChecker() *Checker {
	return &Checker{acked: map[string]at{}, valueAt: map[at]string{}, where: map[string]at{},
		sessions: map[string]*session{}, anywhere: map[string]bool{}, counts: map[string]int{}, examples: map[string][]string{},
		final: map[int32]bool{}}
}

func (c *Checker) violate(prop, format string, args ...any) {
	c.counts[prop]++
	if len(c.examples[prop]) < 10 {
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

// Acked records that a producer's record with value was acknowledged at
// partition part, offset off.
func (c *Checker) Acked(value string, part int32, off int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.acks++
	p := at{part, off}
	if old, ok := c.acked[value]; ok && old != p {
		c.violate(Duplicate, "%q acknowledged at partition %d offset %d and partition %d offset %d", value, old.part, old.off, part, off)
	}
	c.acked[value] = p
	c.observe(p, value, "ack")
}

// Record is one record a consumer polled.
type Record struct {
	Part   int32
	Offset int64
	Value  string
}

// StartSession begins consumer session sess, which reads partition part
// from offset from (a fresh client, an assignment after a rebalance, or a
// seek). Records of partitions without a started session are checked only
// for consistency.
func (c *Checker) StartSession(sess string, part int32, from int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[sess]
	if s == nil {
		s = &session{next: map[int32]int64{}}
		c.sessions[sess] = s
	}
	s.next[part] = from
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

// EndSession forgets a session's positions (its partitions were revoked).
func (c *Checker) EndSession(sess string, part int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.sessions[sess]; s != nil {
		delete(s.next, part)
	}
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
		c.observe(at{r.Part, r.Offset}, r.Value, "poll by "+sess)
		if s == nil {
			continue
		}
		next, ok := s.next[r.Part]
		if !ok {
			continue
		}
		switch {
		case next < 0: // the session's first record sets where it starts
		case r.Offset < next:
			c.violate(NonmonotonicPoll, "%s: partition %d went back to offset %d after reading up to %d", sess, r.Part, r.Offset, next-1)
		case r.Offset > next:
			c.violate(PollSkip, "%s: partition %d jumped from offset %d to %d, skipping %d records", sess, r.Part, next, r.Offset, r.Offset-next)
		}
		s.next[r.Part] = r.Offset + 1
	}
}

// Final records a read of all of partition part, from offset 0 to its
// high watermark, made after every fault healed, and checks that every
// acknowledged value of the partition is in it at its acknowledged offset.
func (c *Checker) Final(part int32, recs []Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.final[part] = true
	in := make(map[string]int64, len(recs))
	for i, r := range recs {
		if r.Offset != int64(i) {
			c.violate(PollSkip, "final read of partition %d: record %d has offset %d", part, i, r.Offset)
		}
		c.observe(at{part, r.Offset}, r.Value, "final read")
		in[r.Value] = r.Offset
	}
	var lost []string
	for v, p := range c.acked {
		if p.part != part {
			continue
		}
		if _, ok := in[v]; !ok {
			lost = append(lost, fmt.Sprintf("%q acknowledged at partition %d offset %d", v, p.part, p.off))
		}
	}
	sort.Strings(lost)
	for _, l := range lost {
		c.violate(LostWrite, "%s, absent from the final read", l)
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

// Result is what the checker found.
type Result struct {
	Acks, Polls, Records int
	GroupRecords         int // of Records, polled by group members
	Counts               map[string]int
	Examples             map[string][]string
	// Unchecked lists partitions with acknowledged writes but no final read.
	Unchecked []int32
}

// Valid reports whether no property was violated and every partition was
// read to the end.
func (r Result) Valid() bool {
	for _, n := range r.Counts {
		if n > 0 {
			return false
		}
	}
	return len(r.Unchecked) == 0
}

// Result returns the counts so far.
func (c *Checker) Result() Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := Result{Acks: c.acks, Polls: c.polls, Records: c.records, GroupRecords: c.group, Counts: map[string]int{}, Examples: map[string][]string{}}
	for _, p := range Properties {
		r.Counts[p] = c.counts[p]
		r.Examples[p] = append([]string(nil), c.examples[p]...)
	}
	parts := map[int32]bool{}
	for _, p := range c.acked {
		parts[p.part] = true
	}
	for p := range parts {
		if !c.final[p] {
			r.Unchecked = append(r.Unchecked, p)
		}
	}
	sort.Slice(r.Unchecked, func(i, j int) bool { return r.Unchecked[i] < r.Unchecked[j] })
	return r
}
