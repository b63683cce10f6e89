package lag

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/sluicehq/sluice/dataplane/celltest"
	dlog "github.com/sluicehq/sluice/dataplane/log"
)

// batchAt is a client batch of n records of size bytes each, all
// timestamped ts (ms).
func batchAt(ts int64, n, size int) []byte {
	vals := make([][]byte, n)
	for i := range vals {
		vals[i] = make([]byte, size)
	}
	b := celltest.Batch(vals...)
	binary.BigEndian.PutUint64(b[27:], uint64(ts))
	binary.BigEndian.PutUint64(b[35:], uint64(ts))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// logPartition is a real partition log with a high watermark set by the
// test, as a replica's FSM would set it.
type logPartition struct {
	*dlog.Log
	hw int64
}

func (p *logPartition) HighWatermark() int64 { return p.hw }

// openPartition opens a log with small segments and appends batches, each
// of 2 records of 100 bytes, timestamped ts[i]; the high watermark is the
// log end. It returns the partition and each batch's size.
func openPartition(t *testing.T, ts ...int64) (*logPartition, []int64) {
	t.Helper()
	l, err := dlog.Open(context.Background(), dlog.Config{Dir: t.TempDir(), SegmentBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var sizes []int64
	for _, x := range ts {
		b := batchAt(x, 2, 100)
		if _, _, err := l.Append(b, 1); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, int64(len(b)))
	}
	return &logPartition{Log: l, hw: l.NextOffset()}, sizes
}
