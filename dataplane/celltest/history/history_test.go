package history

import (
	"testing"
	"time"
)

func recs(part int32, from int64, vals ...string) []Record {
	out := make([]Record, len(vals))
	for i, v := range vals {
		out[i] = Record{Part: part, Offset: from + int64(i), Value: v}
	}
	return out
}

// Each property is detected on a history that violates only it, and a
// valid history counts nothing.
func TestCheckerProperties(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(c *Checker)
		want string // the one property violated; "" for none
	}{
		{"valid polls", func(c *Checker) {
			c.Acked(0, 0, "a")
			c.Acked(0, 1, "b")
			c.StartSession("s", 0, 0)
			c.Polled("s", recs(0, 0, "a"))
			c.Polled("s", recs(0, 1, "b"))
			c.Final(0, recs(0, 0, "a", "b"), 2)
		}, ""},
		{"valid reads", func(c *Checker) {
			c.Acked(0, 0, "a")
			c.Acked(0, 1, "b")
			c.Read("r", 0, 0, recs(0, 0, "a"), 1)
			c.Read("r", 0, 1, recs(0, 1, "b"), 2)
			c.Final(0, recs(0, 0, "a", "b", "c"), 3)
		}, ""},
		{"lost write", func(c *Checker) {
			c.Acked(0, 0, "a")
			c.Acked(0, 1, "b")
			c.Final(0, recs(0, 0, "a"), 1)
		}, LostWrite},
		{"duplicate", func(c *Checker) {
			c.Acked(0, 0, "a")
			c.Final(0, recs(0, 0, "a", "a"), 2)
		}, Duplicate},
		{"duplicate in reads only", func(c *Checker) {
			c.Final(0, recs(0, 0, "a", "a"), 2)
		}, Duplicate},
		{"inconsistent offsets", func(c *Checker) {
			c.Acked(0, 0, "a")
			c.StartSession("s", 0, 0)
			c.Polled("s", recs(0, 0, "x"))
			c.Final(0, recs(0, 0, "a"), 1)
		}, InconsistentOffsets},
		{"nonmonotonic poll", func(c *Checker) {
			c.StartSession("s", 0, 0)
			c.Polled("s", recs(0, 0, "a", "b"))
			c.Polled("s", recs(0, 1, "b"))
			c.Final(0, recs(0, 0, "a", "b"), 2)
		}, NonmonotonicPoll},
		{"poll skip", func(c *Checker) {
			c.StartSession("s", 0, 0)
			c.Polled("s", recs(0, 0, "a"))
			c.Polled("s", recs(0, 2, "c"))
			c.Final(0, recs(0, 0, "a", "b", "c"), 3)
		}, PollSkip},
		{"offset gap in a read", func(c *Checker) {
			c.Read("r", 0, 0, []Record{{Offset: 0, Value: "a"}, {Offset: 2, Value: "b"}}, 3)
			c.Final(0, []Record{{Offset: 0, Value: "a"}, {Offset: 1, Value: "x"}, {Offset: 2, Value: "b"}}, 3)
		}, PollSkip},
		{"final read short of the high watermark", func(c *Checker) {
			c.Final(0, recs(0, 0, "a"), 2)
		}, PollSkip},
		{"a new session may start anywhere", func(c *Checker) {
			c.StartSession("s1", 0, 0)
			c.Polled("s1", recs(0, 0, "a", "b"))
			c.StartSession("s2", 0, 1)
			c.Polled("s2", recs(0, 1, "b", "c"))
			c.Final(0, recs(0, 0, "a", "b", "c"), 3)
		}, ""},
		{"a group member starts where its first record is", func(c *Checker) {
			c.StartSessionAnywhere("g", 0)
			c.Polled("g", recs(0, 1, "b", "c"))
			c.Final(0, recs(0, 0, "a", "b", "c"), 3)
		}, ""},
		{"a session's first record must be where it started", func(c *Checker) {
			c.StartSession("s", 0, 0)
			c.Polled("s", recs(0, 1, "b"))
			c.Final(0, recs(0, 0, "a", "b"), 2)
		}, PollSkip},
		{"high watermark back", func(c *Checker) {
			c.Read("r", 0, 0, nil, 5)
			c.Read("r", 0, 0, nil, 4)
			c.Final(0, recs(0, 0, "a", "b", "c", "d", "e"), 5)
		}, HighWatermark},
		{"read above the high watermark", func(c *Checker) {
			c.Read("r", 0, 0, recs(0, 0, "a", "b"), 1)
			c.Final(0, recs(0, 0, "a", "b"), 2)
		}, HighWatermark},
		{"read then lost", func(c *Checker) {
			c.Read("r", 0, 0, recs(0, 0, "a", "b"), 2)
			c.Final(0, recs(0, 0, "a"), 1)
		}, HighWatermark},
		{"failed write appears", func(c *Checker) {
			c.Failed(0, "a")
			c.Final(0, recs(0, 0, "a"), 1)
		}, FailedWritten},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New()
			tc.run(c)
			res := c.Result()
			checkViolated(t, res, tc.want)
			if (len(res.Errors()) == 0) != (tc.want == "") {
				t.Errorf("Errors() = %v", res.Errors())
			}
		})
	}
}

