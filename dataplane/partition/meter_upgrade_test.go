package partition

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/raftlog"
)

// upgradeLog is a partition's log across an upgrade from front-door
// metering: batches 0-5 appended by leaders of terms 2 and 3 running the
// older version (each metered where it was produced), then the first
// leader of the new version (term 4) appends batches 6 and 7, its start
// entry, batch 8 and a close.
func upgradeLog() (entries []*raft.Log, newBytes int64) {
	idx := uint64(1)
	add := func(l *raft.Log) {
		l.Index = idx
		idx++
		entries = append(entries, l)
	}
	for base := int64(0); base < 9; base++ {
		term := uint64(2 + base/3)
		if base >= 6 {
			term = 4
		}
		if base == 8 {
			add(&raft.Log{Term: 4, Type: raft.LogCommand, Data: raftlog.EncodeMeterStart(1_800_000_000_000), Extensions: raftlog.ControlExtension})
		}
		b := idempotentBatch(base, int32(term), -1, 0, 0)
		if term == 4 {
			newBytes += int64(len(b))
		}
		add(&raft.Log{Term: term, Type: raft.LogCommand, Data: b})
	}
	add(&raft.Log{Term: 4, Type: raft.LogCommand, Data: raftlog.EncodeMeterClose(1_800_000_001_000), Extensions: raftlog.ControlExtension})
	return entries, newBytes
}

// meterless persists f's state as the older version wrote it: no "meter".
func meterless(t *testing.T, f *fsm) io.ReadCloser {
	t.Helper()
	var st map[string]json.RawMessage
	if err := json.Unmarshal(persist(t, f).Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	delete(st, "meter")
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return io.NopCloser(bytes.NewReader(b))
}

func applyAll(t *testing.T, f *fsm, entries []*raft.Log) {
	t.Helper()
	for _, l := range entries {
		if res, ok := f.Apply(l).(applyResult); ok && res.err != nil {
			t.Fatalf("apply %d: %v", l.Index, res.err)
		}
	}
}

// TestMeterUpgradeCountsOnce: after an upgrade from front-door metering,
// replicas restored from the older version's snapshots (at different
// points) and a replica that applies the whole log all close the same
// range, holding exactly the new version's batches: the batches applied
// again after each snapshot were metered where they were produced and are
// not counted a second time. Only a restored replica asks for a start; a
// state persisted after the start keeps it.
func TestMeterUpgradeCountsOnce(t *testing.T) {
	entries, newBytes := upgradeLog()
	fresh := &fsm{store: startAt(0)}
	applyAll(t, fresh, entries[:6]) // batches 0-5
	if fresh.meterNeedsStart() {
		t.Fatal("a replica that applied the log from its first batch asks for a start")
	}
	fresh = &fsm{store: startAt(0)}

	// Replicas of the older version, snapshotted after batches 2 and 4.
	var restored []*fsm
	for _, at := range []int{3, 5} {
		old := &fsm{store: startAt(0)}
		applyAll(t, old, entries[:at])
		r := &fsm{store: startAt(0)}
		if err := r.Restore(meterless(t, old)); err != nil {
			t.Fatal(err)
		}
		applyAll(t, r, entries[at:6])
		if !r.meterNeedsStart() {
			t.Fatalf("a replica restored from a snapshot without metering at %d asks for no start", at)
		}
		restored = append(restored, r)
	}
	startIdx := 8 // entries[8] is the start
	for _, f := range append([]*fsm{fresh}, restored...) {
		from := 6
		if f == fresh {
			from = 0
		}
		applyAll(t, f, entries[from:startIdx+1])
		if f.meterNeedsStart() {
			t.Fatal("a start is asked for after the start")
		}
	}
	// A replica restored from a snapshot taken after the start.
	after := restoreCopy(t, restored[0])
	if after.meterNeedsStart() {
		t.Fatal("a state persisted after the start asks for another")
	}
	want := MeterRange{End: 9, Hour: 1_800_000_000 - 1_800_000_000%3600, Bytes: newBytes, Records: 3}
	for i, f := range append([]*fsm{fresh, after}, restored...) {
		applyAll(t, f, entries[startIdx+1:])
		if got, pending := f.meter(); got != want || pending {
			t.Errorf("replica %d closed %+v (pending %v), want %+v: the new version's batches 6-8 only", i, got, pending, want)
		}
	}
}

// TestMeterStateWithoutFlag: a snapshot of a version that metered from
// the log before from_log existed is read as metered from the log (its
// leader closes, it does not start again).
func TestMeterStateWithoutFlag(t *testing.T) {
	f := &fsm{store: startAt(0)}
	raw := `{"high_watermark":12,"epochs":[{"epoch":3,"start_offset":0}],"log_start_offset":0,"meter":{"pending_bytes":70,"pending_records":1,"closed":{"end":11,"hour":1800000000,"bytes":700,"records":11}}}`
	if err := f.Restore(io.NopCloser(bytes.NewReader([]byte(raw)))); err != nil {
		t.Fatal(err)
	}
	if f.meterNeedsStart() || !f.st.Meter.FromLog || f.st.Meter.PendingBytes != 70 || f.st.Meter.Closed.End != 11 {
		t.Fatalf("restored meter %+v", f.st.Meter)
	}
}

// MeterNeedsStart reports whether r's meter state asks its leader for a
// start (meterState.FromLog), for the upgrade tests outside the package.
func MeterNeedsStart(r *Replica) bool { return r.fsm.meterNeedsStart() }
