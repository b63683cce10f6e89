package history

import (
	"fmt"
	"sort"
)

// Result is what the checker found.
type Result struct {
	Acks, Failed   int // values acknowledged, values definitely not written
	ValuesRead     int // distinct values read (reads and polls)
	Polls, Records int
	GroupRecords   int // of Records, polled by group members
	Counts         map[string]int
	Examples       map[string][]string // at most 10 per property
	// Unchecked lists partitions with acknowledged, failed or read writes
	// but no final read.
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

// Errors lists the violations as text, nil for a valid result.
func (r Result) Errors() []string {
	var out []string
	for _, p := range Properties {
		for _, e := range r.Examples[p] {
			out = append(out, p+": "+e)
		}
		if n := r.Counts[p]; n > len(r.Examples[p]) {
			out = append(out, fmt.Sprintf("%s: ... %d in all", p, n))
		}
	}
	for _, p := range r.Unchecked {
		out = append(out, fmt.Sprintf("partition %d: no final read", p))
	}
	return out
}

// Result returns the counts so far.
func (c *Checker) Result() Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := Result{Acks: c.acks, Failed: len(c.failed), ValuesRead: len(c.read), Polls: c.polls, Records: c.records,
		GroupRecords: c.group, Counts: map[string]int{}, Examples: map[string][]string{}}
	for _, p := range Properties {
		r.Counts[p] = c.counts[p]
		r.Examples[p] = append([]string(nil), c.examples[p]...)
	}
	for p := range c.touched {
		if !c.final[p] {
			r.Unchecked = append(r.Unchecked, p)
		}
	}
	sort.Slice(r.Unchecked, func(i, j int) bool { return r.Unchecked[i] < r.Unchecked[j] })
	return r
}
