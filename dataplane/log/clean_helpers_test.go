package log

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// kv is one record for keyedBatch: a nil key is keyless, a nil value a
// tombstone.
type kv struct {
	key, value []byte
}

// keyedBatch encodes an uncompressed v2 batch with kmsg; record i has
// timestamp ts+i.
func keyedBatch(ts int64, recs ...kv) []byte {
	var body []byte
	for i, r := range recs {
		rec := kmsg.Record{TimestampDelta64: int64(i), OffsetDelta: int32(i), Key: r.key, Value: r.value}
		enc := rec.AppendTo(nil)[1:]
		rec.Length = int32(len(enc))
		body = rec.AppendTo(body)
	}
	b := kmsg.RecordBatch{
		Magic: 2, LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: ts, MaxTimestamp: ts + int64(len(recs)-1),
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(len(recs)), Records: body,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[offLength:], uint32(len(out)-lengthOverhead))
	binary.BigEndian.PutUint32(out[offCRC:], crc32.Checksum(out[offAttributes:], castagnoli))
	return out
}

// gotRecord is a record read back from a log, decoded with kmsg.
type gotRecord struct {
	offset    int64
	ts        int64
	key       string
	keyed     bool
	value     string
	tombstone bool
}

// logRecords reads the log from its start with Read and decodes every
// record with kmsg (independently of the cleaner's own decoder).
func logRecords(t testing.TB, l *Log) []gotRecord {
	t.Helper()
	var out []gotRecord
	for _, b := range splitCompacted(t, readAll(t, l, l.LogStartOffset())) {
		out = append(out, decodeRecords(t, b)...)
	}
	return out
}

func decodeRecords(t testing.TB, b []byte) []gotRecord {
	t.Helper()
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		t.Fatalf("decode batch: %v", err)
	}
	recs := rb.Records
	var out []gotRecord
	for range rb.NumRecords {
		n, m := binary.Varint(recs)
		if m <= 0 {
			t.Fatalf("bad record length")
		}
		var r kmsg.Record
		if err := r.ReadFrom(recs[:m+int(n)]); err != nil {
			t.Fatalf("decode record: %v", err)
		}
		recs = recs[m+int(n):]
		out = append(out, gotRecord{
			offset: rb.FirstOffset + int64(r.OffsetDelta), ts: rb.FirstTimestamp + r.TimestampDelta64,
			key: string(r.Key), keyed: r.Key != nil, value: string(r.Value), tombstone: r.Value == nil,
		})
	}
	if len(recs) != 0 {
		t.Fatalf("batch %d: %d bytes after its records", rb.FirstOffset, len(recs))
	}
	return out
}

// history is a workload: batches of keyed updates, tombstones and keyless
// records, appended with timestamps from ts0, one millisecond per record.
type history struct {
	batches [][]kv
	ts0     int64
}

func randomHistory(seed uint64, batches, keys int, tombstones bool) history {
	rng := rand.New(rand.NewPCG(seed, 7))
	h := history{ts0: 1_700_000_000_000}
	n := 0
	for range batches {
		var recs []kv
		for range 1 + rng.IntN(6) {
			n++
			switch x := rng.IntN(20); {
			case x == 0:
				recs = append(recs, kv{value: []byte("keyless-" + itoa(n))})
			case x == 1 && tombstones:
				recs = append(recs, kv{key: []byte("k" + itoa(rng.IntN(keys)))})
			default:
				recs = append(recs, kv{key: []byte("k" + itoa(rng.IntN(keys))), value: []byte(strings.Repeat("v", rng.IntN(200)) + itoa(n))})
			}
		}
		h.batches = append(h.batches, recs)
	}
	return h
}

func itoa(n int) string { return strconv.Itoa(n) }

// write appends the history to l and rolls, so every segment is closed.
func (h history) write(t testing.TB, l *Log) {
	t.Helper()
	ts := h.ts0
	for _, recs := range h.batches {
		appendRolling(t, l, keyedBatch(ts, recs...))
		ts += int64(len(recs))
	}
	if err := l.Roll(); err != nil {
		t.Fatalf("roll: %v", err)
	}
}

// appendRolling appends b and rolls when the segment is due, as the
// replication layer does for a compacted log (a compacted log does not roll
// by size on its own).
func appendRolling(t testing.TB, l *Log, b []byte) {
	t.Helper()
	if _, _, err := l.Append(b, 1); err != nil {
		t.Fatalf("append: %v", err)
	}
	if l.RollDue() {
		if err := l.Roll(); err != nil {
			t.Fatalf("roll: %v", err)
		}
	}
}

// model is what a compacted log must hold: from every record of the
// history, the newest per key and every keyless one, minus tombstones whose
// batch is older than expiry.
func (h history) model(expiry int64) []gotRecord {
	var all []gotRecord
	expired := map[int64]bool{}
	newest := map[string]int64{}
	ts, off := h.ts0, int64(0)
	for _, recs := range h.batches {
		maxTS := ts + int64(len(recs)-1)
		for _, r := range recs {
			g := gotRecord{offset: off, ts: ts, key: string(r.key), keyed: r.key != nil, value: string(r.value), tombstone: r.value == nil}
			expired[off] = g.tombstone && maxTS < expiry
			all = append(all, g)
			if g.keyed {
				newest[g.key] = off
			}
			off++
			ts++
		}
	}
	var out []gotRecord
	for _, g := range all {
		if g.keyed && newest[g.key] != g.offset {
			continue
		}
		if expired[g.offset] {
			continue
		}
		out = append(out, g)
	}
	return out
}

// dirSums returns the SHA-256 of every segment log file in dir by name.
func dirSums(t testing.TB, dir string) map[string]string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*"+logSuffix))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(b)
		out[filepath.Base(n)] = hex.EncodeToString(s[:])
	}
	return out
}

// copyDir copies the regular files of src into a new directory.
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	names, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		in, err := os.Open(filepath.Join(src, n.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, n.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		in.Close()
		out.Close()
	}
}

func sortedKeys(m map[string]string) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}

// splitCompacted splits concatenated batches, checking each whole: framing
// as the cleaner leaves it (fewer records than the offset range allows),
// offsets that only grow, and the CRC.
func splitCompacted(t testing.TB, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	next := int64(-1)
	for len(b) > 0 {
		h, err := ParseHeader(b)
		if err != nil || h.Size() > int64(len(b)) {
			t.Fatalf("split batches: %v (%d bytes left)", err, len(b))
		}
		if err := checkCompactedFields(h); err != nil {
			t.Fatalf("split batches: %v", err)
		}
		if err := checkCRC(b[:h.Size()], h); err != nil {
			t.Fatalf("split batches: %v", err)
		}
		if h.BaseOffset < next {
			t.Fatalf("split batches: batch %d after batch ending at %d", h.BaseOffset, next)
		}
		next = h.NextOffset()
		out = append(out, b[:h.Size()])
		b = b[h.Size():]
	}
	return out
}

// endTS is the timestamp of the history's last record.
func (h history) endTS() int64 {
	n := 0
	for _, b := range h.batches {
		n += len(b)
	}
	return h.ts0 + int64(n) - 1
}

// recordCount is how many records the history appends.
func (h history) recordCount() int {
	n := 0
	for _, b := range h.batches {
		n += len(b)
	}
	return n
}