// A partition with acknowledged, failed or read writes but no final read
// makes the result invalid: nothing goes unchecked silently.
func TestCheckerUncheckedPartition(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(c *Checker)
	}{
		{"acked", func(c *Checker) { c.Acked(3, 0, "a") }},
		{"failed", func(c *Checker) { c.Failed(3, "a") }},
		{"read", func(c *Checker) { c.Read("r", 3, 0, nil, 0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New()
			tc.run(c)
			if res := c.Result(); res.Valid() || len(res.Unchecked) != 1 || res.Unchecked[0] != 3 || len(res.Errors()) != 1 {
				t.Fatalf("result %+v: want partition 3 unchecked and the result invalid", res)
			}
		})
	}
}

// Errors keeps ten examples of a property and counts the rest.
func TestErrorsBounded(t *testing.T) {
	c := New()
	for i := int64(0); i < 25; i++ {
		c.Acked(0, i, string(rune('a'+i)))
	}
	c.Final(0, nil, 0)
	res := c.Result()
	if res.Counts[LostWrite] != 25 || len(res.Examples[LostWrite]) != examplesPerProperty || len(res.Errors()) != examplesPerProperty+1 {
		t.Fatalf("counts %v, %d errors: %v", res.Counts, len(res.Errors()), res.Errors())
	}
}

func krec(part int32, off int64, key, val string) Record {
	return Record{Part: part, Offset: off, Key: key, Value: val}
}

// ktomb is a tombstone of key read back, with the id it carries.
func ktomb(part int32, off int64, key, id string) Record {
	return Record{Part: part, Offset: off, Key: key, Value: id, Tombstone: true}
}

