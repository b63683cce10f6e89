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

// The adapter hands the workload's terms to the history checker: a valid
// history passes, and a violation comes back as text naming its property.
// (history_test.go covers every property.)
func TestCheckerAdapter(t *testing.T) {
	c := NewChecker()
	c.Acked(0, []string{"a", "b"}, 0)
	c.Read(0, "r", 0, recs("a"), 1)
	c.Read(0, "r", 1, []Record{{Offset: 1, Value: []byte("b")}}, 2)
	c.Final(0, recs("a", "b", "c"), 3)
	if errs := c.Errors(); len(errs) > 0 {
		t.Fatalf("valid history rejected: %v", errs)
	}
	c.Failed(1, []string{"x"})
	c.Acked(1, []string{"y"}, 0)
	c.Final(1, recs("x"), 1)
	c.Acked(2, []string{"z"}, 0)
	errs := strings.Join(c.Errors(), "\n")
	for _, want := range []string{"failed-written", "lost-write", "partition 2: no final read"} {
		if !strings.Contains(errs, want) {
			t.Errorf("want an error containing %q, got %v", want, errs)
		}
	}
	if got, want := c.Summary(), "4 acked, 1 definitely failed, 4 distinct values read"; got != want {
		t.Errorf("Summary() = %q, want %q", got, want)
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
