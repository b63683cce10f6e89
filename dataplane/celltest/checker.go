package celltest

import (
	"fmt"
	"sync"

	"github.com/sluicehq/sluice/dataplane/celltest/history"
)

// Checker records the Workload's history of produces and fetches on a cell
// and checks it with the history package's checker (the one cmd/chaos
// uses), in this package's terms: partitions as ints, records as decoded
// from a fetch. Safe for concurrent use.
type Checker struct {
	h *history.Checker
	// mu guards the field below.
	mu      sync.Mutex
	corrupt []string // fetches whose bytes did not decode
}

// NewChecker returns an empty checker.
func NewChecker() *Checker { return &Checker{h: history.New()} }

// Acked records that the batch of values was acknowledged at base.
func (c *Checker) Acked(part int, values []string, base int64) {
	for i, v := range values {
		c.h.Acked(int32(part), base+int64(i), v)
	}
}

// Failed records values whose produce definitely did not append them.
func (c *Checker) Failed(part int, values []string) {
	for _, v := range values {
		c.h.Failed(int32(part), v)
	}
}

// Read records one fetch by reader from offset from: the records it
// returned (already filtered to offsets ≥ from) and the high watermark.
func (c *Checker) Read(part int, reader string, from int64, recs []Record, hw int64) {
	c.h.Read(reader, int32(part), from, records(part, recs), hw)
}

// Final records a read of the whole partition, from offset 0 to hw, made
// after the faults healed, and checks the history of part against it.
func (c *Checker) Final(part int, recs []Record, hw int64) {
	c.h.Final(int32(part), records(part, recs), hw)
}

// AckedEnd is the offset after the highest acknowledged record of part.
func (c *Checker) AckedEnd(part int) int64 { return c.h.AckedEnd(int32(part)) }

// undecodable records a fetch whose bytes did not decode as batches.
func (c *Checker) undecodable(part int, from int64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.corrupt) < 10 {
		c.corrupt = append(c.corrupt, fmt.Sprintf("partition %d: undecodable fetch at %d: %v", part, from, err))
	}
}

// Errors returns every violation found; nil means the history is valid.
// Partitions without a Final read are reported too.
func (c *Checker) Errors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append(c.h.Result().Errors(), c.corrupt...)
}

// Summary counts acknowledged values and reads, for test logs.
func (c *Checker) Summary() string {
	r := c.h.Result()
	return fmt.Sprintf("%d acked, %d definitely failed, %d distinct values read", r.Acks, r.Failed, r.ValuesRead)
}

func records(part int, recs []Record) []history.Record {
	out := make([]history.Record, len(recs))
	for i, r := range recs {
		out[i] = history.Record{Part: int32(part), Offset: r.Offset, Value: string(r.Value)}
	}
	return out
}