// tombNow is the final reads' clock in the tombstone cases.
var tombNow = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// The compaction model: each property fires on a history that breaks only
// it, and a compacted history that is valid (gaps, records vanished below
// a newer one of their key) counts nothing, while the dense checker
// rejects the same history.
func TestCompactedCheckerProperties(t *testing.T) {
	// acks: k1=a@0, k2=b@1, k1=c@2.
	acks := func(c *Checker) {
		c.AckedKey(0, 0, "k1", "a")
		c.AckedKey(0, 1, "k2", "b")
		c.AckedKey(0, 2, "k1", "c")
	}
	for _, tc := range []struct {
		name  string
		run   func(c *Checker)
		want  string // the one property violated; "" for none
		dense bool   // the dense checker also accepts the history
	}{
		{"compacted below a newer record", func(c *Checker) {
			acks(c)
			c.StartSession("s", 0, 0)
			c.Polled("s", []Record{krec(0, 1, "k2", "b"), krec(0, 2, "k1", "c")})
			c.Read("r", 0, 0, []Record{krec(0, 1, "k2", "b")}, 3)
			c.Final(0, []Record{krec(0, 1, "k2", "b"), krec(0, 2, "k1", "c")}, 3)
		}, "", false},
		{"uncompacted", func(c *Checker) {
			acks(c)
			c.Final(0, []Record{krec(0, 0, "k1", "a"), krec(0, 1, "k2", "b"), krec(0, 2, "k1", "c")}, 3)
		}, "", true},
		{"below a newer record never acknowledged", func(c *Checker) {
			c.AckedKey(0, 0, "k1", "a")
			c.Final(0, []Record{krec(0, 1, "k1", "x")}, 2)
		}, "", false},
		{"the newest value lost, an older one kept", func(c *Checker) {
			acks(c)
			c.Final(0, []Record{krec(0, 0, "k1", "a"), krec(0, 1, "k2", "b")}, 3)
		}, LostWrite, false},
		{"vanished below a newer record of another key only", func(c *Checker) {
			acks(c)
			c.Final(0, []Record{krec(0, 2, "k1", "c")}, 3)
		}, LostWrite, false},
		{"final read out of offset order", func(c *Checker) {
			acks(c)
			c.Final(0, []Record{krec(0, 2, "k1", "c"), krec(0, 1, "k2", "b")}, 3)
		}, NonmonotonicPoll, false},
		{"a poll goes back", func(c *Checker) {
			acks(c)
			c.StartSession("s", 0, 0)
			c.Polled("s", []Record{krec(0, 2, "k1", "c")})
			c.Polled("s", []Record{krec(0, 1, "k2", "b")})
			c.Final(0, []Record{krec(0, 1, "k2", "b"), krec(0, 2, "k1", "c")}, 3)
		}, NonmonotonicPoll, false},
		{"an offset reused", func(c *Checker) {
			acks(c)
			c.StartSession("s", 0, 0)
			c.Polled("s", []Record{krec(0, 1, "k2", "x")})
			c.Final(0, []Record{krec(0, 1, "k2", "b"), krec(0, 2, "k1", "c")}, 3)
		}, InconsistentOffsets, false},
		{"a value read with another key", func(c *Checker) {
			acks(c)
			c.Final(0, []Record{krec(0, 1, "k3", "b"), krec(0, 2, "k1", "c")}, 3)
		}, InconsistentOffsets, false},
		{"duplicate", func(c *Checker) {
			acks(c)
			c.Final(0, []Record{krec(0, 1, "k2", "b"), krec(0, 2, "k1", "c"), krec(0, 3, "k1", "c")}, 4)
		}, Duplicate, false},
		{"failed write appears", func(c *Checker) {
			acks(c)
			c.Failed(0, "f")
			c.Final(0, []Record{krec(0, 1, "k2", "b"), krec(0, 2, "k1", "c"), krec(0, 3, "k2", "f")}, 4)
		}, FailedWritten, false},
		{"final read above its high watermark", func(c *Checker) {
			acks(c)
			c.Final(0, []Record{krec(0, 1, "k2", "b"), krec(0, 2, "k1", "c")}, 2)
		}, HighWatermark, false},
		{"a tombstone kept within delete.retention.ms, its key's values gone", func(c *Checker) {
			acks(c)
			c.AckedTombstone(0, 3, "k1", "t1", tombNow.Add(-time.Minute))
			c.Final(0, []Record{krec(0, 1, "k2", "b"), ktomb(0, 3, "k1", "t1")}, 4)
		}, "", false},
		{"a tombstone gone within delete.retention.ms", func(c *Checker) {
			acks(c)
			c.AckedTombstone(0, 3, "k1", "t1", tombNow.Add(-time.Minute))
			c.Final(0, []Record{krec(0, 1, "k2", "b")}, 4)
		}, LostWrite, false},
		{"a tombstone expired with its key", func(c *Checker) {
			acks(c)
			c.AckedTombstone(0, 3, "k1", "t1", tombNow.Add(-2*time.Hour))
			c.Final(0, []Record{krec(0, 1, "k2", "b")}, 4)
		}, "", false},
		{"a tombstone superseded by a newer value", func(c *Checker) {
			acks(c)
			c.AckedTombstone(0, 3, "k1", "t1", tombNow.Add(-time.Minute))
			c.AckedKey(0, 4, "k1", "d")
			c.Final(0, []Record{krec(0, 1, "k2", "b"), krec(0, 4, "k1", "d")}, 5)
		}, "", false},
		{"a deleted value back as the newest", func(c *Checker) {
			acks(c)
			c.AckedTombstone(0, 3, "k1", "t1", tombNow.Add(-2*time.Hour))
			c.Final(0, []Record{krec(0, 1, "k2", "b"), krec(0, 2, "k1", "c")}, 4)
		}, Resurrected, false},
		{"values gone below a tombstone of unknown outcome", func(c *Checker) {
			acks(c)
			c.MaybeTombstone("k1")
			c.Final(0, []Record{krec(0, 1, "k2", "b")}, 4)
		}, "", false},
		{"a deleted key gone, its tombstone expired", func(c *Checker) {
			acks(c)
			c.AckedTombstone(0, 3, "k2", "t2", tombNow.Add(-2*time.Hour))
			c.Final(0, []Record{krec(0, 2, "k1", "c")}, 4)
		}, "", false},
		{"the newest value gone, a tombstone of another key expired", func(c *Checker) {
			acks(c)
			c.AckedTombstone(0, 3, "k2", "t2", tombNow.Add(-2*time.Hour))
			c.Final(0, []Record{krec(0, 0, "k1", "a")}, 4)
		}, LostWrite, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCompacted()
			c.DeleteRetention(time.Hour, func() time.Time { return tombNow })
			tc.run(c)
			res := c.Result()
			checkViolated(t, res, tc.want)
			if tc.want != "" {
				return
			}
			d := New()
			tc.run(d)
			if got := d.Result().Valid(); got != tc.dense {
				t.Errorf("the dense checker's Valid() = %v, want %v: %v", got, tc.dense, d.Result().Errors())
			}
		})
	}
}

