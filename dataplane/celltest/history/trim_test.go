package history

import "testing"

// TestTrimmedRecords: records below the log start are excused only as far
// as MayTrim allowed the log start to move.
func TestTrimmedRecords(t *testing.T) {
	recs := func(from int64, vals ...string) []Record {
		var out []Record
		for i, v := range vals {
			out = append(out, Record{Part: 0, Offset: from + int64(i), Value: v})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		run  func(c *Checker)
		want string // the property violated, "" for none
	}{
		{"trimmed and read from the log start", func(c *Checker) {
			for i, v := range []string{"a", "b", "c", "d"} {
				c.Acked(0, int64(i), v)
			}
			c.MayTrim(0, 2)
			c.Skipped("r", 0, 0, 2)
			c.FinalFrom(0, 2, recs(2, "c", "d"), 4)
		}, ""},
		{"log start beyond what was trimmed", func(c *Checker) {
			for i, v := range []string{"a", "b", "c", "d"} {
				c.Acked(0, int64(i), v)
			}
			c.MayTrim(0, 1)
			c.FinalFrom(0, 2, recs(2, "c", "d"), 4)
		}, LostWrite},
		{"never trimmed", func(c *Checker) {
			c.Acked(0, 0, "a")
			c.Acked(0, 1, "b")
			c.FinalFrom(0, 1, recs(1, "b"), 2)
		}, LostWrite},
		{"reader skipped past the trim", func(c *Checker) {
			c.Acked(0, 0, "a")
			c.MayTrim(0, 1)
			c.Skipped("r", 0, 0, 3)
			c.Final(0, recs(0, "a"), 1)
		}, PollSkip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New()
			tc.run(c)
			r := c.Result()
			if tc.want == "" && !r.Valid() {
				t.Fatalf("violations: %v", r.Errors())
			}
			if tc.want != "" && r.Counts[tc.want] == 0 {
				t.Fatalf("no %s; got %v", tc.want, r.Errors())
			}
		})
	}
}
