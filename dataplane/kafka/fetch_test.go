package kafka

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/dataplane/log"
)

// TestWriteFetchDecodes checks the hand-written Fetch encoding against
// kmsg's decoder at every served version: fixed fields, the records from
// the segment file, and a partition with an error and no records.
func TestWriteFetchDecodes(t *testing.T) {
	l, err := log.Open(context.Background(), log.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 3 {
		if _, _, err := l.Append(makeBatch("v", string(rune('a'+i))), 4); err != nil {
			t.Fatal(err)
		}
	}
	for v := apis[1].min; v <= apis[1].max; v++ {
		s, err := l.Read(0, math.MaxInt32, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		want, err := s.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		topics := []fetchTopic{
			{name: "orders", parts: []fetchPart{{partition: 2, hw: 6, logStart: 0, records: s}, {partition: 0, errCode: 6, hw: -1, logStart: -1, named: true, leader: 3, leaderEpoch: 7}}},
			{name: "t2", parts: []fetchPart{{partition: 1, errCode: 3, hw: -1, logStart: -1}}},
		}
		var buf bytes.Buffer
		req := &request{key: 1, version: v, corr: 42, flexible: v >= 12}
		if err := writeFetch(&buf, time.Time{}, req, 0, 0, topics); err != nil {
			t.Fatal(err)
		}
		s.Release()
		b := buf.Bytes()
		if got := int(binary.BigEndian.Uint32(b)); got != len(b)-4 {
			t.Fatalf("v%d: size prefix %d, frame %d", v, got, len(b)-4)
		}
		if corr := int32(binary.BigEndian.Uint32(b[4:])); corr != 42 {
			t.Fatalf("v%d: correlation id %d", v, corr)
		}
		body := b[8:]
		if v >= 12 {
			body = body[1:] // empty header tags
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = v
		if err := resp.ReadFrom(body); err != nil {
			t.Fatalf("v%d: decode: %v", v, err)
		}
		if len(resp.Topics) != 2 || resp.Topics[0].Topic != "orders" || resp.Topics[1].Topic != "t2" {
			t.Fatalf("v%d: topics %+v", v, resp.Topics)
		}
		p := resp.Topics[0].Partitions[0]
		if p.Partition != 2 || p.ErrorCode != 0 || p.HighWatermark != 6 || p.LastStableOffset != 6 || !bytes.Equal(p.RecordBatches, want) {
			t.Fatalf("v%d: partition %+v", v, p)
		}
		if v >= 5 && p.LogStartOffset != 0 {
			t.Fatalf("v%d: log start %d", v, p.LogStartOffset)
		}
		if v >= 11 && p.PreferredReadReplica != -1 {
			t.Fatalf("v%d: preferred read replica %d", v, p.PreferredReadReplica)
		}
		if e := resp.Topics[0].Partitions[1]; e.Partition != 0 || e.ErrorCode != 6 || len(e.RecordBatches) != 0 {
			t.Fatalf("v%d: error partition %+v", v, e)
		}
		// v12+ names the leader in the tagged CurrentLeader; other
		// partitions carry kmsg's default (-1, -1).
		if e := resp.Topics[0].Partitions[1]; v >= 12 && (e.CurrentLeader.LeaderID != 3 || e.CurrentLeader.LeaderEpoch != 7) {
			t.Fatalf("v%d: not-leader partition's current leader %+v, want node 3 epoch 7", v, e.CurrentLeader)
		}
		if v >= 12 && (p.CurrentLeader.LeaderID != -1 || p.CurrentLeader.LeaderEpoch != -1) {
			t.Fatalf("v%d: served partition's current leader %+v, want none", v, p.CurrentLeader)
		}
		if e := resp.Topics[1].Partitions[0]; e.ErrorCode != 3 {
			t.Fatalf("v%d: second topic %+v", v, e)
		}
		if v >= 7 && (resp.ErrorCode != 0 || resp.SessionID != 0) {
			t.Fatalf("v%d: session %d error %d", v, resp.SessionID, resp.ErrorCode)
		}
		// The records decode as the batches that were appended.
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(p.RecordBatches); err != nil || rb.PartitionLeaderEpoch != 4 {
			t.Fatalf("v%d: first batch %+v %v", v, rb, err)
		}
	}
}
