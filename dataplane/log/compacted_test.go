package log

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCompactedRollsOnlyWhenTold: a compacted log does not roll by
// segment.bytes or segment.ms on its own (its rolls are replicated, so that
// every replica cuts its segments at the same offsets); RollDue says when
// the leader should replicate one. A deleting log rolls by size itself.
func TestCompactedRollsOnlyWhenTold(t *testing.T) {
	for _, tc := range []struct {
		name      string
		compacted bool
	}{{"compacted", true}, {"deleting", false}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := cleanConfig(t, t.TempDir())
			cfg.Compacted = tc.compacted
			l := openLog(t, cfg)
			for i := range 200 {
				if _, _, err := l.Append(keyedBatch(int64(i), kv{key: []byte("k"), value: make([]byte, 512)}), 1); err != nil {
					t.Fatal(err)
				}
			}
			if n := len(l.Segments()); tc.compacted != (n == 1) {
				t.Fatalf("%d segments after 100 KiB on 16 KiB segments", n)
			}
			if !tc.compacted {
				return
			}
			if !l.RollDue() {
				t.Fatal("a segment past segment.bytes is not due to roll")
			}
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
			if l.RollDue() || len(l.Segments()) != 2 {
				t.Fatalf("after the roll: due %v, %d segments", l.RollDue(), len(l.Segments()))
			}
		})
	}
}

// TestCompactedMarkOutlivesPolicy: a log opened compacted and cleaned is
// recovered with its gaps even when reopened as not compacted (its topic
// stopped compacting): the marker file keeps recovery from cutting it at
// the first gap.
func TestCompactedMarkOutlivesPolicy(t *testing.T) {
	cfg := cleanConfig(t, t.TempDir())
	l := openLog(t, cfg)
	h := randomHistory(3, 400, 10, true)
	h.write(t, l)
	if _, err := l.Clean(context.Background(), CleanParams{UpTo: l.NextOffset(), Now: farFuture}); err != nil {
		t.Fatal(err)
	}
	want := logRecords(t, l)
	next := l.NextOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.Compacted = false
	l = openLog(t, cfg)
	if rep := l.Recovery(); rep.Cut() || l.NextOffset() != next {
		t.Fatalf("recovery cut a compacted log: %+v, next %d want %d", rep, l.NextOffset(), next)
	}
	checkRecords(t, logRecords(t, l), want)
	if _, err := l.Clean(context.Background(), CleanParams{UpTo: next, Now: farFuture}); err == nil {
		t.Fatal("Clean ran on a log no longer compacted")
	}
	if err := l.Reconfigure(Settings{Compacted: true}); err != nil {
		t.Fatal(err)
	}
	if !l.Compacted() {
		t.Fatal("Reconfigure did not make the log compacted")
	}
}

// TestCleanComposes: cleaning to a point and later cleaning further, with
// a later "now", writes the same bytes as the later cleaning alone. So a
// replica that applies only the newest of several compaction decisions
// (it was down, or seeded) holds what the others hold.
func TestCleanComposes(t *testing.T) {
	src := t.TempDir()
	cfg := cleanConfig(t, src)
	l := openLog(t, cfg)
	h := randomHistory(11, 3000, 40, true)
	h.write(t, l)
	segs := l.Segments()
	end := l.NextOffset()
	l.Close()
	mid := segs[len(segs)/2]
	first := CleanParams{UpTo: mid, Now: h.ts0 + int64(h.recordCount()/3), DeleteRetention: 500 * time.Millisecond}
	second := CleanParams{UpTo: end, Now: h.endTS() + 200, DeleteRetention: 500 * time.Millisecond, MinCompactionLag: 100 * time.Millisecond}
	dirs := []string{filepath.Join(t.TempDir(), "twice"), filepath.Join(t.TempDir(), "once")}
	for i, dir := range dirs {
		copyDir(t, src, dir)
		c := cfg
		c.Dir = dir
		l := openLog(t, c)
		steps := []CleanParams{first, second}
		if i == 1 {
			steps = steps[1:]
		}
		for _, p := range steps {
			if _, err := l.Clean(context.Background(), p); err != nil {
				t.Fatal(err)
			}
		}
		l.Close()
	}
	a, b := dirSums(t, dirs[0]), dirSums(t, dirs[1])
	if len(a) != len(b) {
		t.Fatalf("%d segment files after two cleanings, %d after one", len(a), len(b))
	}
	for name, sum := range a {
		if b[name] != sum {
			t.Errorf("segment %s differs between two cleanings and one", name)
		}
	}
}

// TestCheckKeyed: a batch with a keyless record is refused with
// ErrKeylessRecord, compressed or not; an empty key is a key.
func TestCheckKeyed(t *testing.T) {
	keyed := keyedBatch(1, kv{key: []byte("a"), value: []byte("1")}, kv{key: []byte{}, value: []byte("2")}, kv{key: []byte("b")})
	keyless := keyedBatch(1, kv{key: []byte("a"), value: []byte("1")}, kv{value: []byte("2")})
	if err := CheckKeyed(keyed); err != nil {
		t.Fatalf("keyed batch: %v", err)
	}
	if err := CheckKeyed(keyless); !errors.Is(err, ErrKeylessRecord) {
		t.Fatalf("keyless batch: %v, want ErrKeylessRecord", err)
	}
	if err := CheckKeyed(compressBatch(t, keyless, kgo.SnappyCompression())); !errors.Is(err, ErrKeylessRecord) {
		t.Fatalf("compressed keyless batch: %v, want ErrKeylessRecord", err)
	}
	if err := CheckKeyed(keyless[:len(keyless)-3]); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("torn batch: %v, want ErrCorruptBatch", err)
	}
}