// TestTombstoneCounts: the compacted checker counts the acknowledged
// tombstones, those read, and those expired with their key.
func TestTombstoneCounts(t *testing.T) {
	c := NewCompacted()
	c.DeleteRetention(time.Hour, func() time.Time { return tombNow })
	c.AckedKey(0, 0, "k1", "a")
	c.AckedTombstone(0, 1, "k1", "t1", tombNow.Add(-2*time.Hour))
	c.AckedKey(0, 2, "k2", "b")
	c.AckedTombstone(0, 3, "k2", "t2", tombNow.Add(-time.Minute))
	c.Final(0, []Record{ktomb(0, 3, "k2", "t2")}, 4)
	if !c.Result().Valid() {
		t.Fatal(c.Result().Errors())
	}
	if acked, read, expired := c.TombstoneCounts(); acked != 2 || read != 1 || expired != 1 {
		t.Errorf("tombstone counts %d acknowledged, %d read, %d expired; want 2, 1, 1", acked, read, expired)
	}
}

// checkViolated fails t unless res has violations of property violated
// and of no other (none at all when violated is ""), and Valid says so.
func checkViolated(t *testing.T, res Result, violated string) {
	t.Helper()
	for _, p := range Properties {
		if got, want := res.Counts[p] > 0, p == violated; got != want {
			t.Errorf("%s: %d violations, want them %v: %v", p, res.Counts[p], want, res.Examples[p])
		}
	}
	if res.Valid() != (violated == "") {
		t.Errorf("Valid() = %v", res.Valid())
	}
}
