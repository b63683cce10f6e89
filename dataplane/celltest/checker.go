package celltest

import (
	"fmt"
	"sort"
	"sync"
)

// Checker records a history of produces and fetches on a cell and checks
// it against the delivery contract, after Jepsen's Kafka checker:
//
//   - lost write: every acknowledged value is at its acknowledged offset
//     in the final read;
//   - inconsistent offsets: no offset ever held two values, across every
//     read and acknowledgement;
//   - duplicate: no value is at two offsets (producers never resend);
//   - dense offsets: every read returned consecutive offsets from where it
//     started, and the final read covers 0 to the high watermark;
//   - monotonic high watermark, per reader;
//   - nothing read is later lost: everything read is in the final read;
//   - a produce that failed definitely (never appended) never appears.
//
// All of it is about what was observed, never about timing. Safe for
// concurrent use.
type Checker struct {
	// mu guards the fields below.
	mu     sync.Mutex
	parts  map[int]*history
	errors []string
}

type history struct {
	acked   map[string]int64 // value → acknowledged offset
	failed  map[string]bool  // definitely not written
	seen    map[int64]string // offset → value, across reads and acks
	where   map[string]int64 // value → offset it was read at
	readMax int64            // highest offset read + 1
	hw      map[string]int64 // reader → last high watermark
	final   bool
}

// NewChecker returns an empty checker.
func NewChecker() *Checker { return &Checker{parts: map[int]*history{}} }

func (c *Checker) part(p int) *history {
	h := c.parts[p]
	if h == nil {
		h = &history{acked: map[string]int64{}, failed: map[string]bool{}, seen: map[int64]string{},
			where: map[string]int64{}, hw: map[string]int64{}}
		c.parts[p] = h
	}
	return h
}

func (c *Checker) errorf(format string, args ...any) {
	if len(c.errors) < 50 {
		c.errors = append(c.errors, fmt.Sprintf(format, args...))
	}
}

// Acked records that the batch of values was acknowledged at base.
func (c *Checker) Acked(part int, values []string, base int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.part(part)
	for i, v := range values {
		off := base + int64(i)
		h.acked[v] = off
		c.observe(part, h, off, v, "ack")
	}
}

// Failed records values whose produce definitely did not append them.
func (c *Checker) Failed(part int, values []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range values {
		c.part(part).failed[v] = true
	}
}

func (c *Checker) observe(part int, h *history, off int64, v, how string) {
	if old, ok := h.seen[off]; ok && old != v {
		c.errorf("partition %d: inconsistent offsets: offset %d holds %q and %q (%s)", part, off, old, v, how)
		return
	}
	h.seen[off] = v
	if how == "ack" {
		return
	}
	if o, ok := h.where[v]; ok && o != off {
		c.errorf("partition %d: duplicate: %q at offsets %d and %d", part, v, o, off)
	}
	h.where[v] = off
	h.readMax = max(h.readMax, off+1)
}

// Read records one fetch by reader from offset from: the records it
// returned (already filtered to offsets ≥ from) and the high watermark.
func (c *Checker) Read(part int, reader string, from int64, recs []Record, hw int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.part(part)
	if last, ok := h.hw[reader]; ok && hw < last {
		c.errorf("partition %d: reader %s saw the high watermark go back from %d to %d", part, reader, last, hw)
	}
	h.hw[reader] = max(h.hw[reader], hw)
	for i, r := range recs {
		if r.Offset != from+int64(i) {
			c.errorf("partition %d: reader %s: offsets not dense: read from %d, record %d has offset %d", part, reader, from, i, r.Offset)
			return
		}
		if r.Offset >= hw {
			c.errorf("partition %d: reader %s read offset %d at or above the high watermark %d", part, reader, r.Offset, hw)
		}
		c.observe(part, h, r.Offset, string(r.Value), "read")
	}
}

// Final records a read of the whole partition, from offset 0 to hw, made
// after the faults healed, and checks the history of part against it.
func (c *Checker) Final(part int, recs []Record, hw int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.part(part)
	h.final = true
	if int64(len(recs)) != hw {
		c.errorf("partition %d: final read has %d records below high watermark %d", part, len(recs), hw)
	}
	final := make(map[int64]string, len(recs))
	for i, r := range recs {
		if r.Offset != int64(i) {
			c.errorf("partition %d: final read: offsets not dense from 0: record %d has offset %d", part, i, r.Offset)
			break
		}
		final[r.Offset] = string(r.Value)
		c.observe(part, h, r.Offset, string(r.Value), "final read")
	}
	if h.readMax > hw {
		c.errorf("partition %d: offsets up to %d were read, final high watermark is %d", part, h.readMax-1, hw)
	}
	var lost []string
	for v, off := range h.acked {
		if final[off] != v {
			lost = append(lost, fmt.Sprintf("%q@%d (found %q)", v, off, final[off]))
		}
	}
	sort.Strings(lost)
	for i, l := range lost {
		if i == 10 {
			c.errorf("partition %d: ... %d lost writes in all", part, len(lost))
			break
		}
		c.errorf("partition %d: lost write: acknowledged %s", part, l)
	}
	for off, v := range final {
		if h.failed[v] {
			c.errorf("partition %d: %q at offset %d was reported as never written", part, v, off)
		}
	}
}

// Errors returns every violation found; nil means the history is valid.
// Partitions without a Final read are reported too.
func (c *Checker) Errors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := append([]string(nil), c.errors...)
	for p, h := range c.parts {
		if !h.final {
			out = append(out, fmt.Sprintf("partition %d: no final read", p))
		}
	}
	return out
}

// Summary counts acknowledged values and reads, for test logs.
func (c *Checker) Summary() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	acked, failed, read := 0, 0, 0
	for _, h := range c.parts {
		acked += len(h.acked)
		failed += len(h.failed)
		read += len(h.where)
	}
	return fmt.Sprintf("%d acked, %d definitely failed, %d distinct values read", acked, failed, read)
}
