package celltest

import (
	"context"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/dataplane/usage"
)

// UsageLog is a usage partition in memory: what a broker's flusher
// appends (a usage.Appender). The zero value is ready; it is safe for
// concurrent use.
type UsageLog struct {
	mu      sync.Mutex
	batches [][]byte
}

// Produce appends a copy of the batch b and returns its offset.
func (l *UsageLog) Produce(_ context.Context, b []byte) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.batches = append(l.batches, append([]byte(nil), b...))
	return int64(len(l.batches) - 1), nil
}

// Totals sums the log's entries by meter, each flush (node, boot, seq)
// once, as the ledger does. A record that does not decode fails t.
func (l *UsageLog) Totals(t testing.TB) map[string]int64 {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[[3]any]bool{}
	out := map[string]int64{}
	for _, b := range l.batches {
		if _, err := usage.EachValue(b, func(_ int64, v []byte) error {
			r, err := usage.Decode(v)
			if err != nil {
				return err
			}
			if k := [3]any{r.Node, r.Boot, r.Seq}; !seen[k] {
				seen[k] = true
				for _, e := range r.Entries {
					out[e.Meter] += e.Value
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}
