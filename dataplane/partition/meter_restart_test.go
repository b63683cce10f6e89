package partition_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"hash/crc64"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/partition"
)

// stripMeter rewrites every snapshot under dir as a version that metered
// produce at its front doors wrote it: without "meter" (and the meta's
// size and CRC to match).
func stripMeter(t *testing.T, dir string) int {
	t.Helper()
	states, err := filepath.Glob(filepath.Join(dir, "*", "snapshots", "snapshots", "*", "state.bin"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range states {
		out := editJSON(t, path, func(st map[string]json.RawMessage) { delete(st, "meter") })
		editJSON(t, filepath.Join(filepath.Dir(path), "meta.json"), func(meta map[string]json.RawMessage) {
			h := crc64.New(crc64.MakeTable(crc64.ECMA))
			h.Write(out)
			meta["Size"], _ = json.Marshal(len(out))
			meta["CRC"], _ = json.Marshal(base64.StdEncoding.EncodeToString(h.Sum(nil)))
		})
		if bytes.Contains(out, []byte(`"meter"`)) {
			t.Fatalf("%s still has meter state", path)
		}
	}
	return len(states)
}

// editJSON rewrites the JSON object in the file at path as edit changes
// it, and returns the bytes written.
func editJSON(t *testing.T, path string, edit func(map[string]json.RawMessage)) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	edit(obj)
	out, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMeterUpgradeFromFrontDoorMetering: a cell of the older version
// (no produce metering from the log; its front doors counted) takes
// batches and snapshots each replica at a different point, then every
// broker restarts on this version from those snapshots: the new leader
// starts metering from the log, and the recorded ranges, folded as the
// ledger folds them, hold exactly what was produced after the upgrade,
// none of the batches each replica applied again after its snapshot.
func TestMeterUpgradeFromFrontDoorMetering(t *testing.T) {
	rl := &rangeLog{}
	var upgraded atomic.Bool
	c := celltest.New(t, celltest.Options{MeterInterval: 20 * time.Millisecond, Meter: func(b, part int) partition.MeterSink {
		if !upgraded.Load() {
			return nil // the older version: no meter loop, no closes in the log
		}
		return rl.sink(b, part)
	}})
	celltest.WaitFor(t, waitLong, "the preferred leader (broker 0) to lead", func() bool { return c.Leader(0) == 0 })
	var before produced
	for b := 0; b < c.Brokers(); b++ {
		before.produce(t, c, 10)
		if err := c.Replica(b, 0).Raft().Snapshot().Error(); err != nil {
			t.Fatal(err)
		}
	}
	before.produce(t, c, 10) // after every snapshot
	for b := 0; b < c.Brokers(); b++ {
		c.StopBroker(b)
	}
	n := 0
	for b := 0; b < c.Brokers(); b++ {
		n += stripMeter(t, c.Dir(b))
	}
	if n < c.Brokers() {
		t.Fatalf("%d snapshots on disk, want at least one per broker", n)
	}
	upgraded.Store(true)
	for b := 0; b < c.Brokers(); b++ {
		c.StartBroker(b)
	}
	// The preferred leader (broker 0) leads, so no transfer ends a
	// leadership while the test produces, and the start has applied.
	celltest.WaitFor(t, waitLong, "the preferred leader to lead and the start to apply on every replica", func() bool {
		if c.Leader(0) != 0 {
			return false
		}
		for b := 0; b < c.Brokers(); b++ {
			if partition.MeterNeedsStart(c.Replica(b, 0)) {
				return false
			}
		}
		return true
	})
	var after produced
	after.produce(t, c, 20)
	last := waitAllClosed(t, c)
	if last.End != before.records+after.records {
		t.Fatalf("last range ends at %d, want the high watermark %d", last.End, before.records+after.records)
	}
	celltest.WaitFor(t, waitLong, "the last range to be recorded", func() bool { return rl.has(c.Leader(0), last.End) })
	if b, r := rl.totals(); b != after.bytes || r != after.records {
		t.Fatalf("recorded ranges hold %d bytes, %d records; produced %d bytes, %d records after the upgrade (%d bytes before it)",
			b, r, after.bytes, after.records, before.bytes)
	}
}
