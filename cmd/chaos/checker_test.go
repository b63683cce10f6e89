package main

import "testing"

// Each property is detected on a history that violates only it, and a
// valid history counts nothing.
func TestCheckerProperties(t *testing.T) {
	recs := func(part int32, from int64, vals ...string) []Record {
		out := make([]Record, len(vals))
		for i, v := range vals {
			out[i] = Record{Part: part, Offset: from + int64(i), Value: v}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		run  func(c *Checker)
		want string // the one property violated; "" for none
	}{
		{"valid", func(c *Checker) {
			c.Acked("a", 0, 0)
			c.Acked("b", 0, 1)
			c.StartSession("s", 0, 0)
			c.Polled("s", recs(0, 0, "a"))
			c.Polled("s", recs(0, 1, "b"))
			c.Final(0, recs(0, 0, "a", "b"))
		}, ""},
		{"lost write", func(c *Checker) {
			c.Acked("a", 0, 0)
			c.Acked("b", 0, 1)
			c.Final(0, recs(0, 0, "a"))
		}, LostWrite},
		{"duplicate", func(c *Checker) {
			c.Acked("a", 0, 0)
			c.Final(0, recs(0, 0, "a", "a"))
		}, Duplicate},
		{"inconsistent offsets", func(c *Checker) {
			c.Acked("a", 0, 0)
			c.StartSession("s", 0, 0)
			c.Polled("s", recs(0, 0, "x"))
			c.Final(0, recs(0, 0, "a"))
		}, InconsistentOffsets},
		{"nonmonotonic poll", func(c *Checker) {
			c.StartSession("s", 0, 0)
			c.Polled("s", recs(0, 0, "a", "b"))
			c.Polled("s", recs(0, 1, "b"))
			c.Final(0, recs(0, 0, "a", "b"))
		}, NonmonotonicPoll},
		{"poll skip", func(c *Checker) {
			c.StartSession("s", 0, 0)
			c.Polled("s", recs(0, 0, "a"))
			c.Polled("s", recs(0, 2, "c"))
			c.Final(0, recs(0, 0, "a", "b", "c"))
		}, PollSkip},
		{"a new session may start anywhere", func(c *Checker) {
			c.StartSession("s1", 0, 0)
			c.Polled("s1", recs(0, 0, "a", "b"))
			c.StartSession("s2", 0, 1)
			c.Polled("s2", recs(0, 1, "b", "c"))
			c.Final(0, recs(0, 0, "a", "b", "c"))
		}, ""},
		{"a session's first record must be where it started", func(c *Checker) {
			c.StartSession("s", 0, 0)
			c.Polled("s", recs(0, 1, "b"))
			c.Final(0, recs(0, 0, "a", "b"))
		}, PollSkip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChecker()
			tc.run(c)
			res := c.Result()
			for _, p := range Properties {
				want := 0
				if p == tc.want {
					want = 1
				}
				if (res.Counts[p] > 0) != (want > 0) {
					t.Errorf("%s: %d violations, want %d: %v", p, res.Counts[p], want, res.Examples[p])
				}
			}
			if res.Valid() != (tc.want == "") {
				t.Errorf("Valid() = %v", res.Valid())
			}
		})
	}
}

// A partition with acknowledged writes but no final read makes the result
// invalid: nothing goes unchecked silently.
func TestCheckerUncheckedPartition(t *testing.T) {
	c := NewChecker()
	c.Acked("a", 3, 0)
	if res := c.Result(); res.Valid() || len(res.Unchecked) != 1 || res.Unchecked[0] != 3 {
		t.Fatalf("result %+v: want partition 3 unchecked and the result invalid", res)
	}
}
