package celltest

import (
	"strings"
	"testing"
)

func recs(vals ...string) []Record {
	out := make([]Record, len(vals))
	for i, v := range vals {
		out[i] = Record{Offset: int64(i), Value: []byte(v)}
	}
	return out
}

// TestCheckerCatches feeds the checker histories that break one property
// each, and one valid history.
func TestCheckerCatches(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(c *Checker)
		want string // substring of the first error; "" means valid
	}{
		{"valid", func(c *Checker) {
			c.Acked(0, []string{"a", "b"}, 0)
			c.Read(0, "r", 0, recs("a"), 1)
			c.Read(0, "r", 1, []Record{{Offset: 1, Value: []byte("b")}}, 2)
			c.Final(0, recs("a", "b", "c"), 3)
		}, ""},
		{"lost write", func(c *Checker) {
			c.Acked(0, []string{"a"}, 0)
			c.Acked(0, []string{"b"}, 1)
			c.Final(0, recs("a"), 1)
		}, "lost write"},
		{"inconsistent offsets", func(c *Checker) {
			c.Read(0, "r", 0, recs("a"), 1)
			c.Final(0, recs("b"), 1)
		}, "inconsistent offsets"},
		{"duplicate", func(c *Checker) {
			c.Final(0, recs("a", "a"), 2)
		}, "duplicate"},
		{"high watermark back", func(c *Checker) {
			c.Read(0, "r", 0, nil, 5)
			c.Read(0, "r", 0, nil, 4)
			c.Final(0, recs("a", "b", "c", "d", "e"), 5)
		}, "go back"},
		{"offset gap in a read", func(c *Checker) {
			c.Read(0, "r", 0, []Record{{Offset: 0, Value: []byte("a")}, {Offset: 2, Value: []byte("b")}}, 3)
			c.Final(0, recs("a", "x", "b"), 3)
		}, "not dense"},
		{"read above the high watermark", func(c *Checker) {
			c.Read(0, "r", 0, recs("a", "b"), 1)
			c.Final(0, recs("a", "b"), 2)
		}, "at or above the high watermark"},
		{"read then lost", func(c *Checker) {
			c.Read(0, "r", 0, recs("a", "b"), 2)
			c.Final(0, recs("a"), 1)
		}, "were read"},
		{"failed write appears", func(c *Checker) {
			c.Failed(0, []string{"a"})
			c.Final(0, recs("a"), 1)
		}, "never written"},
		{"no final read", func(c *Checker) { c.Acked(0, []string{"a"}, 0) }, "no final read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChecker()
			tc.run(c)
			errs := c.Errors()
			if tc.want == "" {
				if len(errs) > 0 {
					t.Fatalf("valid history rejected: %v", errs)
				}
				return
			}
			if len(errs) == 0 || !strings.Contains(strings.Join(errs, "\n"), tc.want) {
				t.Fatalf("want an error containing %q, got %v", tc.want, errs)
			}
		})
	}
}

func TestBatchRoundTrip(t *testing.T) {
	b := Batch([]byte("one"), []byte(""), []byte("three"))
	rs, err := Records(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 || string(rs[0].Value) != "one" || len(rs[1].Value) != 0 || string(rs[2].Value) != "three" || rs[2].Offset != 2 {
		t.Fatalf("%+v", rs)
	}
}
